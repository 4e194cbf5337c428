package pooled

import (
	"cmp"
	"maps"
	"math"
	"slices"
)

// GradNorm is one step of one agent in one output run (estimator, seed): the learner's grad
// norm before clipping, mean over the iteration's updates. Steps where the agent had no rows
// are no updates and must not be passed.
type GradNorm struct {
	Estimator string
	Seed      uint64
	Agent     string
	Iteration int
	Value     float64
}

// Group is one prompt group's inflation factor (σ_k² + (μ_k − μ)²)/σ² for one agent, in the
// rollout of an output run at an iteration (groups with σ = 0 have none and are not passed).
type Group struct {
	Estimator string
	Seed      uint64
	Agent     string
	Iteration int
	Inflation float64
}

// Prompt is one held-out prompt's evaluation at a checkpoint step of an output run: Successes
// of K samples.
type Prompt struct {
	Estimator string
	Seed      uint64
	Step      int64
	TaskID    string
	K         int
	Successes int
}

// Input is what Analyze pools.
type Input struct {
	// Reference is the estimator the others are compared with (drmas): differences are
	// Reference − other, grad-norm ratios other / Reference.
	Reference string
	Level     float64 // of the intervals, e.g. 0.95
	GradNorms []GradNorm
	Groups    []Group
	Prompts   []Prompt
}

// HeldOut is one estimator's held-out success at each seed's last evaluated step, with the
// interval of its mean over seeds.
type HeldOut struct {
	Estimator     string
	Seeds         int
	Prompts       float64 // mean prompts per seed
	AvgAtK, PassK Interval
}

// Paired is Reference − Estimator on the same held-out prompts: per seed, the mean over the
// prompts both evaluated at the last step both evaluated of the per-prompt difference, and the
// interval over seeds (DF = seeds − 1).
type Paired struct {
	Estimator         string
	Seeds             []uint64
	Prompts           []int // per seed, the prompts paired
	AvgDiff, PassDiff []float64
	AvgAtK, PassK     Interval
}

// SpikeRow is the spikes of one estimator's agent over seeds.
type SpikeRow struct {
	Estimator, Agent string
	Seeds            []uint64
	PerSeed          []Spikes
	// Steps, Above2, Above5 are totals over seeds; MaxOverMedianMean and Worst the mean and
	// max over seeds of each run's max/median.
	Steps, Above2, Above5    int
	MaxOverMedianMean, Worst float64
}

// InflationRow is the distribution of the groups' inflation of one estimator's agent at one
// iteration, pooled over seeds (Iteration −1: over all iterations).
type InflationRow struct {
	Estimator, Agent string
	Iteration        int
	Dist
}

// RatioPoint is one (seed, iteration, agent) where both the reference and Estimator updated:
// the measured grad-norm ratio Estimator / Reference and the ratio Lemma 4.2 predicts,
// √(mean inflation of Estimator's rollout groups at that iteration) (NaN without groups).
type RatioPoint struct {
	Estimator, Agent    string
	Seed                uint64
	Iteration           int
	Predicted, Measured float64
}

// RatioFit is the fit of measured on predicted over an estimator's points of one agent (Agent
// "all": every agent's).
type RatioFit struct {
	Estimator, Agent string
	Fit
}

// Result is everything Analyze computes, each list in a fixed order (estimator, agent, seed,
// iteration).
type Result struct {
	HeldOut   []HeldOut
	Paired    []Paired
	Spikes    []SpikeRow
	Inflation []InflationRow // per iteration, then Iteration −1 per estimator and agent
	Points    []RatioPoint
	Fits      []RatioFit
}

// Analyze pools the runs' records.
func Analyze(in Input) *Result {
	r := &Result{}
	r.HeldOut, r.Paired = heldOut(in)
	r.Spikes = spikes(in.GradNorms)
	r.Inflation = inflation(in.Groups)
	r.Points, r.Fits = ratios(in)
	return r
}

type runKey struct {
	est  string
	seed uint64
}

// lastSteps indexes the prompts per run and step.
func lastSteps(ps []Prompt) map[runKey]map[int64]map[string]Prompt {
	out := map[runKey]map[int64]map[string]Prompt{}
	for _, p := range ps {
		k := runKey{p.Estimator, p.Seed}
		if out[k] == nil {
			out[k] = map[int64]map[string]Prompt{}
		}
		if out[k][p.Step] == nil {
			out[k][p.Step] = map[string]Prompt{}
		}
		out[k][p.Step][p.TaskID] = p
	}
	return out
}

func acc(p Prompt) float64 { return float64(p.Successes) / float64(p.K) }

// pass is pass@k with k samples per prompt: 1 if any succeeded.
func pass(p Prompt) float64 {
	if p.Successes > 0 {
		return 1
	}
	return 0
}

func heldOut(in Input) ([]HeldOut, []Paired) {
	runs := lastSteps(in.Prompts)
	var hs []HeldOut
	var ps []Paired
	for _, est := range estimators(runs) {
		h := HeldOut{Estimator: est}
		var avg, pas []float64
		var prompts int
		for _, seed := range seedsOf(runs, est) {
			steps := runs[runKey{est, seed}]
			last := slices.Max(keys(steps))
			a, p := meanOver(steps[last], acc), meanOver(steps[last], pass)
			avg, pas = append(avg, a), append(pas, p)
			prompts += len(steps[last])
		}
		h.Seeds = len(avg)
		h.Prompts = float64(prompts) / float64(max(h.Seeds, 1))
		h.AvgAtK, h.PassK = TInterval(avg, in.Level), TInterval(pas, in.Level)
		hs = append(hs, h)
		if est != in.Reference {
			ps = append(ps, paired(in, runs, est))
		}
	}
	return hs, ps
}

func paired(in Input, runs map[runKey]map[int64]map[string]Prompt, est string) Paired {
	p := Paired{Estimator: est}
	for _, seed := range seedsOf(runs, est) {
		ref, other := runs[runKey{in.Reference, seed}], runs[runKey{est, seed}]
		var common []int64
		for s := range other {
			if _, ok := ref[s]; ok {
				common = append(common, s)
			}
		}
		if len(common) == 0 {
			continue
		}
		step := slices.Max(common)
		var da, dp float64
		n := 0
		for _, id := range slices.Sorted(maps.Keys(other[step])) {
			r, ok := ref[step][id]
			if !ok {
				continue
			}
			o := other[step][id]
			da += acc(r) - acc(o)
			dp += pass(r) - pass(o)
			n++
		}
		if n == 0 {
			continue
		}
		p.Seeds = append(p.Seeds, seed)
		p.Prompts = append(p.Prompts, n)
		p.AvgDiff, p.PassDiff = append(p.AvgDiff, da/float64(n)), append(p.PassDiff, dp/float64(n))
	}
	p.AvgAtK, p.PassK = TInterval(p.AvgDiff, in.Level), TInterval(p.PassDiff, in.Level)
	return p
}

// meanOver is the mean of f over the prompts, summed in task-id order.
func meanOver(ps map[string]Prompt, f func(Prompt) float64) float64 {
	var s float64
	for _, id := range slices.Sorted(maps.Keys(ps)) {
		s += f(ps[id])
	}
	return s / float64(len(ps))
}

func spikes(gs []GradNorm) []SpikeRow {
	type key struct {
		est, agent string
		seed       uint64
	}
	by := map[key][]GradNorm{}
	for _, g := range gs {
		k := key{g.Estimator, g.Agent, g.Seed}
		by[k] = append(by[k], g)
	}
	ks := slices.SortedFunc(maps.Keys(by), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.est, b.est), cmp.Compare(a.agent, b.agent), cmp.Compare(a.seed, b.seed))
	})
	var out []SpikeRow
	for _, k := range ks {
		if len(out) == 0 || out[len(out)-1].Estimator != k.est || out[len(out)-1].Agent != k.agent {
			out = append(out, SpikeRow{Estimator: k.est, Agent: k.agent})
		}
		row := &out[len(out)-1]
		steps := by[k]
		slices.SortFunc(steps, func(a, b GradNorm) int { return cmp.Compare(a.Iteration, b.Iteration) })
		v := make([]float64, len(steps))
		for i, s := range steps {
			v[i] = s.Value
		}
		sp := CountSpikes(v)
		row.Seeds, row.PerSeed = append(row.Seeds, k.seed), append(row.PerSeed, sp)
		row.Steps, row.Above2, row.Above5 = row.Steps+sp.Steps, row.Above2+sp.Above2, row.Above5+sp.Above5
	}
	for i := range out {
		var ms []float64
		for _, sp := range out[i].PerSeed {
			ms = append(ms, sp.MaxOverMedian)
		}
		out[i].MaxOverMedianMean, out[i].Worst = mean(ms), slices.Max(ms)
	}
	return out
}

type inflKey struct {
	est, agent string
	it         int
}

func inflation(gs []Group) []InflationRow {
	by := map[inflKey][]float64{}
	for _, g := range gs {
		for _, it := range []int{g.Iteration, -1} {
			k := inflKey{g.Estimator, g.Agent, it}
			by[k] = append(by[k], g.Inflation)
		}
	}
	ks := slices.SortedFunc(maps.Keys(by), func(a, b inflKey) int {
		// Per iteration first, the all-iterations rows (−1) after them.
		return cmp.Or(cmp.Compare(boolInt(a.it < 0), boolInt(b.it < 0)), cmp.Compare(a.est, b.est), cmp.Compare(a.agent, b.agent), cmp.Compare(a.it, b.it))
	})
	out := make([]InflationRow, 0, len(ks))
	for _, k := range ks {
		out = append(out, InflationRow{Estimator: k.est, Agent: k.agent, Iteration: k.it, Dist: Describe(by[k])})
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ratios(in Input) ([]RatioPoint, []RatioFit) {
	type key struct {
		est, agent string
		seed       uint64
		it         int
	}
	gn := map[key]float64{}
	for _, g := range in.GradNorms {
		gn[key{g.Estimator, g.Agent, g.Seed, g.Iteration}] = g.Value
	}
	infl := map[key][]float64{}
	for _, g := range in.Groups {
		k := key{g.Estimator, g.Agent, g.Seed, g.Iteration}
		infl[k] = append(infl[k], g.Inflation)
	}
	ks := slices.SortedFunc(maps.Keys(gn), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.est, b.est), cmp.Compare(a.agent, b.agent), cmp.Compare(a.seed, b.seed), cmp.Compare(a.it, b.it))
	})
	var pts []RatioPoint
	for _, k := range ks {
		ref, ok := gn[key{in.Reference, k.agent, k.seed, k.it}]
		if k.est == in.Reference || !ok || !(ref > 0) {
			continue
		}
		pred := math.NaN()
		if g := infl[k]; len(g) > 0 {
			pred = math.Sqrt(mean(g))
		}
		pts = append(pts, RatioPoint{Estimator: k.est, Agent: k.agent, Seed: k.seed, Iteration: k.it, Predicted: pred, Measured: gn[k] / ref})
	}
	return pts, fits(pts)
}

func fits(pts []RatioPoint) []RatioFit {
	var out []RatioFit
	ests := map[string]bool{}
	for _, p := range pts {
		ests[p.Estimator] = true
	}
	for _, est := range slices.Sorted(maps.Keys(ests)) {
		agents := map[string]bool{"all": true}
		for _, p := range pts {
			if p.Estimator == est {
				agents[p.Agent] = true
			}
		}
		for _, a := range slices.Sorted(maps.Keys(agents)) {
			var x, y []float64
			for _, p := range pts {
				if p.Estimator == est && (a == "all" || p.Agent == a) {
					x, y = append(x, p.Predicted), append(y, p.Measured)
				}
			}
			out = append(out, RatioFit{Estimator: est, Agent: a, Fit: FitLine(x, y)})
		}
	}
	return out
}

func estimators(runs map[runKey]map[int64]map[string]Prompt) []string {
	set := map[string]bool{}
	for k := range runs {
		set[k.est] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func seedsOf(runs map[runKey]map[int64]map[string]Prompt, est string) []uint64 {
	var out []uint64
	for k, steps := range runs {
		if k.est == est && len(steps) > 0 {
			out = append(out, k.seed)
		}
	}
	slices.Sort(out)
	return out
}

func keys[V any](m map[int64]V) []int64 { return slices.Collect(maps.Keys(m)) }
