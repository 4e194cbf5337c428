package analysis_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/analysistest"
)

// stats are μ and σ by the normalize rules: one value has μ = 0, σ = 1; the std is unbiased.
func stats(x []float64) (mu, sd float64) {
	if len(x) == 1 {
		return 0, 1
	}
	for _, v := range x {
		mu += v
	}
	mu /= float64(len(x))
	for _, v := range x {
		sd += (v - mu) * (v - mu)
	}
	return mu, math.Sqrt(sd / float64(len(x)-1))
}

// The condition is computed twice: by the SQL from the rollouts, and here in Go from the same
// rows; its mean and max must also equal the diagnostics normalize wrote (the estimators package), and its
// advantage energies the sums of the stored advantages.
func TestConditionMatchesDiagnosticsAndAdvantages(t *testing.T) {
	ctx := context.Background()
	store, _ := analysistest.Source(t)
	s := open(t, store, t.TempDir())
	c, err := s.Query(ctx, analysis.ConditionIterSQL()+` ORDER BY iteration, agent`)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != analysistest.Iterations*2 {
		t.Fatalf("%d condition rows, want %d", len(c.Rows), analysistest.Iterations*2)
	}
	d, err := s.Query(ctx, `SELECT iteration, agent, inflation_groups, inflation_mean, inflation_max FROM diagnostics WHERE estimator = 'drmas' ORDER BY iteration, agent`)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Query(ctx, `SELECT iteration, agent, sum(advantage * advantage) FILTER (WHERE estimator = 'drmas') AS e_drmas,
		sum(advantage * advantage) FILTER (WHERE estimator = 'grpo_step') AS e_step, sum(advantage * advantage) FILTER (WHERE estimator = 'grpo') AS e_grpo
		FROM advantages GROUP BY iteration, agent ORDER BY iteration, agent`)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Query(ctx, `SELECT iteration, uid, agent, score FROM rollouts ORDER BY iteration, uid, row_id`)
	if err != nil {
		t.Fatal(err)
	}
	type gk struct{ it, uid string }
	group := map[gk][]float64{}
	agent := map[gk]map[string][]float64{}
	for i := range rows.Rows {
		k := gk{rows.String(i, "iteration"), rows.String(i, "uid")}
		v := rows.Float(i, "score")
		group[k] = append(group[k], v)
		if agent[k] == nil {
			agent[k] = map[string][]float64{}
		}
		a := rows.String(i, "agent")
		agent[k][a] = append(agent[k][a], v)
	}
	infl := map[string][]float64{} // "iteration/agent" → inflations over groups with σ > 0
	for k, g := range group {
		mu, sd := stats(g)
		for a, x := range agent[k] {
			muK, sdK := stats(x)
			if sd > 1e-12 {
				key := k.it + "/" + a
				infl[key] = append(infl[key], (sdK*sdK+(muK-mu)*(muK-mu))/(sd*sd))
			}
		}
	}
	rel := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Max(1, math.Abs(b)) }
	for i := range c.Rows {
		it, a := c.String(i, "iteration"), c.String(i, "agent")
		if d.String(i, "iteration") != it || d.String(i, "agent") != a || e.String(i, "agent") != a {
			t.Fatalf("row %d: condition %s/%s, diagnostics %s/%s, advantages %s", i, it, a, d.String(i, "iteration"), d.String(i, "agent"), e.String(i, "agent"))
		}
		if c.Float(i, "inflation_groups") != d.Float(i, "inflation_groups") || !rel(c.Float(i, "inflation_mean"), d.Float(i, "inflation_mean")) ||
			!rel(c.Float(i, "inflation_max"), d.Float(i, "inflation_max")) {
			t.Errorf("%s/%s: SQL groups %v mean %v max %v; diagnostics %v %v %v", it, a, c.Float(i, "inflation_groups"), c.Float(i, "inflation_mean"),
				c.Float(i, "inflation_max"), d.Float(i, "inflation_groups"), d.Float(i, "inflation_mean"), d.Float(i, "inflation_max"))
		}
		x := infl[it+"/"+a]
		sort.Float64s(x)
		if len(x) == 0 {
			t.Fatalf("%s/%s: no group with σ > 0 in the fixture", it, a)
		}
		if got, want := c.Float(i, "inflation_p90"), quantile(x, 0.9); !rel(got, want) {
			t.Errorf("%s/%s: p90 %v, Go %v", it, a, got, want)
		}
		for _, p := range []struct{ col, est string }{{"pred_energy_grpo_step", "e_step"}, {"pred_energy_grpo", "e_grpo"}} {
			if e.Float(i, "e_drmas") == 0 { // no Dr. MAS signal at all: no ratio
				if got := c.Float(i, p.col); !math.IsNaN(got) {
					t.Errorf("%s/%s: %s %v without a Dr. MAS advantage, want NULL", it, a, p.col, got)
				}
				continue
			}
			// Stored advantages are float32: a relative 1e-5.
			if got, want := c.Float(i, p.col), math.Sqrt(e.Float(i, p.est)/e.Float(i, "e_drmas")); !rel(got, want) {
				t.Errorf("%s/%s: %s %v, from the stored advantages %v", it, a, p.col, got, want)
			}
		}
	}

	// The canned reports: the inflation report carries the p90, and condition has a row per agent.
	tb, err := s.Report(ctx, "inflation", analysis.ReportParams{})
	if err != nil {
		t.Fatal(err)
	}
	if tb.Col("inflation_p90") < 0 || len(tb.Rows) != analysistest.Iterations*len(analysistest.Estimators)*2 {
		t.Errorf("inflation report: columns %v, %d rows", tb.Columns, len(tb.Rows))
	}
	cond, err := s.Report(ctx, "condition", analysis.ReportParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cond.Rows) != 2 || cond.String(0, "agent") != "solver" || cond.String(1, "agent") != "verifier" {
		t.Fatalf("condition report: %v", cond.Rows)
	}
	for i := range cond.Rows {
		var all []float64
		for it := 0; it < analysistest.Iterations; it++ {
			all = append(all, infl[fmt.Sprint(it)+"/"+cond.String(i, "agent")]...)
		}
		sort.Float64s(all)
		if got, want := cond.Float(i, "inflation_max"), all[len(all)-1]; !rel(got, want) {
			t.Errorf("condition %s: max %v, Go %v", cond.String(i, "agent"), got, want)
		}
		if got, want := cond.Float(i, "inflation_p90"), quantile(all, 0.9); !rel(got, want) {
			t.Errorf("condition %s: p90 %v, Go %v", cond.String(i, "agent"), got, want)
		}
	}
}
