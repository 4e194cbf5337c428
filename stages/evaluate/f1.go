package evaluate

import (
	"fmt"

	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/workflows"
)

// f1Sum sums answer F1s (rollout.Episode.F1, PromptRow.F1Mean), skipping the nil ones of a
// workflow without F1, in the order they are added.
type f1Sum struct {
	sum float64
	n   int
}

func (s *f1Sum) add(x *float64) {
	if x != nil {
		s.sum += *x
		s.n++
	}
}

// mean is the mean of what was added, nil when nothing was.
func (s f1Sum) mean() *float64 {
	if s.n == 0 {
		return nil
	}
	m := s.sum / float64(s.n)
	return &m
}

// sourceF1 is the mean over each data source's prompts (and over all of them, under
// workflows.AllSources) of their mean F1, summed in the prompts' order; a source none of
// whose prompts has an F1 is absent.
func sourceF1(prompts []PromptRow) map[string]*float64 {
	sums := map[string]*f1Sum{}
	for _, p := range prompts {
		for _, src := range []string{p.DataSource, workflows.AllSources} {
			if sums[src] == nil {
				sums[src] = &f1Sum{}
			}
			sums[src].add(p.F1Mean)
		}
	}
	out := make(map[string]*float64, len(sums))
	for src, s := range sums {
		out[src] = s.mean()
	}
	return out
}

// F1Text is r's F1 as printed after avg@k and pass@k (" f1=0.412"), "" for a workflow
// without F1.
func F1Text(r ResultRow) string {
	if r.F1Mean == nil {
		return ""
	}
	return fmt.Sprintf(" f1=%.3f", *r.F1Mean)
}

// VerifierText is r's verifier accept rates as printed after avg@k and pass@k
// (" verifier accept correct=0.912 wrong=0.103"), "" for a workflow without a verifier.
func VerifierText(r ResultRow) string {
	if r.VerifierAcceptCorrect == nil && r.VerifierAcceptWrong == nil {
		return ""
	}
	return " verifier accept correct=" + rateText(r.VerifierAcceptCorrect) + " wrong=" + rateText(r.VerifierAcceptWrong)
}

func rateText(x *float64) string {
	if x == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *x)
}

// Extras is what is printed after avg@k and pass@k: F1Text and VerifierText.
func Extras(r ResultRow) string { return F1Text(r) + VerifierText(r) }

// verdictShares is, per data source (and all of them, under workflows.AllSources), the share
// of verdicts on correct and on wrong candidates that approved them; nil where none was judged.
func verdictShares(eps []*rollout.Episode) map[string][2]*float64 {
	type count struct{ approved, judged [2]int } // [0] correct candidates, [1] wrong ones
	counts := map[string]*count{}
	for _, ep := range eps {
		for _, v := range ep.Verdicts {
			i := 0
			if !v.CandidateCorrect {
				i = 1
			}
			for _, src := range []string{ep.Task.DataSource, workflows.AllSources} {
				if counts[src] == nil {
					counts[src] = &count{}
				}
				counts[src].judged[i]++
				if v.Approved {
					counts[src].approved[i]++
				}
			}
		}
	}
	out := make(map[string][2]*float64, len(counts))
	for src, c := range counts {
		var r [2]*float64
		for i := range r {
			if c.judged[i] > 0 {
				x := float64(c.approved[i]) / float64(c.judged[i])
				r[i] = &x
			}
		}
		out[src] = r
	}
	return out
}
