package evaluate

import (
	"fmt"

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
