package ablate_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/ablate"
	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/report"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestOnPolicyPooledReport runs the experiment driver end to end on the tiny math and search
// configs, 2 seeds × {drmas, grpo} × 2 iterations from shared warm-ups, then the pooled report,
// and checks each pooled table's rows against the summary and the output runs' own outputs.
func TestOnPolicyPooledReport(t *testing.T) {
	// The search policy needs the fixture's stronger warm-up to ever score differently within a
	// group (no group with σ > 0: no inflation, no grad norm).
	search := stagetest.Config(t, "search")
	search.Evaluate.Every = 1
	search.Models = map[string]configs.Model{"m1": {Dim: 32, Layers: 1, Heads: 2, Context: 224, FFMult: 2, TiedHead: true}}
	search.Warmup.Steps, search.Warmup.Batch, search.Warmup.LR = 150, 16, 1e-2
	for _, cfg := range []*configs.Config{analysistest.Config(t), search} {
		t.Run(cfg.Workflow.Name, func(t *testing.T) { checkPooledReport(t, cfg) })
	}
}

func checkPooledReport(t *testing.T, cfg *configs.Config) {
	ctx := context.Background()
	cfg.Run = "cond"
	env := stagetest.Env(t, cfg)
	r, _ := ablate.ParseRange("0..1")
	res, err := ablate.Run(ctx, env, ablate.Options{Mode: ablate.OnPolicy, Estimators: []string{"grpo", "drmas"}, Seeds: []uint64{2, 1}, Iterations: r})
	if err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, run string) (*analysis.Session, error) {
		return analysis.Open(ctx, analysis.Options{Bucket: env.Bucket, Run: run, CacheDir: t.TempDir()})
	}
	s, err := open(ctx, "cond")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opened := 0
	rep, err := report.Build(ctx, s, report.Options{Ablation: ablate.OnPolicy, OpenRun: func(ctx context.Context, run string) (*analysis.Session, error) {
		opened++
		return open(ctx, run)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if opened != 4 {
		t.Errorf("opened %d output runs, want 4", opened)
	}
	for _, tb := range rep.Tables {
		t.Logf("%s: %v\n%v", tb.Title, tb.Columns, tb.Rows)
	}
	tables := map[string]report.Table{}
	for _, tb := range rep.Tables {
		tables[tb.Title] = tb
	}
	get := func(title string) report.Table {
		tb, ok := tables[title]
		if !ok {
			t.Fatalf("no table %q", title)
		}
		return tb
	}

	// Held out: one row per estimator, 2 seeds, df 1, the eval set's 4 prompts each.
	ho := get(report.TableHeldOut)
	if len(ho.Rows) != 2 || ho.Rows[0][0] != "drmas" || ho.Rows[1][0] != "grpo" {
		t.Fatalf("held out rows %v", ho.Rows)
	}
	for _, row := range ho.Rows {
		if row[1] != "2" || row[2] != "4.0" || row[7] != "1" {
			t.Errorf("held out row %v: want 2 seeds, 4 prompts, df 1", row)
		}
	}

	// Paired: avg@k and pass@k for grpo; each seed's avg@k difference is the difference of the
	// summary's avg@k (the evaluation's all-prompts row) at the last iteration.
	pd := get(report.TablePaired)
	if len(pd.Rows) != 2 || pd.Rows[0][0] != "grpo" || pd.Rows[0][1] != "avg@k" || pd.Rows[1][1] != "pass@k" {
		t.Fatalf("paired rows %v", pd.Rows)
	}
	last := map[string]float64{}
	for _, x := range res.Rows {
		if x.Iteration == 1 && x.Agent == "*" {
			last[fmt.Sprintf("%s/%d", x.Estimator, x.Seed)] = *x.AvgAtK
		}
	}
	var want []string
	for _, seed := range []string{"1", "2"} {
		want = append(want, strconv.FormatFloat(last["drmas/"+seed]-last["grpo/"+seed], 'f', 4, 64))
	}
	if row := pd.Rows[0]; row[2] != "2" || row[3] != "4, 4" || row[4] != strings.Join(want, ", ") || row[7] != "1" {
		t.Errorf("paired avg@k row %v: want 2 seeds, 4 prompts each, differences %v, df 1", row, want)
	}

	// Spikes and the ratio fit: one row per estimator and agent that updated; 2 steps per seed.
	updated := map[string]int{}
	agents := map[string]bool{}
	for _, x := range res.Rows {
		if x.Agent != "*" && x.Rows > 0 {
			updated[x.Estimator+"/"+x.Agent]++
			agents[x.Agent] = true
		}
	}
	sp := get(report.TableSpikes)
	if len(sp.Rows) != len(updated) || len(agents) == 0 {
		t.Fatalf("spike rows %v, want one per updated estimator/agent %v", sp.Rows, updated)
	}
	for _, row := range sp.Rows {
		if n := updated[row[0]+"/"+row[1]]; row[2] != "2" || row[3] != strconv.Itoa(n) {
			t.Errorf("spike row %v: want 2 seeds, %d steps", row, n)
		}
	}
	fit := get(report.TableRatioFit)
	if len(fit.Rows) != len(agents)+1 || fit.Rows[0][0] != "grpo" || fit.Rows[0][1] != "all" {
		t.Errorf("fit rows %v: want grpo × (all + %d agents)", fit.Rows, len(agents))
	}

	// Inflation: per (estimator, agent, iteration) the groups with σ > 0 of both seeds, as each
	// output run's condition report counts them, then one "all" row per estimator and agent.
	groups := map[string]int{}
	pairs := map[string]bool{}
	for _, run := range res.Runs {
		rs, err := open(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		c, err := rs.Query(ctx, analysis.ConditionIterSQL())
		rs.Close()
		if err != nil {
			t.Fatal(err)
		}
		est := strings.Split(run, "-")[1]
		for i := range c.Rows {
			if n := int(c.Float(i, "inflation_groups")); n > 0 {
				groups[fmt.Sprintf("%s/%s/%d", est, c.String(i, "agent"), int(c.Float(i, "iteration")))] += n
				pairs[est+"/"+c.String(i, "agent")] = true
			}
		}
	}
	inf := get(report.TableInflation)
	if len(inf.Rows) != len(groups)+len(pairs) || len(groups) == 0 {
		t.Fatalf("%d inflation rows, want %d iterations + %d all-iteration rows", len(inf.Rows), len(groups), len(pairs))
	}
	for _, row := range inf.Rows {
		if row[2] == "all" {
			continue
		}
		if n := groups[row[0]+"/"+row[1]+"/"+row[2]]; row[3] != strconv.Itoa(n) {
			t.Errorf("inflation row %v: want %d groups", row, n)
		}
		mean, _ := strconv.ParseFloat(row[4], 64)
		p90, _ := strconv.ParseFloat(row[5], 64)
		mx, _ := strconv.ParseFloat(row[6], 64)
		if !(mean > 0) || p90 > mx || mean > mx || math.IsNaN(mx) {
			t.Errorf("inflation row %v: want 0 < mean ≤ max, p90 ≤ max", row)
		}
	}
	for _, name := range []string{"pooled-ratio", "pooled-inflation"} {
		found := false
		for _, f := range rep.Figures {
			found = found || f.Name == name && len(f.PNG) > 0
		}
		if !found {
			t.Errorf("no figure %s", name)
		}
	}
}
