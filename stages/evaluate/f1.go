package evaluate

import (
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/workflows"
)

// promptF1 sums one prompt's answer F1 over its samples that have one.
type promptF1 struct {
	src string
	sum float64
	n   int
}

func (p promptF1) mean() *float64 {
	m := p.sum / float64(p.n)
	return &m
}

// promptF1s returns each task's F1 sums, one per task in order of first appearance in eps (the
// order of PerPrompt's rows); n is 0 for a task of a workflow without F1.
func promptF1s(eps []*rollout.Episode) []promptF1 {
	var out []promptF1
	idx := map[string]int{}
	for _, ep := range eps {
		i, ok := idx[ep.Task.ID]
		if !ok {
			i = len(out)
			idx[ep.Task.ID] = i
			out = append(out, promptF1{src: ep.Task.DataSource})
		}
		if ep.F1 != nil {
			out[i].sum += *ep.F1
			out[i].n++
		}
	}
	return out
}

// sourceF1 is the mean over each data source's prompts (and over all of them, under
// workflows.AllSources) of their mean F1; a source none of whose prompts has an F1 is absent.
func sourceF1(prompts []promptF1) map[string]*float64 {
	sums := map[string]*promptF1{}
	for _, p := range prompts {
		if p.n == 0 {
			continue
		}
		m := *p.mean()
		for _, src := range []string{p.src, workflows.AllSources} {
			if sums[src] == nil {
				sums[src] = &promptF1{}
			}
			sums[src].sum += m
			sums[src].n++
		}
	}
	out := make(map[string]*float64, len(sums))
	for src, s := range sums {
		out[src] = s.mean()
	}
	return out
}
