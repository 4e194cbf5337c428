package workflows

import (
	"fmt"
	"math"
)

// AllSources is the data source of the evaluation row that aggregates every
// prompt; no task may have it (LoadTasks rejects it), or its per-source row
// would be indistinguishable from the aggregate.
const AllSources = "all"

// Sample is one evaluation rollout: did a sample of a task succeed.
type Sample struct {
	TaskID     string
	DataSource string
	Success    bool
}

// Metric is an evaluation figure of one data source.
type Metric struct {
	Prompts int     // distinct tasks
	Samples int     // rollouts
	Value   float64 // avg@k or pass@k
}

type promptStats struct {
	src  string
	n, c int
}

func groupSamples(samples []Sample, k int) (map[string][]promptStats, error) {
	if k < 1 {
		return nil, fmt.Errorf("workflows: k=%d, want ≥ 1", k)
	}
	byTask := map[string]*promptStats{}
	var order []string
	for _, s := range samples {
		p := byTask[s.TaskID]
		if p == nil {
			p = &promptStats{src: s.DataSource}
			byTask[s.TaskID] = p
			order = append(order, s.TaskID)
		} else if p.src != s.DataSource {
			return nil, fmt.Errorf("workflows: task %q has data sources %q and %q", s.TaskID, p.src, s.DataSource)
		}
		p.n++
		if s.Success {
			p.c++
		}
	}
	out := map[string][]promptStats{}
	for _, id := range order {
		p := byTask[id]
		if p.n < k {
			return nil, fmt.Errorf("workflows: task %q has %d samples, fewer than k=%d", id, p.n, k)
		}
		out[p.src] = append(out[p.src], *p)
	}
	return out, nil
}

// AvgAtK is avg@k per data source: the success rate of each prompt's
// samples, averaged over prompts. Every task needs at least k samples (all of
// them are used; with exactly k this is the usual avg@k).
func AvgAtK(samples []Sample, k int) (map[string]Metric, error) {
	g, err := groupSamples(samples, k)
	if err != nil {
		return nil, err
	}
	out := map[string]Metric{}
	for src, ps := range g {
		m := Metric{Prompts: len(ps)}
		for _, p := range ps {
			m.Samples += p.n
			m.Value += float64(p.c) / float64(p.n)
		}
		m.Value /= float64(len(ps))
		out[src] = m
	}
	return out, nil
}

// PassAtK is pass@k per data source: the share of prompts with at least one
// success among k samples. With n > k samples of a prompt it uses the
// unbiased estimator 1 − C(n−c, k)/C(n, k) (Chen et al., 2021), which is the
// plain indicator when n = k.
func PassAtK(samples []Sample, k int) (map[string]Metric, error) {
	g, err := groupSamples(samples, k)
	if err != nil {
		return nil, err
	}
	out := map[string]Metric{}
	for src, ps := range g {
		m := Metric{Prompts: len(ps)}
		for _, p := range ps {
			m.Samples += p.n
			m.Value += passAtK(p.n, p.c, k)
		}
		m.Value /= float64(len(ps))
		out[src] = m
	}
	return out, nil
}

// passAtK = 1 − Π_{i=n−c+1..n} (1 − k/i), a stable form of 1 − C(n−c,k)/C(n,k).
func passAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return math.Max(0, 1-prod)
}
