// Package report renders a run (and optionally its ablation summary) as plots and bundles them
// into one self-contained HTML file: PNGs made with gonum/plot, embedded as base64 data URIs,
// and tables of the key numbers. It reads everything through an analysis.Session, so it sees
// exactly the committed, verified outputs `drmas analyze` sees.
package report

import (
	"context"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/pooled"
)

// Options select what to include.
type Options struct {
	// Ablation is "", "replay" or "onpolicy": include that ablation summary of the run.
	Ablation string
	Title    string
	// Params tune the grad-norm spike count of the key-number table.
	Params analysis.ReportParams
	// Pool are sessions of more runs with a replay ablation whose points join this run's in the
	// predicted-vs-measured figures (condition.go).
	Pool []*analysis.Session
	// OpenRun opens a session of another run of the store: the on-policy ablation's output runs
	// (pooled.go). The report closes what it opens.
	OpenRun func(ctx context.Context, run string) (*analysis.Session, error)
}

// Figure is one PNG.
type Figure struct {
	Name    string // file-like name, e.g. "gradnorm"
	Caption string
	PNG     []byte
}

// Table is a titled table of preformatted cells.
type Table struct {
	Title   string
	Note    string
	Columns []string
	Rows    [][]string
}

// Report is everything the HTML shows.
type Report struct {
	Title   string
	Run     string
	Summary []string // one line each: what the run holds
	Tables  []Table
	Figures []Figure
	Notes   []string // what is missing and why
}

// Build queries the session and renders the figures.
func Build(ctx context.Context, s *analysis.Session, o Options) (*Report, error) {
	r := &Report{Title: o.Title, Run: s.Run}
	if r.Title == "" {
		r.Title = "drmas run " + s.Run
	}
	for _, v := range analysis.Views {
		r.Summary = append(r.Summary, fmt.Sprintf("%s: %d committed files", v, s.Counts[v]))
	}
	steps := []func(context.Context, *analysis.Session, Options, *Report) error{
		keyNumbers, gradNormFigure, rewardFigure, successFigure, histograms, inflationSection, ablationSection, conditionSection, pooledSection,
	}
	for _, f := range steps {
		if err := f(ctx, s, o, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Generate builds the report from s and writes its HTML to w.
func Generate(ctx context.Context, s *analysis.Session, o Options, w io.Writer) (*Report, error) {
	r, err := Build(ctx, s, o)
	if err != nil {
		return nil, err
	}
	return r, r.WriteHTML(w)
}

func f4(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// seriesBy groups rows of t (name column, x column, y column) into series, in name order.
func seriesBy(t *analysis.Table, name, x, y string, label func(string) string) []Series {
	by := map[string]*Series{}
	for i := range t.Rows {
		n := t.String(i, name)
		s := by[n]
		if s == nil {
			s = &Series{Name: n}
			if label != nil {
				s.Name = label(n)
			}
			by[n] = s
		}
		s.X = append(s.X, t.Float(i, x))
		s.Y = append(s.Y, t.Float(i, y))
	}
	out := make([]Series, 0, len(by))
	for _, k := range sortedKeys(by) {
		out = append(out, *by[k])
	}
	return out
}

func agentLabel(a string) string {
	if a == "*" {
		return "whole model"
	}
	if m, ok := strings.CutPrefix(a, "*"); ok {
		return "whole model " + m
	}
	return a
}

// agentKey is the SQL of a series key for rows with agent and model columns: the agent, except
// that when the rows (after WHERE) come from several models, each model's whole-model rows
// (agent '*') stay apart, as '*<model>'.
const agentKey = "CASE WHEN agent = '*' AND min(model) OVER () <> max(model) OVER () THEN '*' || model ELSE agent END"

func keyNumbers(ctx context.Context, s *analysis.Session, o Options, r *Report) error {
	if !s.Empty("rollouts") {
		t, err := s.Query(ctx, `SELECT agent, count(DISTINCT iteration) AS iterations, count(*) AS rows,
			avg(score) FILTER (WHERE iteration = (SELECT min(iteration) FROM rollouts)) AS first_score,
			avg(score) FILTER (WHERE iteration = (SELECT max(iteration) FROM rollouts)) AS last_score,
			avg(score) AS mean_score, avg(CASE WHEN valid THEN 1 ELSE 0 END) AS valid_share
			FROM rollouts GROUP BY agent ORDER BY agent`)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		tb := Table{Title: "Rewards per agent", Note: "score = episode reward minus the invalid-action penalty; first/last = mean over the first/last iteration",
			Columns: []string{"agent", "iterations", "rows", "first score", "last score", "mean score", "valid share"}}
		for i := range t.Rows {
			tb.Rows = append(tb.Rows, []string{t.String(i, "agent"), t.String(i, "iterations"), t.String(i, "rows"),
				f4(t.Float(i, "first_score")), f4(t.Float(i, "last_score")), f4(t.Float(i, "mean_score")), f4(t.Float(i, "valid_share"))})
		}
		r.Tables = append(r.Tables, tb)
	}
	if !s.Empty("metrics") {
		t, err := s.Report(ctx, "gradnorm", o.Params)
		if err != nil {
			return err
		}
		tb := Table{Title: "Gradient norms per agent", Note: "per-iteration grad norm before clipping (mean over the iteration's updates); a spike exceeds k × the rolling median of the previous iterations (analyze --report gradnorm)",
			Columns: []string{"estimator", "model", "agent", "iterations", "median", "max", "max/median", "peak mini-batch", "spikes", "spike iterations"}}
		for i := range t.Rows {
			tb.Rows = append(tb.Rows, []string{t.String(i, "estimator"), t.String(i, "model"), agentLabel(t.String(i, "agent")), t.String(i, "updates"),
				f4(t.Float(i, "grad_norm_median")), f4(t.Float(i, "grad_norm_max")), f4(t.Float(i, "max_over_median")),
				f4(t.Float(i, "peak_minibatch_grad_norm")), t.String(i, "spikes"), t.String(i, "spike_iterations")})
		}
		r.Tables = append(r.Tables, tb)
	}
	if !s.Empty("evals") {
		t, err := s.Query(ctx, `SELECT step, data_source, k, prompts, avg_at_k, pass_at_k, f1_mean FROM evals
			WHERE step IN ((SELECT min(step) FROM evals), (SELECT max(step) FROM evals))
			ORDER BY step, data_source = 'all', data_source`)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		tb := Table{Title: "Evaluation (first and last evaluated checkpoint)", Columns: []string{"step", "data source", "k", "prompts", "avg@k", "pass@k", "F1"}}
		for i := range t.Rows {
			tb.Rows = append(tb.Rows, []string{t.String(i, "step"), t.String(i, "data_source"), t.String(i, "k"), t.String(i, "prompts"),
				f4(t.Float(i, "avg_at_k")), f4(t.Float(i, "pass_at_k")), f4(t.Float(i, "f1_mean"))}) // F1 "–": none (math)
		}
		r.Tables = append(r.Tables, tb)
	}
	return nil
}

func gradNormFigure(ctx context.Context, s *analysis.Session, _ Options, r *Report) error {
	if s.Empty("metrics") {
		r.Notes = append(r.Notes, s.NotYet("metrics").Error()+": no grad-norm plot")
		return nil
	}
	series, err := gradNormSeries(ctx, s)
	if err != nil {
		return err
	}
	png, err := linePlot("Grad norm per agent (before clipping)", "iteration", "grad norm", series)
	if err != nil {
		return err
	}
	r.Figures = append(r.Figures, Figure{Name: "gradnorm", Caption: "Gradient norm per agent over iterations (mean over each iteration's updates).", PNG: png})
	return nil
}

// gradNormSeries is a line per agent, and per model for the whole-model rows of several models.
func gradNormSeries(ctx context.Context, s *analysis.Session) ([]Series, error) {
	// An iteration where the agent had no rows (it never acted) is no update: its grad norm of 0
	// is not plotted.
	t, err := s.Query(ctx, `SELECT `+agentKey+` AS agent, iteration, grad_norm FROM metrics WHERE rows > 0 ORDER BY agent, iteration`)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return seriesBy(t, "agent", "iteration", "grad_norm", agentLabel), nil
}

func rewardFigure(ctx context.Context, s *analysis.Session, _ Options, r *Report) error {
	if s.Empty("rollouts") {
		r.Notes = append(r.Notes, s.NotYet("rollouts").Error()+": no reward plots")
		return nil
	}
	t, err := s.Query(ctx, `SELECT agent, iteration, avg(score) AS score FROM rollouts GROUP BY agent, iteration ORDER BY agent, iteration`)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	series := seriesBy(t, "agent", "iteration", "score", nil)
	all, err := s.Query(ctx, `SELECT iteration, avg(score) AS score FROM rollouts GROUP BY iteration ORDER BY iteration`)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	caption := "Mean row score per agent per iteration (rollouts)."
	mean := Series{Name: "all agents"}
	for i := range all.Rows {
		mean.X = append(mean.X, all.Float(i, "iteration"))
		mean.Y = append(mean.Y, all.Float(i, "score"))
	}
	if len(mean.X) >= 2 {
		a, b := leastSquares(mean.X, mean.Y)
		x0, x1 := mean.X[0], mean.X[len(mean.X)-1]
		series = append(series, mean, Series{Name: fmt.Sprintf("trend %+.4f/iteration", b), X: []float64{x0, x1}, Y: []float64{a + b*x0, a + b*x1}})
		caption += fmt.Sprintf(" The trend is the least-squares line through the mean over all rows: %+.4f per iteration.", b)
	}
	png, err := linePlot("Mean score per agent", "iteration", "score", series)
	if err != nil {
		return err
	}
	r.Figures = append(r.Figures, Figure{Name: "reward", Caption: caption, PNG: png})
	return nil
}

// leastSquares fits y ≈ a + b·x with pooled.FitLine (b = 0 when the x do not vary).
func leastSquares(x, y []float64) (a, b float64) {
	f := pooled.FitLine(x, y)
	if math.IsNaN(f.Slope) {
		return f.MeanMeasured, 0
	}
	return f.Intercept, f.Slope
}

func successFigure(ctx context.Context, s *analysis.Session, _ Options, r *Report) error {
	if s.Empty("evals") {
		r.Notes = append(r.Notes, s.NotYet("evals").Error()+": no avg@k/pass@k plot")
		return nil
	}
	t, err := s.Query(ctx, `SELECT data_source, step, avg_at_k, pass_at_k, k FROM evals ORDER BY data_source, step`)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if len(t.Rows) == 0 {
		r.Notes = append(r.Notes, "run "+s.Run+": the committed evaluations hold no rows: no avg@k/pass@k plot")
		return nil
	}
	k := t.String(0, "k")
	var series []Series
	series = append(series, seriesBy(t, "data_source", "step", "avg_at_k", func(n string) string { return "avg@" + k + " " + n })...)
	series = append(series, seriesBy(t, "data_source", "step", "pass_at_k", func(n string) string { return "pass@" + k + " " + n })...)
	png, err := linePlotY("avg@"+k+" and pass@"+k+" per data source", "checkpoint step", "success", series, 0, 1)
	if err != nil {
		return err
	}
	r.Figures = append(r.Figures, Figure{Name: "success", Caption: "Held-out evaluation per checkpoint step (step 0 is the warm-up).", PNG: png})
	return nil
}

func histograms(ctx context.Context, s *analysis.Session, _ Options, r *Report) error {
	if s.Empty("rollouts") {
		return nil
	}
	t, err := s.Query(ctx, `SELECT agent, score FROM rollouts ORDER BY agent, iteration, row_id`)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	by := map[string][]float64{}
	for i := range t.Rows {
		a := t.String(i, "agent")
		by[a] = append(by[a], t.Float(i, "score"))
	}
	for _, a := range sortedKeys(by) {
		png, err := histPlot("Score distribution: "+a, "score", by[a])
		if err != nil {
			return err
		}
		r.Figures = append(r.Figures, Figure{Name: "hist-" + a, Caption: fmt.Sprintf("Distribution of %s's row scores over all iterations (%d rows).", a, len(by[a])), PNG: png})
	}
	return nil
}

func ablationSection(ctx context.Context, s *analysis.Session, o Options, r *Report) error {
	if o.Ablation == "" {
		return nil
	}
	if o.Ablation != "replay" && o.Ablation != "onpolicy" {
		return fmt.Errorf("report: unknown ablation %q (want replay or onpolicy)", o.Ablation)
	}
	var n int64
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM ablations WHERE mode = ?`, o.Ablation).Scan(&n); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("report: run %s has no committed %s ablation summary yet (run `drmas ablate --run %s --mode %s`)", s.Run, o.Ablation, s.Run, o.Ablation)
	}
	// Iterations where an agent had no rows (it never acted, so its grad norm, loss and reward
	// are 0) are no updates: left out, as in the gradnorm report.
	rows := `WITH a AS (SELECT *, ` + agentKey + ` AS series FROM ablations WHERE mode = ? AND rows > 0) `
	// Seeds are averaged.
	t, err := s.Query(ctx, rows+`SELECT estimator, series, iteration, avg(grad_norm) AS grad_norm
		FROM a GROUP BY estimator, series, iteration ORDER BY series, estimator, iteration`, o.Ablation)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	// Reward and evaluations of the whole system: every model's whole-model rows.
	whole, err := s.Query(ctx, `SELECT estimator, iteration, avg(reward) AS reward, avg(avg_at_k) AS avg_at_k, avg(pass_at_k) AS pass_at_k
		FROM ablations WHERE mode = ? AND agent = '*' GROUP BY estimator, iteration ORDER BY estimator, iteration`, o.Ablation)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	agents := map[string]*analysis.Table{}
	for i, row := range t.Rows {
		a := t.String(i, "series")
		if agents[a] == nil {
			agents[a] = &analysis.Table{Columns: t.Columns}
		}
		agents[a].Rows = append(agents[a].Rows, row)
	}
	for _, a := range sortedKeys(agents) {
		png, err := linePlot(fmt.Sprintf("%s ablation: grad norm of %s per estimator", o.Ablation, agentLabel(a)), "iteration", "grad norm",
			seriesBy(agents[a], "estimator", "iteration", "grad_norm", nil))
		if err != nil {
			return err
		}
		name := a
		if m, ok := strings.CutPrefix(a, "*"); ok {
			name = strings.TrimSuffix("model-"+m, "-")
		}
		r.Figures = append(r.Figures, Figure{Name: "ablation-gradnorm-" + name, Caption: fmt.Sprintf("Grad norm of %s per estimator (%s; mean over seeds).", agentLabel(a), o.Ablation), PNG: png})
	}
	if len(whole.Rows) > 0 && o.Ablation == "onpolicy" {
		png, err := linePlot("onpolicy ablation: mean score per estimator", "iteration", "score", seriesBy(whole, "estimator", "iteration", "reward", nil))
		if err != nil {
			return err
		}
		r.Figures = append(r.Figures, Figure{Name: "ablation-reward", Caption: "Mean rollout score per estimator (all agents; mean over seeds).", PNG: png})
	}
	var evals int64
	if err := s.DB().QueryRowContext(ctx, `SELECT count(avg_at_k) FROM ablations WHERE mode = ?`, o.Ablation).Scan(&evals); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if len(whole.Rows) > 0 && evals > 0 {
		series := seriesBy(whole, "estimator", "iteration", "avg_at_k", func(e string) string { return "avg@k " + e })
		series = append(series, seriesBy(whole, "estimator", "iteration", "pass_at_k", func(e string) string { return "pass@k " + e })...)
		png, err := linePlotY(o.Ablation+" ablation: avg@k / pass@k per estimator", "iteration", "success", series, 0, 1)
		if err != nil {
			return err
		}
		r.Figures = append(r.Figures, Figure{Name: "ablation-success", Caption: "Evaluation of the checkpoint each iteration published, per estimator.", PNG: png})
	} else {
		r.Notes = append(r.Notes, "the "+o.Ablation+" ablation has no evaluations (replay evaluates with `drmas ablate --eval`)")
	}
	if o.Ablation == "replay" {
		r.Notes = append(r.Notes, "replay trains every estimator on the same stored rollouts, so rewards are equal across estimators by construction; compare grad norms, losses and (with --eval) the evaluations")
	}
	// last avg@k / pass@k: the mean over seeds at the last iteration any seed evaluated.
	st, err := s.Query(ctx, rows+`, last AS (SELECT estimator, series, max(iteration) FILTER (WHERE avg_at_k IS NOT NULL) AS last_it FROM a GROUP BY estimator, series)
		SELECT estimator, series, count(DISTINCT seed) AS seeds, count(DISTINCT iteration) AS iterations,
		avg(grad_norm) AS gn_mean, median(grad_norm) AS gn_median, max(grad_norm) AS gn_max, avg(loss) AS loss, avg(reward) AS reward,
		avg(avg_at_k) FILTER (WHERE iteration = last_it) AS last_avg, avg(pass_at_k) FILTER (WHERE iteration = last_it) AS last_pass
		FROM a JOIN last USING (estimator, series) GROUP BY estimator, series ORDER BY starts_with(series, '*') DESC, series, estimator`, o.Ablation)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	tb := Table{Title: fmt.Sprintf("Ablation (%s) per estimator", o.Ablation), Note: "grad norm statistics over iterations (and seeds); last avg@k/pass@k = mean over seeds at the last evaluated iteration",
		Columns: []string{"agent", "estimator", "seeds", "iterations", "grad norm mean", "median", "max", "loss mean", "reward mean", "last avg@k", "last pass@k"}}
	for i := range st.Rows {
		tb.Rows = append(tb.Rows, []string{agentLabel(st.String(i, "series")), st.String(i, "estimator"), st.String(i, "seeds"), st.String(i, "iterations"),
			f4(st.Float(i, "gn_mean")), f4(st.Float(i, "gn_median")), f4(st.Float(i, "gn_max")), f4(st.Float(i, "loss")), f4(st.Float(i, "reward")),
			f4(st.Float(i, "last_avg")), f4(st.Float(i, "last_pass"))})
	}
	r.Tables = append(r.Tables, tb)
	return nil
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, .note { color: #555; font-size: 0.9em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>Run <code>{{.Run}}</code>.</p>
<ul>
{{- range .Summary}}
<li>{{.}}</li>
{{- end}}
</ul>
<h2>Key numbers</h2>
{{- range .Tables}}
<h3>{{.Title}}</h3>
{{- if .Note}}
<p class="note">{{.Note}}</p>
{{- end}}
<table>
<thead><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- end}}
<h2>Figures</h2>
{{- range .Figures}}
<figure id="{{.Name}}">
<img {{.Src}} alt="{{.Caption}}">
<figcaption>{{.Caption}}</figcaption>
</figure>
{{- end}}
{{- if .Notes}}
<h2>Notes</h2>
<ul>
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
</body>
</html>
`))

type figureView struct {
	Name, Caption string
	Src           template.HTMLAttr // src="data:…": base64 needs no escaping in a quoted attribute
}

// WriteHTML writes the report as one self-contained HTML page (images inline).
func (r *Report) WriteHTML(w io.Writer) error {
	figs := make([]figureView, len(r.Figures))
	for i, f := range r.Figures {
		figs[i] = figureView{Name: f.Name, Caption: f.Caption,
			Src: template.HTMLAttr(`src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(f.PNG) + `"`)}
	}
	return page.Execute(w, struct {
		*Report
		Figures []figureView
	}{r, figs})
}
