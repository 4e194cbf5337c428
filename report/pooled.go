package report

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/pooled"
)

// Reference is the estimator an on-policy ablation's others are compared with.
const Reference = "drmas"

// Pooled-section table titles, for readers of a Report.
const (
	TableHeldOut   = "Held-out success per estimator (pooled over seeds)"
	TablePaired    = "Paired held-out difference drmas − estimator (same prompts, per seed)"
	TableSpikes    = "Grad-norm spikes per agent (steps above 2× and 5× the run's median)"
	TableRatioFit  = "On-policy grad-norm ratio estimator / drmas vs √(inflation)"
	TableInflation = "Inflation factor per agent per iteration (groups pooled over seeds)"
)

// pooledSection adds, for an on-policy ablation, the statistics pooled over its output runs
// (analysis/pooled): held-out success with paired intervals across seeds, grad-norm spikes,
// the predicted-vs-measured grad-norm ratio and the inflation factor per iteration.
func pooledSection(ctx context.Context, s *analysis.Session, o Options, r *Report) error {
	if o.Ablation != "onpolicy" {
		return nil
	}
	if o.OpenRun == nil {
		r.Notes = append(r.Notes, "the output runs of the on-policy ablation were not opened: no pooled statistics")
		return nil
	}
	in, err := pooledInput(ctx, s, o)
	if err != nil {
		return err
	}
	if len(in.Prompts) == 0 {
		r.Notes = append(r.Notes, "the on-policy runs have no per-prompt held-out evaluations (eval/step=N/prompts.parquet; tasks.eval_size > 0 and --eval-every): the held-out tables are empty")
	}
	res := pooled.Analyze(in)
	r.Tables = append(r.Tables, heldOutTable(res), pairedTable(res), spikeTable(res), ratioTable(res), inflationTable(res))
	return pooledFigures(res, r)
}

// pooledInput reads the summary's grad norms and, from each output run, its held-out per-prompt
// evaluations and its rollout groups' inflation.
func pooledInput(ctx context.Context, s *analysis.Session, o Options) (pooled.Input, error) {
	in := pooled.Input{Reference: Reference, Level: 0.95}
	g, err := s.Query(ctx, `SELECT estimator, seed, agent, iteration, grad_norm FROM ablations
		WHERE mode = 'onpolicy' AND rows > 0 AND agent <> '*' ORDER BY estimator, seed, agent, iteration`)
	if err != nil {
		return in, fmt.Errorf("report: pooled: %w", err)
	}
	for i := range g.Rows {
		in.GradNorms = append(in.GradNorms, pooled.GradNorm{Estimator: g.String(i, "estimator"), Seed: uint64(g.Float(i, "seed")),
			Agent: g.String(i, "agent"), Iteration: int(g.Float(i, "iteration")), Value: g.Float(i, "grad_norm")})
	}
	runs, err := s.Query(ctx, `SELECT DISTINCT estimator, seed, run FROM ablations WHERE mode = 'onpolicy' ORDER BY estimator, seed, run`)
	if err != nil {
		return in, fmt.Errorf("report: pooled: %w", err)
	}
	for i := range runs.Rows {
		est, seed := runs.String(i, "estimator"), uint64(runs.Float(i, "seed"))
		if err := readRun(ctx, o, runs.String(i, "run"), est, seed, &in); err != nil {
			return in, err
		}
	}
	return in, nil
}

func readRun(ctx context.Context, o Options, run, est string, seed uint64, in *pooled.Input) error {
	rs, err := o.OpenRun(ctx, run)
	if err != nil {
		return fmt.Errorf("report: output run %s of the on-policy ablation: %w", run, err)
	}
	defer rs.Close()
	if !rs.Empty("eval_prompts") {
		t, err := rs.Query(ctx, `SELECT step, task_id, k, successes FROM eval_prompts WHERE split = 'eval' ORDER BY step, task_id`)
		if err != nil {
			return fmt.Errorf("report: run %s: %w", run, err)
		}
		for i := range t.Rows {
			in.Prompts = append(in.Prompts, pooled.Prompt{Estimator: est, Seed: seed, Step: int64(t.Float(i, "step")),
				TaskID: t.String(i, "task_id"), K: int(t.Float(i, "k")), Successes: int(t.Float(i, "successes"))})
		}
	}
	if !rs.Empty("rollouts") {
		t, err := rs.Query(ctx, analysis.ConditionGroupsSQL())
		if err != nil {
			return fmt.Errorf("report: run %s: %w", run, err)
		}
		for i := range t.Rows {
			in.Groups = append(in.Groups, pooled.Group{Estimator: est, Seed: seed, Agent: t.String(i, "agent"),
				Iteration: int(t.Float(i, "iteration")), Inflation: t.Float(i, "inflation")})
		}
	}
	return nil
}

// WriteText prints the tables with the given titles (those the report has) as aligned text.
func (r *Report) WriteText(w io.Writer, titles ...string) error {
	for _, title := range titles {
		for _, t := range r.Tables {
			if t.Title != title {
				continue
			}
			fmt.Fprintf(w, "\n%s\n", t.Title)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, strings.Join(t.Columns, "\t"))
			for _, row := range t.Rows {
				fmt.Fprintln(tw, strings.Join(row, "\t"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func ci(iv pooled.Interval) string {
	return "[" + f4(iv.Lo) + ", " + f4(iv.Hi) + "]"
}

func heldOutTable(res *pooled.Result) Table {
	tb := Table{Title: TableHeldOut,
		Note:    "each seed's last evaluated step on its held-out prompts; pass@k with k samples per prompt = share of prompts with a success; 95 % t-interval of the mean over seeds, df = seeds − 1",
		Columns: []string{"estimator", "seeds", "prompts per seed", "avg@k mean", "avg@k 95 % CI", "pass@k mean", "pass@k 95 % CI", "df"}}
	for _, h := range res.HeldOut {
		tb.Rows = append(tb.Rows, []string{h.Estimator, strconv.Itoa(h.Seeds), strconv.FormatFloat(h.Prompts, 'f', 1, 64),
			f4(h.AvgAtK.Mean), ci(h.AvgAtK), f4(h.PassK.Mean), ci(h.PassK), strconv.Itoa(h.AvgAtK.DF)})
	}
	return tb
}

func pairedTable(res *pooled.Result) Table {
	tb := Table{Title: TablePaired,
		Note: "per seed: the mean over the held-out prompts both runs evaluated (same seed, same prompts) at the last step both evaluated of drmas's success minus the estimator's; " +
			"then a 95 % t-interval over seeds (df = seeds − 1): the interval excludes 0 only if the seeds agree",
		Columns: []string{"estimator", "metric", "seeds", "prompts per seed", "per-seed differences", "mean", "SE", "df", "t", "95 % CI"}}
	for _, p := range res.Paired {
		prompts := make([]string, len(p.Prompts))
		for i, n := range p.Prompts {
			prompts[i] = strconv.Itoa(n)
		}
		for _, m := range []struct {
			name  string
			diffs []float64
			iv    pooled.Interval
		}{{"avg@k", p.AvgDiff, p.AvgAtK}, {"pass@k", p.PassDiff, p.PassK}} {
			tb.Rows = append(tb.Rows, []string{p.Estimator, m.name, strconv.Itoa(m.iv.N), strings.Join(prompts, ", "), joinF(m.diffs),
				f4(m.iv.Mean), f4(m.iv.SE), strconv.Itoa(m.iv.DF), f4(m.iv.T), ci(m.iv)})
		}
	}
	return tb
}

func joinF(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = f4(x)
	}
	return strings.Join(s, ", ")
}

func spikeTable(res *pooled.Result) Table {
	tb := Table{Title: TableSpikes,
		Note:    "a step is an iteration where the agent had rows; its grad norm is before clipping, mean over the iteration's updates; the median is of each run's own steps; counts are totals over seeds",
		Columns: []string{"estimator", "agent", "seeds", "steps", "> 2× median", "> 5× median", "max/median mean", "max/median worst", "per seed (>2×/>5×)"}}
	for _, sp := range res.Spikes {
		per := make([]string, len(sp.Seeds))
		for i, x := range sp.PerSeed {
			per[i] = fmt.Sprintf("s%d: %d/%d", sp.Seeds[i], x.Above2, x.Above5)
		}
		tb.Rows = append(tb.Rows, []string{sp.Estimator, sp.Agent, strconv.Itoa(len(sp.Seeds)), strconv.Itoa(sp.Steps),
			strconv.Itoa(sp.Above2), strconv.Itoa(sp.Above5), f4(sp.MaxOverMedianMean), f4(sp.Worst), strings.Join(per, ", ")})
	}
	return tb
}

func ratioTable(res *pooled.Result) Table {
	tb := Table{Title: TableRatioFit,
		Note: "one point per (seed, iteration, agent) where both updated: measured = the estimator's grad norm / drmas's (same seed and iteration, different rollouts on-policy), " +
			"predicted = √(mean inflation of the estimator's rollout groups); fit: measured = intercept + slope·predicted; R² identity: the share of the measured ratios' variance explained by measured = predicted",
		Columns: []string{"estimator", "agent", "points", "mean predicted", "mean measured", "slope", "intercept", "R² (fit)", "R² identity"}}
	for _, f := range res.Fits {
		tb.Rows = append(tb.Rows, []string{f.Estimator, f.Agent, strconv.Itoa(f.N), f4(f.MeanPredicted), f4(f.MeanMeasured),
			f4(f.Slope), f4(f.Intercept), f4(f.R2), f4(f.R2Identity)})
	}
	return tb
}

func inflationTable(res *pooled.Result) Table {
	tb := Table{Title: TableInflation,
		Note:    "(σ_k² + (μ_k − μ)²)/σ² per prompt group with σ > 0, in each estimator's own rollouts; mean, p90 and max over the groups of all seeds at the iteration (iteration all: over every iteration)",
		Columns: []string{"estimator", "agent", "iteration", "groups", "mean", "p90", "max"}}
	for _, x := range res.Inflation {
		it := strconv.Itoa(x.Iteration)
		if x.Iteration < 0 {
			it = "all"
		}
		tb.Rows = append(tb.Rows, []string{x.Estimator, x.Agent, it, strconv.Itoa(x.N), f4(x.Mean), f4(x.P90), f4(x.Max)})
	}
	return tb
}

func pooledFigures(res *pooled.Result, r *Report) error {
	var ss []scatterSeries
	idx := map[string]int{}
	for _, p := range res.Points {
		name := p.Estimator + " " + p.Agent
		i, ok := idx[name]
		if !ok {
			i = len(ss)
			idx[name] = i
			ss = append(ss, scatterSeries{Name: name})
		}
		ss[i].X, ss[i].Y = append(ss[i].X, p.Predicted), append(ss[i].Y, p.Measured)
	}
	if len(ss) > 0 {
		png, err := scatterPlot("On-policy grad-norm ratio estimator / drmas vs √(inflation)", "predicted √(mean inflation)", "measured grad-norm ratio", ss)
		if err != nil {
			return err
		}
		r.Figures = append(r.Figures, Figure{Name: "pooled-ratio", PNG: png,
			Caption: "Measured grad-norm ratio (estimator / drmas, same seed and iteration) against √ of the mean inflation of the estimator's rollout groups, one point per seed, iteration and agent; the line is measured = predicted."})
	}
	var ls []Series
	li := map[string]int{}
	for _, x := range res.Inflation {
		if x.Iteration < 0 {
			continue
		}
		for _, m := range []struct {
			name string
			v    float64
		}{{"mean", x.Mean}, {"p90", x.P90}} {
			name := x.Estimator + " " + x.Agent + " " + m.name
			i, ok := li[name]
			if !ok {
				i = len(ls)
				li[name] = i
				ls = append(ls, Series{Name: name})
			}
			ls[i].X, ls[i].Y = append(ls[i].X, float64(x.Iteration)), append(ls[i].Y, m.v)
		}
	}
	if len(ls) == 0 {
		r.Notes = append(r.Notes, "no rollout group of the on-policy runs had σ > 0: no inflation figure")
		return nil
	}
	png, err := linePlot("Inflation per agent per iteration (groups pooled over seeds)", "iteration", "inflation", ls)
	if err != nil {
		return err
	}
	r.Figures = append(r.Figures, Figure{Name: "pooled-inflation", PNG: png,
		Caption: "Lemma 4.2 inflation factor per estimator and agent per iteration: mean and p90 over the prompt groups (σ > 0) of all seeds."})
	return nil
}
