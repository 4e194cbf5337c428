package report_test

import (
	"context"
	"math"
	"testing"

	"github.com/drmas-dev/drmas/ablate"
	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/report"
)

func TestFitLine(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name                       string
		x, y                       []float64
		n                          int
		slope, icept, r2, r2id, mr float64
	}{
		// y = 2x: the line fits exactly; as a prediction x misses by 1, 2, 3 against a
		// variance of 8 around ȳ = 4: 1 − 14/8.
		{"double", []float64{1, 2, 3}, []float64{2, 4, 6}, 3, 2, 0, 1, -0.75, 1},
		{"identity", []float64{1, 2}, []float64{1, 2}, 2, 1, 0, 1, 1, 0},
		// No spread in x: no line; the prediction 1 misses by 0, 1, 2 against 2: 1 − 5/2.
		{"flat x", []float64{1, 1, 1}, []float64{1, 2, 3}, 3, nan, nan, nan, -1.5, 2},
		{"non-finite pairs skipped", []float64{1, nan, 2, 3}, []float64{1, 5, 2, math.Inf(1)}, 2, 1, 0, 1, 1, 0},
	}
	eq := func(a, b float64) bool { return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-12 }
	for _, c := range cases {
		f := report.FitLine(c.x, c.y)
		if f.N != c.n || !eq(f.Slope, c.slope) || !eq(f.Intercept, c.icept) || !eq(f.R2, c.r2) || !eq(f.R2Identity, c.r2id) || !eq(f.MaxRel, c.mr) {
			t.Errorf("%s: %+v, want n %d slope %v intercept %v R² %v identity %v max rel %v", c.name, f, c.n, c.slope, c.icept, c.r2, c.r2id, c.mr)
		}
	}
}

// The points of a replay: one per replayed (iteration, agent), with each estimator's grad norm
// as the ablation summary holds it and the condition of the source run's rollout.
func TestConditionPoints(t *testing.T) {
	ctx := context.Background()
	env, _ := analysistest.Env(t)
	r, _ := ablate.ParseRange("0..1")
	res, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"drmas", "grpo", "grpo_step"}, Iterations: r})
	if err != nil {
		t.Fatal(err)
	}
	s, err := analysis.Open(ctx, analysis.Options{Bucket: env.Bucket, Run: analysistest.Run, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pts, err := report.ConditionPoints(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		it         int32
		agent, est string
	}
	want := map[key]float64{}
	for _, row := range res.Rows {
		if row.Agent != "*" && row.Rows > 0 {
			want[key{row.Iteration, row.Agent, row.Estimator}] = row.GradNorm
		}
	}
	if len(pts) == 0 || len(pts)*3 != len(want) {
		t.Fatalf("%d points for %d summary rows", len(pts), len(want))
	}
	cond, err := s.Query(ctx, analysis.ConditionIterSQL()+` ORDER BY iteration, agent`)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		for _, est := range []string{"drmas", "grpo", "grpo_step"} {
			if g := want[key{int32(p.Iteration), p.Agent, est}]; p.GradNorm[est] != g {
				t.Errorf("%d/%s %s: grad norm %v, summary %v", p.Iteration, p.Agent, est, p.GradNorm[est], g)
			}
		}
		if got, want := p.Ratio("grpo"), p.GradNorm["grpo"]/p.GradNorm["drmas"]; p.GradNorm["drmas"] > 0 && got != want {
			t.Errorf("ratio %v, want %v", got, want)
		}
		found := false
		for i := range cond.Rows {
			if int(cond.Float(i, "iteration")) == p.Iteration && cond.String(i, "agent") == p.Agent {
				found = true
				if cond.Float(i, "inflation_mean") != p.Inflation {
					t.Errorf("%d/%s: inflation %v, condition %v", p.Iteration, p.Agent, p.Inflation, cond.Float(i, "inflation_mean"))
				}
			}
		}
		if !found || p.Seed != env.Config.Seed {
			t.Errorf("point %+v: no condition row, or seed not %d", p, env.Config.Seed)
		}
	}
}
