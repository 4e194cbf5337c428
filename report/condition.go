package report

import (
	"context"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/pooled"
)

// ConditionPoint is one agent at one replayed iteration: the condition of its rollout (from the
// rollouts, analysis.ConditionIterSQL) and the grad norms each estimator's update measured on it.
type ConditionPoint struct {
	Run       string
	Seed      uint64
	Iteration int
	Agent     string
	// Inflation is the mean over groups with σ > 0, InflationP90 its p90.
	Inflation, InflationP90 float64
	// PredEnergyStep, PredEnergyGRPO: √(ΣA²_est / ΣA²_drmas) over the agent's rows.
	PredEnergyStep, PredEnergyGRPO float64
	// GradNorm per estimator (drmas, grpo, grpo_step): the learner's per-agent grad norm before
	// clipping, mean over the iteration's updates.
	GradNorm map[string]float64
}

// ConditionPoints joins a run's replay ablation with the condition of the replayed rollouts. A
// run without a replay summary has none.
func ConditionPoints(ctx context.Context, s *analysis.Session) ([]ConditionPoint, error) {
	if s.Empty("ablations") || s.Empty("rollouts") {
		return nil, nil
	}
	t, err := s.Query(ctx, `WITH c AS (`+analysis.ConditionIterSQL()+`),
		a AS (SELECT seed, iteration, agent, estimator, grad_norm FROM ablations WHERE mode = 'replay' AND rows > 0 AND agent <> '*')
		SELECT a.seed, c.iteration, c.agent, c.inflation_mean, c.inflation_p90, c.pred_energy_grpo_step, c.pred_energy_grpo,
		  max(grad_norm) FILTER (WHERE estimator = 'drmas') AS g_drmas, max(grad_norm) FILTER (WHERE estimator = 'grpo') AS g_grpo,
		  max(grad_norm) FILTER (WHERE estimator = 'grpo_step') AS g_grpo_step
		FROM c JOIN a USING (iteration, agent)
		GROUP BY ALL ORDER BY a.seed, c.iteration, c.agent`)
	if err != nil {
		return nil, fmt.Errorf("report: condition: %w", err)
	}
	out := make([]ConditionPoint, 0, len(t.Rows))
	for i := range t.Rows {
		p := ConditionPoint{Run: s.Run, Seed: uint64(t.Float(i, "seed")), Iteration: int(t.Float(i, "iteration")), Agent: t.String(i, "agent"),
			Inflation: t.Float(i, "inflation_mean"), InflationP90: t.Float(i, "inflation_p90"),
			PredEnergyStep: t.Float(i, "pred_energy_grpo_step"), PredEnergyGRPO: t.Float(i, "pred_energy_grpo"),
			GradNorm: map[string]float64{}}
		for _, e := range []string{"drmas", "grpo", "grpo_step"} {
			p.GradNorm[e] = t.Float(i, "g_"+e)
		}
		out = append(out, p)
	}
	return out, nil
}

// Ratio is the measured grad-norm ratio est / drmas (NaN where either is missing or drmas is 0).
func (p ConditionPoint) Ratio(est string) float64 {
	d, g := p.GradNorm["drmas"], p.GradNorm[est]
	if !(d > 0) || math.IsNaN(g) {
		return math.NaN()
	}
	return g / d
}

// Fit is a least-squares fit of measured on predicted ratios (pooled.Fit).
type Fit = pooled.Fit

// FitLine fits measured y on predicted x, skipping pairs where either is not finite.
func FitLine(x, y []float64) Fit { return pooled.FitLine(x, y) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// predictors are the x axes of the condition figures: the Lemma's √(mean inflation), and the
// advantage energy of the estimator compared.
var predictors = []struct {
	name, label string
	of          func(p ConditionPoint, est string) float64
}{
	{"sqrt_inflation", "√(mean inflation)", func(p ConditionPoint, _ string) float64 { return math.Sqrt(p.Inflation) }},
	{"energy", "√(ΣA²_est / ΣA²_drmas)", func(p ConditionPoint, est string) float64 {
		if est == "grpo" {
			return p.PredEnergyGRPO
		}
		return p.PredEnergyStep
	}},
}

// conditionSection adds, for a replay ablation, the predicted-vs-measured figures and the fits
// over the points of the run and of the pooled runs (Options.Pool).
func conditionSection(ctx context.Context, s *analysis.Session, o Options, r *Report) error {
	if o.Ablation != "replay" {
		return nil
	}
	var pts []ConditionPoint
	for _, sess := range append([]*analysis.Session{s}, o.Pool...) {
		p, err := ConditionPoints(ctx, sess)
		if err != nil {
			return err
		}
		pts = append(pts, p...)
	}
	if len(pts) == 0 {
		r.Notes = append(r.Notes, "no replayed agent-iteration with both a rollout and grad norms: no predicted-vs-measured figure")
		return nil
	}
	runs := map[string]bool{}
	for _, p := range pts {
		runs[p.Run] = true
	}
	tb := Table{Title: "Lemma 4.2: predicted vs measured grad-norm ratio (estimator / drmas)",
		Note:    fmt.Sprintf("one point per replayed (run, iteration, agent), %d runs; fit: measured = intercept + slope·predicted; R² identity: the share of the measured ratios' variance explained by measured = predicted", len(runs)),
		Columns: []string{"estimator", "predictor", "agent", "points", "mean predicted", "mean measured", "slope", "intercept", "R² (fit)", "R² identity", "max |m−p|/p"}}
	for _, pr := range predictors {
		var series []scatterSeries
		for _, est := range []string{"grpo_step", "grpo"} {
			for _, agent := range append([]string{"all"}, pointAgents(pts)...) {
				var x, y []float64
				for _, p := range pts {
					if agent == "all" || p.Agent == agent {
						x, y = append(x, pr.of(p, est)), append(y, p.Ratio(est))
					}
				}
				f := FitLine(x, y)
				tb.Rows = append(tb.Rows, []string{est, pr.label, agent, fmt.Sprint(f.N), f4(f.MeanPredicted), f4(f.MeanMeasured),
					f4(f.Slope), f4(f.Intercept), f4(f.R2), f4(f.R2Identity), f4(f.MaxRel)})
				if agent != "all" {
					series = append(series, scatterSeries{Name: est + " " + agent, X: x, Y: y})
				}
			}
		}
		png, err := scatterPlot("Grad-norm ratio estimator / drmas vs "+pr.label, "predicted "+pr.label, "measured grad-norm ratio", series)
		if err != nil {
			return err
		}
		r.Figures = append(r.Figures, Figure{Name: "condition-" + pr.name,
			Caption: fmt.Sprintf("Measured grad-norm ratio (estimator / drmas, same rollouts) against %s of the same rollouts, per agent and iteration (%d runs); the line is measured = predicted.", pr.label, len(runs)),
			PNG:     png})
	}
	r.Tables = append(r.Tables, tb)
	return nil
}

func pointAgents(pts []ConditionPoint) []string {
	seen := map[string]bool{}
	for _, p := range pts {
		seen[p.Agent] = true
	}
	return sortedKeys(seen)
}

// inflationSection shows the condition per iteration: the inflation's mean and p90 over groups
// per agent, and a table per agent over all iterations (analysis report condition).
func inflationSection(ctx context.Context, s *analysis.Session, o Options, r *Report) error {
	if s.Empty("rollouts") {
		return nil
	}
	t, err := s.Query(ctx, analysis.ConditionIterSQL()+` ORDER BY agent, iteration`)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	series := seriesBy(t, "agent", "iteration", "inflation_mean", func(a string) string { return a + " mean" })
	series = append(series, seriesBy(t, "agent", "iteration", "inflation_p90", func(a string) string { return a + " p90" })...)
	png, err := linePlot("Inflation (σ_k² + (μ_k − μ)²)/σ² over groups, per agent", "iteration", "inflation", series)
	if err != nil {
		return err
	}
	r.Figures = append(r.Figures, Figure{Name: "inflation", Caption: "Lemma 4.2 inflation factor per agent per iteration: mean and p90 over the groups with σ > 0 (1 = the global baseline fits the agent).", PNG: png})
	c, err := s.Report(ctx, "condition", o.Params)
	if err != nil {
		return err
	}
	tb := Table{Title: "The Lemma 4.2 condition per agent (all iterations)",
		Note:    "over groups with σ > 0; σ = 0 share: groups whose scores are all equal (no signal for any estimator); σ_k = 0 share: no signal for drmas; predicted ratio: √(ΣA²_grpo_step / ΣA²_drmas) over the agent's rows (analyze --report condition)",
		Columns: []string{"agent", "iterations", "groups", "inflation mean", "p90", "max", "σ = 0 share", "σ_k = 0 share", "mean |μ_k − μ|", "predicted ratio"}}
	for i := range c.Rows {
		tb.Rows = append(tb.Rows, []string{c.String(i, "agent"), c.String(i, "iterations"), c.String(i, "groups"),
			f4(c.Float(i, "inflation_mean")), f4(c.Float(i, "inflation_p90")), f4(c.Float(i, "inflation_max")),
			f4(c.Float(i, "zero_sigma_share")), f4(c.Float(i, "zero_sigma_k_share")), f4(c.Float(i, "mu_gap_mean")), f4(c.Float(i, "pred_energy_grpo_step"))})
	}
	r.Tables = append(r.Tables, tb)
	return nil
}

type scatterSeries struct {
	Name string
	X, Y []float64
}

// scatterPlot draws points per series and the line y = x over their range.
func scatterPlot(title, xlabel, ylabel string, series []scatterSeries) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		var xys plotter.XYs
		for j := range s.X {
			if finite(s.X[j]) && finite(s.Y[j]) {
				xys = append(xys, plotter.XY{X: s.X[j], Y: s.Y[j]})
				lo, hi = math.Min(lo, math.Min(s.X[j], s.Y[j])), math.Max(hi, math.Max(s.X[j], s.Y[j]))
			}
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", title, err)
		}
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		sc.Radius = vg.Points(3)
		p.Add(sc)
		p.Legend.Add(s.Name, sc)
	}
	if !math.IsInf(lo, 0) {
		lo, hi = widen(lo, hi)
		id, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", title, err)
		}
		id.Color = color.Gray{Y: 90}
		id.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(id)
		p.Legend.Add("measured = predicted", id)
		p.X.Min, p.X.Max, p.Y.Min = lo, hi, lo
		p.Y.Max = hi + (hi-lo)*0.35 // room for the legend
	}
	return render(p)
}
