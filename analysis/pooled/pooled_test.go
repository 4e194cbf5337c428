package pooled_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/drmas-dev/drmas/analysis/pooled"
)

func near(a, b float64) bool {
	return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-6
}

// The t quantiles are the tables' t_{0.975, df}: 12.7062047 (df 1), 2.7764451 (df 4).
func TestTInterval(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		x                        []float64
		df                       int
		mean, sd, se, tq, lo, hi float64
	}{
		// mean 3, sd √(10/4), se √(1/2), half width 2.7764451·0.7071068 = 1.9632432.
		{[]float64{1, 2, 3, 4, 5}, 4, 3, math.Sqrt(2.5), math.Sqrt(0.5), 2.7764451, 1.0367568, 4.9632432},
		// mean 1, sd √2, se 1.
		{[]float64{0, 2}, 1, 1, math.Sqrt2, 1, 12.7062047, -11.7062047, 13.7062047},
		{[]float64{7}, 0, 7, nan, nan, nan, nan, nan},
		{nil, 0, nan, nan, nan, nan, nan, nan},
	}
	for _, c := range cases {
		iv := pooled.TInterval(c.x, 0.95)
		if iv.N != len(c.x) || iv.DF != c.df || !near(iv.Mean, c.mean) || !near(iv.SD, c.sd) || !near(iv.SE, c.se) ||
			!near(iv.T, c.tq) || !near(iv.Lo, c.lo) || !near(iv.Hi, c.hi) {
			t.Errorf("TInterval(%v) = %+v", c.x, iv)
		}
	}
}

func TestQuantileAndDescribe(t *testing.T) {
	// h = 9·0.9 = 8.1 → 9 + 0.1·(10 − 9).
	if q := pooled.Quantile([]float64{3, 1, 2, 4, 5, 6, 7, 8, 9, 10}, 0.9); !near(q, 9.1) {
		t.Errorf("p90 %v, want 9.1", q)
	}
	if q := pooled.Quantile([]float64{4, 1, 3, 2}, 0.5); !near(q, 2.5) {
		t.Errorf("median %v, want 2.5", q)
	}
	if q := pooled.Quantile([]float64{5}, 0.9); q != 5 {
		t.Errorf("p90 of one value %v", q)
	}
	// Nine 1s and a 10: mean 1.9; h = 8.1 → 1 + 0.1·9 = 1.9; max 10.
	d := pooled.Describe([]float64{1, 1, 1, 1, 10, 1, 1, 1, 1, 1})
	if d.N != 10 || !near(d.Mean, 1.9) || !near(d.P90, 1.9) || d.Max != 10 {
		t.Errorf("Describe %+v", d)
	}
}

func TestCountSpikes(t *testing.T) {
	// Median 1 (sorted 1 1 1 1 2.5 6: middle two are 1); above 2: 2.5, 6; above 5: 6.
	s := pooled.CountSpikes([]float64{1, 1, 1, 1, 2.5, 6})
	if s.Steps != 6 || s.Median != 1 || s.Max != 6 || s.MaxOverMedian != 6 || s.Above2 != 2 || s.Above5 != 1 {
		t.Errorf("%+v", s)
	}
	// Exactly 2× the median is not above it: median 1.5 (1 and 2), 3 = 2·1.5.
	s = pooled.CountSpikes([]float64{1, 2, 3, 1.5})
	if s.Median != 1.75 || s.Above2 != 0 {
		t.Errorf("%+v", s)
	}
	s = pooled.CountSpikes([]float64{1, 1, 3.5})
	if s.Median != 1 || s.Above2 != 1 || s.Above5 != 0 {
		t.Errorf("%+v", s)
	}
	if s := pooled.CountSpikes(nil); s.Steps != 0 || !math.IsNaN(s.MaxOverMedian) {
		t.Errorf("no steps: %+v", s)
	}
}

// A pooled ablation worked by hand: two seeds of drmas and grpo, four samples per prompt.
func TestAnalyze(t *testing.T) {
	p := func(est string, seed uint64, step int64, id string, succ int) pooled.Prompt {
		return pooled.Prompt{Estimator: est, Seed: seed, Step: step, TaskID: id, K: 4, Successes: succ}
	}
	g := func(est string, seed uint64, it int, v float64) pooled.GradNorm {
		return pooled.GradNorm{Estimator: est, Seed: seed, Agent: "solver", Iteration: it, Value: v}
	}
	gr := func(est string, it int, vs ...float64) []pooled.Group {
		var out []pooled.Group
		for _, v := range vs {
			out = append(out, pooled.Group{Estimator: est, Seed: 1, Agent: "solver", Iteration: it, Inflation: v})
		}
		return out
	}
	in := pooled.Input{Reference: "drmas", Level: 0.95,
		Prompts: []pooled.Prompt{
			// The warm-up (step 0) is not the last step.
			p("drmas", 1, 0, "a", 0), p("drmas", 1, 0, "b", 0), p("grpo", 1, 0, "a", 0), p("grpo", 1, 0, "b", 0),
			p("drmas", 1, 2, "a", 3), p("drmas", 1, 2, "b", 1), p("grpo", 1, 2, "a", 1), p("grpo", 1, 2, "b", 0),
			// Seed 2: grpo also has a prompt c that drmas did not evaluate: not paired.
			p("drmas", 2, 2, "a", 2), p("drmas", 2, 2, "b", 2), p("grpo", 2, 2, "a", 2), p("grpo", 2, 2, "b", 4), p("grpo", 2, 2, "c", 4),
		},
		GradNorms: []pooled.GradNorm{
			g("drmas", 1, 0, 1), g("drmas", 1, 1, 1), g("drmas", 1, 2, 1), g("drmas", 1, 3, 1), g("drmas", 1, 4, 2.5), g("drmas", 1, 5, 6),
			g("drmas", 2, 0, 2), g("drmas", 2, 1, 2), g("drmas", 2, 2, 2),
			g("grpo", 1, 0, 2), g("grpo", 1, 1, 3),
		},
	}
	in.Groups = append(gr("grpo", 0, 1, 3), gr("grpo", 1, 4)...)
	in.Groups = append(in.Groups, gr("drmas", 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 10)...)
	r := pooled.Analyze(in)

	// Held out: drmas 0.5 and 0.5; grpo 0.125 and (2/4 + 4/4 + 4/4)/3 = 5/6.
	if len(r.HeldOut) != 2 || r.HeldOut[0].Estimator != "drmas" || !near(r.HeldOut[0].AvgAtK.Mean, 0.5) || !near(r.HeldOut[0].AvgAtK.Lo, 0.5) ||
		r.HeldOut[1].Estimator != "grpo" || !near(r.HeldOut[1].AvgAtK.Mean, (0.125+5.0/6)/2) || !near(r.HeldOut[1].Prompts, 2.5) ||
		!near(r.HeldOut[1].PassK.Mean, 0.75) {
		t.Errorf("held out %+v", r.HeldOut)
	}
	// Seed 1: avg ((3−1) + (1−0))/4/2 = 0.375, pass (0 + 1)/2 = 0.5; seed 2: avg (0 − 2/4)/2 =
	// −0.25, pass 0. Over seeds: mean 0.0625, sd 0.625/√2, se 0.3125, ± 12.7062047·0.3125.
	if len(r.Paired) != 1 {
		t.Fatalf("paired %+v", r.Paired)
	}
	pd := r.Paired[0]
	if pd.Estimator != "grpo" || !reflect.DeepEqual(pd.Seeds, []uint64{1, 2}) || !reflect.DeepEqual(pd.Prompts, []int{2, 2}) ||
		!reflect.DeepEqual(pd.AvgDiff, []float64{0.375, -0.25}) || !reflect.DeepEqual(pd.PassDiff, []float64{0.5, 0}) ||
		pd.AvgAtK.DF != 1 || !near(pd.AvgAtK.Mean, 0.0625) || !near(pd.AvgAtK.SE, 0.3125) ||
		!near(pd.AvgAtK.Lo, 0.0625-3.9706890) || !near(pd.AvgAtK.Hi, 0.0625+3.9706890) || !near(pd.PassK.Mean, 0.25) {
		t.Errorf("paired %+v", pd)
	}

	// drmas seed 1: median 1, above 2× 2, above 5× 1, max/median 6; seed 2: flat, 0, 0, 1.
	if len(r.Spikes) != 2 {
		t.Fatalf("spikes %+v", r.Spikes)
	}
	sp := r.Spikes[0]
	if sp.Estimator != "drmas" || sp.Agent != "solver" || sp.Steps != 9 || sp.Above2 != 2 || sp.Above5 != 1 ||
		!near(sp.MaxOverMedianMean, 3.5) || sp.Worst != 6 || !reflect.DeepEqual(sp.Seeds, []uint64{1, 2}) {
		t.Errorf("spikes %+v", sp)
	}

	// Inflation: per iteration, then over all iterations.
	type row struct {
		est            string
		it, n          int
		mean, p90, max float64
	}
	want := []row{
		{"drmas", 0, 10, 1.9, 1.9, 10}, {"grpo", 0, 2, 2, 2.8, 3}, {"grpo", 1, 1, 4, 4, 4},
		{"drmas", -1, 10, 1.9, 1.9, 10}, {"grpo", -1, 3, 8.0 / 3, 3.8, 4},
	}
	if len(r.Inflation) != len(want) {
		t.Fatalf("inflation %+v", r.Inflation)
	}
	for i, w := range want {
		x := r.Inflation[i]
		if x.Estimator != w.est || x.Iteration != w.it || x.N != w.n || !near(x.Mean, w.mean) || !near(x.P90, w.p90) || x.Max != w.max {
			t.Errorf("inflation %d: %+v, want %+v", i, x, w)
		}
	}

	// Ratios grpo / drmas at seed 1: iteration 0 measured 2, predicted √((1+3)/2) = √2;
	// iteration 1 measured 3, predicted √4 = 2. The line through them: slope 1/(2 − √2),
	// intercept 2 − √2/(2 − √2) = 1 − √2, R² 1.
	if len(r.Points) != 2 || r.Points[0].Measured != 2 || !near(r.Points[0].Predicted, math.Sqrt2) || r.Points[1].Measured != 3 || r.Points[1].Predicted != 2 {
		t.Fatalf("points %+v", r.Points)
	}
	if len(r.Fits) != 2 || r.Fits[0].Agent != "all" || r.Fits[1].Agent != "solver" {
		t.Fatalf("fits %+v", r.Fits)
	}
	for _, f := range r.Fits {
		if f.N != 2 || !near(f.Slope, 1/(2-math.Sqrt2)) || !near(f.Intercept, 1-math.Sqrt2) || !near(f.R2, 1) {
			t.Errorf("fit %+v", f)
		}
	}
}
