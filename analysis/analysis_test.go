package analysis_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	analysistest.Cleanup()
	os.Exit(code)
}

func open(t *testing.T, store, cache string) *analysis.Session {
	t.Helper()
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	s, err := analysis.Open(context.Background(), analysis.Options{Bucket: b, Run: analysistest.Run, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// goRollouts reads every committed rollout part of the fixture run in Go.
func goRollouts(t *testing.T, b storage.Bucket) []shards.Row {
	t.Helper()
	ctx := context.Background()
	var rows []shards.Row
	for it := 0; it < analysistest.Iterations; it++ {
		dir := layout.RolloutDir(analysistest.Run, it)
		m, _, err := commit.Read(ctx, b, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Files {
			data, err := commit.ReadFile(ctx, b, dir, f)
			if err != nil {
				t.Fatal(err)
			}
			r, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), f.Name)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r...)
		}
	}
	return rows
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestViewsMatchShards(t *testing.T) {
	ctx := context.Background()
	store, _ := analysistest.Source(t)
	t0 := time.Now()
	s := open(t, store, t.TempDir())
	t.Logf("open (list + download %d files, %d bytes + views): %s (sync %s, views %s)",
		s.Stats.Files, s.Stats.Bytes, time.Since(t0), s.SyncTime, s.ViewTime)
	if s.Stats.Downloaded != s.Stats.Files || s.Stats.Files == 0 {
		t.Fatalf("stats %+v: want every file downloaded", s.Stats)
	}
	var desc strings.Builder
	if err := s.Describe(ctx, &desc); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + desc.String())

	b, _ := filestore.New(store)
	defer b.Close()
	rows := goRollouts(t, b)

	// rollouts: count and mean score per (iteration, agent).
	type key struct {
		it    int32
		agent string
	}
	n := map[key]int{}
	sum := map[key]float64{}
	for _, r := range rows {
		k := key{r.Iteration, r.Agent}
		n[k]++
		sum[k] += r.Score
	}
	tb, err := s.Query(ctx, `SELECT iteration, agent, count(*) AS n, avg(score) AS mean FROM rollouts GROUP BY ALL ORDER BY ALL`)
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) != len(n) {
		t.Fatalf("rollouts: %d (iteration, agent) groups, Go has %d", len(tb.Rows), len(n))
	}
	for i := range tb.Rows {
		k := key{int32(tb.Float(i, "iteration")), tb.String(i, "agent")}
		if int(tb.Float(i, "n")) != n[k] || !near(tb.Float(i, "mean"), sum[k]/float64(n[k])) {
			t.Errorf("rollouts %v: DuckDB n=%v mean=%v, Go n=%d mean=%v", k, tb.Float(i, "n"), tb.Float(i, "mean"), n[k], sum[k]/float64(n[k]))
		}
	}

	// rewards report agrees with Go.
	rep, err := s.Report(ctx, "rewards", analysis.ReportParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(n) {
		t.Fatalf("rewards: %d rows, want %d", len(rep.Rows), len(n))
	}
	for i := range rep.Rows {
		k := key{int32(rep.Float(i, "iteration")), rep.String(i, "agent")}
		var sc []float64
		for _, r := range rows {
			if r.Iteration == k.it && r.Agent == k.agent {
				sc = append(sc, r.Score)
			}
		}
		sort.Float64s(sc)
		if !near(rep.Float(i, "score_mean"), sum[k]/float64(n[k])) || !near(rep.Float(i, "score_p50"), quantile(sc, 0.5)) ||
			!near(rep.Float(i, "score_p90"), quantile(sc, 0.9)) {
			t.Errorf("rewards %v: mean %v p50 %v p90 %v, Go %v %v %v", k, rep.Float(i, "score_mean"), rep.Float(i, "score_p50"),
				rep.Float(i, "score_p90"), sum[k]/float64(n[k]), quantile(sc, 0.5), quantile(sc, 0.9))
		}
	}

	// advantages: one row per rollout row per estimator, joinable on row_id; the estimator and
	// iteration come from the folders iter=N and est=E.
	tb, err = s.Query(ctx, `SELECT estimator, count(*) AS n, count(DISTINCT iteration) AS iters,
		sum(CASE WHEN r.row_id IS NULL THEN 1 ELSE 0 END) AS unmatched
		FROM advantages a LEFT JOIN rollouts r USING (iteration, row_id) GROUP BY estimator ORDER BY estimator`)
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) != len(analysistest.Estimators) {
		t.Fatalf("advantages: estimators %v", tb.Rows)
	}
	for i := range tb.Rows {
		if int(tb.Float(i, "n")) != len(rows) || int(tb.Float(i, "iters")) != analysistest.Iterations || tb.Float(i, "unmatched") != 0 {
			t.Errorf("advantages %s: %v rows in %v iterations (%v unmatched), want %d in %d", tb.String(i, "estimator"),
				tb.Float(i, "n"), tb.Float(i, "iters"), tb.Float(i, "unmatched"), len(rows), analysistest.Iterations)
		}
	}
	// drmas advantages have mean 0 per (uid, agent) group with σ_k > 0 — check the Go sidecar
	// values instead: the sum of advantages of iteration 0 matches.
	var goSum float64
	var goN int
	ctxb := context.Background()
	adir := layout.AdvantageDir(analysistest.Run, 0, "drmas")
	am, _, err := commit.Read(ctxb, b, adir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range am.Files {
		data, _ := commit.ReadFile(ctxb, b, adir, f)
		a, err := shards.ReadAdvantages(bytes.NewReader(data), int64(len(data)), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range a {
			goSum += float64(x.Advantage)
			goN++
		}
	}
	tb, err = s.Query(ctx, `SELECT count(*) AS n, sum(CAST(advantage AS DOUBLE)) AS s FROM advantages WHERE estimator = 'drmas' AND iteration = 0`)
	if err != nil {
		t.Fatal(err)
	}
	if int(tb.Float(0, "n")) != goN || math.Abs(tb.Float(0, "s")-goSum) > 1e-6 {
		t.Errorf("drmas iteration 0: DuckDB n=%v sum=%v, Go n=%d sum=%v", tb.Float(0, "n"), tb.Float(0, "s"), goN, goSum)
	}

	// metrics: same rows and grad norms as the Go reader.
	var goMetrics []learn.MetricsRow
	for it := 0; it < analysistest.Iterations; it++ {
		dir := layout.LearnDir(analysistest.Run, it)
		m, _, err := commit.Read(ctxb, b, dir)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := commit.ReadFile(ctxb, b, dir, m.Files[0])
		r, err := shards.ReadTable[learn.MetricsRow](bytes.NewReader(data), int64(len(data)), dir)
		if err != nil {
			t.Fatal(err)
		}
		goMetrics = append(goMetrics, r...)
	}
	var gsum float64
	for _, r := range goMetrics {
		gsum += r.GradNorm
	}
	tb, err = s.Query(ctx, `SELECT count(*) AS n, sum(grad_norm) AS g FROM metrics`)
	if err != nil {
		t.Fatal(err)
	}
	if int(tb.Float(0, "n")) != len(goMetrics) || !near(tb.Float(0, "g"), gsum) {
		t.Errorf("metrics: DuckDB n=%v sum=%v, Go n=%d sum=%v", tb.Float(0, "n"), tb.Float(0, "g"), len(goMetrics), gsum)
	}

	// diagnostics: one row per (iteration, estimator, agent); evals: steps 0..Iterations.
	tb, err = s.Query(ctx, `SELECT (SELECT count(*) FROM diagnostics) AS d, (SELECT count(DISTINCT step) FROM evals) AS e,
		(SELECT count(*) FROM ablations) AS a`)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]bool{}
	for _, r := range rows {
		agents[r.Agent] = true
	}
	if want := analysistest.Iterations * len(analysistest.Estimators) * len(agents); int(tb.Float(0, "d")) != want {
		t.Errorf("diagnostics: %v rows, want %d", tb.Float(0, "d"), want)
	}
	if int(tb.Float(0, "e")) != analysistest.Iterations+1 || tb.Float(0, "a") != 0 {
		t.Errorf("evals: %v steps, want %d; ablations %v rows, want 0", tb.Float(0, "e"), analysistest.Iterations+1, tb.Float(0, "a"))
	}
}

// quantile is DuckDB's quantile_cont: linear interpolation between order statistics.
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := math.Floor(pos)
	hi := math.Ceil(pos)
	return sorted[int(lo)] + (pos-lo)*(sorted[int(hi)]-sorted[int(lo)])
}

func TestReportsRun(t *testing.T) {
	ctx := context.Background()
	store, _ := analysistest.Source(t)
	s := open(t, store, t.TempDir())
	want := map[string]int{
		"rewards":   analysistest.Iterations * 2,
		"inflation": analysistest.Iterations * len(analysistest.Estimators) * 2,
		"gradnorm":  3, // model row "*" + solver + verifier
		"success":   0, // checked below
	}
	for name, n := range want {
		tb, err := s.Report(ctx, name, analysis.ReportParams{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n > 0 && len(tb.Rows) != n {
			t.Errorf("%s: %d rows, want %d", name, len(tb.Rows), n)
		}
		for _, f := range analysis.Formats {
			var buf bytes.Buffer
			if err := tb.Write(&buf, f); err != nil {
				t.Fatalf("%s %s: %v", name, f, err)
			}
			switch f {
			case "json":
				var v []map[string]any
				if err := json.Unmarshal(buf.Bytes(), &v); err != nil || len(v) != len(tb.Rows) {
					t.Errorf("%s json: %v, %d objects\n%s", name, err, len(v), buf.String())
				}
			case "csv":
				recs, err := csv.NewReader(&buf).ReadAll()
				if err != nil || len(recs) != len(tb.Rows)+1 {
					t.Errorf("%s csv: %v, %d records", name, err, len(recs))
				}
			case "table":
				if lines := strings.Count(buf.String(), "\n"); lines != len(tb.Rows)+3 {
					t.Errorf("%s table: %d lines\n%s", name, lines, buf.String())
				}
				if name == "gradnorm" {
					t.Log("\n" + buf.String())
				}
			}
		}
	}
	tb, err := s.Report(ctx, "success", analysis.ReportParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) < analysistest.Iterations+1 || tb.String(len(tb.Rows)-1, "data_source") != "all" {
		t.Errorf("success: %d rows, last %v", len(tb.Rows), tb.Rows[len(tb.Rows)-1])
	}
	// Spikes: with k tiny every update after the first whose grad norm is above k × the median of
	// the previous (up to 5) ones is a spike; count them independently from the metrics view.
	gm, err := s.Query(ctx, `SELECT agent, iteration, grad_norm FROM metrics ORDER BY agent, iteration`)
	if err != nil {
		t.Fatal(err)
	}
	const k = 1e-9
	history := map[string][]float64{}
	wantSpikes := map[string]int{}
	for i := range gm.Rows {
		agent, g := gm.String(i, "agent"), gm.Float(i, "grad_norm")
		if h := history[agent]; len(h) > 0 {
			prev := append([]float64(nil), h[max(0, len(h)-5):]...)
			sort.Float64s(prev)
			med := prev[len(prev)/2]
			if len(prev)%2 == 0 {
				med = (prev[len(prev)/2-1] + prev[len(prev)/2]) / 2
			}
			if g > k*med {
				wantSpikes[agent]++
			}
		}
		history[agent] = append(history[agent], g)
	}
	tb, err = s.Report(ctx, "gradnorm", analysis.ReportParams{SpikeK: k})
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) != len(history) {
		t.Fatalf("gradnorm: %d rows for %d agents", len(tb.Rows), len(history))
	}
	for i := range tb.Rows {
		agent := tb.String(i, "agent")
		if got := int(tb.Float(i, "spikes")); got != wantSpikes[agent] {
			t.Errorf("gradnorm k≈0 %s: %d spikes, want %d (%v)", agent, got, wantSpikes[agent], tb.Rows[i])
		}
	}
	checkEvalDelta(t, s, store)
	if _, err := s.Report(ctx, "nope", analysis.ReportParams{}); err == nil || !strings.Contains(err.Error(), "unknown report") {
		t.Errorf("unknown report: %v", err)
	}
	if _, err := s.Report(ctx, "rewards", analysis.ReportParams{}); err != nil {
		t.Fatal(err)
	}
	// Free SQL: a join of a sidecar with its rollout.
	tb, err = s.Query(ctx, `SELECT agent, count(*) AS n, avg(advantage) AS adv FROM rollouts JOIN advantages USING (iteration, row_id, agent)
		WHERE estimator = 'grpo' GROUP BY agent ORDER BY agent`)
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) != 2 {
		t.Errorf("sql join: %v", tb.Rows)
	}
}

// checkEvalDelta compares the evaldelta report (SQL) with evaluate.PairedDelta (Go) over the
// committed per-prompt results.
func checkEvalDelta(t *testing.T, s *analysis.Session, store string) {
	t.Helper()
	ctx := context.Background()
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	perStep := map[int64][]evaluate.PromptRow{}
	for step := int64(0); step <= analysistest.Iterations; step++ {
		if perStep[step], err = evaluate.ReadPrompts(ctx, b, layout.EvalDir(analysistest.Run, step)); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := s.Report(ctx, "evaldelta", analysis.ReportParams{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i := range tb.Rows {
		if tb.String(i, "split") != "eval" {
			t.Fatalf("evaldelta: split %q in a run with held-out evaluations only", tb.String(i, "split"))
		}
		if tb.String(i, "data_source") != "all" {
			continue
		}
		step := int64(tb.Float(i, "step"))
		want := evaluate.PairedDelta(perStep[0], perStep[step])
		if want.Prompts < 2 || int(tb.Float(i, "prompts")) != want.Prompts || !near(tb.Float(i, "delta"), want.Delta) || math.Abs(tb.Float(i, "delta_se")-want.SE) > 1e-9 {
			t.Errorf("evaldelta step %d: %v, want %+v", step, tb.Rows[i], want)
		}
		if step == 0 && (tb.Float(i, "delta") != 0 || tb.Float(i, "prompts_up") != 0) {
			t.Errorf("evaldelta step 0 is not zero: %v", tb.Rows[i])
		}
		checked++
	}
	if checked != len(perStep) {
		t.Errorf("evaldelta: %d 'all' rows, want %d", checked, len(perStep))
	}
}

func TestEmptyRun(t *testing.T) {
	ctx := context.Background()
	s := emptySession(t)
	for _, v := range analysis.Views {
		tb, err := s.Query(ctx, "SELECT * FROM "+v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if len(tb.Rows) != 0 || len(tb.Columns) < 5 {
			t.Errorf("%s: %d rows, columns %v", v, len(tb.Rows), tb.Columns)
		}
	}
	tb, _ := s.Query(ctx, "SELECT * FROM advantages")
	if tb.Col("estimator") < 0 || tb.Col("iteration") < 0 {
		t.Errorf("advantages columns %v", tb.Columns)
	}
	_, err := s.Report(ctx, "gradnorm", analysis.ReportParams{})
	if err == nil || !strings.Contains(err.Error(), "no committed learn metrics yet") {
		t.Errorf("gradnorm on empty run: %v", err)
	}
	// The typed empty views accept the canned SQL.
	for _, r := range []string{"rewards", "inflation", "gradnorm", "success"} {
		q, _ := analysis.ReportSQL(r, analysis.ReportParams{})
		if _, err := s.Query(ctx, q); err != nil {
			t.Errorf("%s on empty views: %v", r, err)
		}
	}
}

func TestCacheRefetchAndTamper(t *testing.T) {
	ctx := context.Background()
	store, _ := analysistest.Store(t)
	cache := t.TempDir()
	s := open(t, store, cache)
	first := s.Stats
	want, err := s.Report(ctx, "rewards", analysis.ReportParams{})
	if err != nil {
		t.Fatal(err)
	}

	// A second open downloads nothing.
	s2 := open(t, store, cache)
	if s2.Stats.Downloaded != 0 || s2.Stats.Cached != first.Files {
		t.Fatalf("second open: %+v, want all %d cached", s2.Stats, first.Files)
	}

	// Corrupt a cached rollout part (same size): it is fetched again and results are unchanged.
	key := path.Join(layout.RolloutDir(analysistest.Run, 1), shards.PartName(0, 2))
	local := analysis.CachePath(cache, key)
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(analysis.CachePath(cache, path.Join(layout.LearnDir(analysistest.Run, 0), "metrics.parquet"))); err != nil {
		t.Fatal(err)
	}
	s3 := open(t, store, cache)
	if s3.Stats.Downloaded != 2 || s3.Stats.Refetched != 1 {
		t.Fatalf("after corrupting one cached file and deleting another: %+v, want 2 downloaded, 1 refetched", s3.Stats)
	}
	got, err := s3.Report(ctx, "rewards", analysis.ReportParams{})
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	_ = want.WriteCSV(&a)
	_ = got.WriteCSV(&b)
	if a.String() != b.String() {
		t.Errorf("rewards changed after refetch:\n%s\n%s", a.String(), b.String())
	}

	// Tamper with a listed file in the store: refused, with the key named, whatever the cache.
	storeFile := filepath.Join(store, filepath.FromSlash(path.Join(layout.RolloutDir(analysistest.Run, 0), shards.PartName(1, 2))))
	data, err = os.ReadFile(storeFile)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 0x01
	if err := os.WriteFile(storeFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bk, _ := filestore.New(store)
	defer bk.Close()
	_, err = analysis.Open(ctx, analysis.Options{Bucket: bk, Run: analysistest.Run, CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "refusing") || !strings.Contains(err.Error(), "differs from manifest") ||
		!strings.Contains(err.Error(), "iter=000000/rollout/part-00001-of-00002.parquet") {
		t.Fatalf("tampered store file: err = %v", err)
	}
	t.Logf("tampered: %v", err)
}

func TestStoreHash(t *testing.T) {
	wd, _ := os.Getwd()
	if analysis.StoreHash("x") != analysis.StoreHash(filepath.Join(wd, "x")) || analysis.StoreHash("file://"+filepath.Join(wd, "x")) != analysis.StoreHash("x/") {
		t.Error("spellings of one folder hash differently")
	}
	if analysis.StoreHash("s3://a/b") == analysis.StoreHash("s3://a/c") {
		t.Error("different stores share a cache")
	}
}

// TestQueryTypesRender: DECIMAL (a bare literal like 0.5, or a sum of one; with its scale's
// digits, as DuckDB prints it), INTERVAL, UUID, DATE and TIME results come out as their values in
// every format, not as the driver's Go structs, bytes or midnight/year-1 timestamps.
func TestQueryTypesRender(t *testing.T) {
	ctx := context.Background()
	s := emptySession(t)
	tb, err := s.Query(ctx, `SELECT 1.5 AS d, -0.05::DECIMAL(10,4) AS d4, [0.25, 2.5] AS dl,
		INTERVAL '1 year 2 months 3 days 04:05:06.5' AS iv, '00000000-0000-0000-0000-00000000000a'::UUID AS u,
		DATE '2024-01-02' AS day, TIME '04:05:06.25' AS tod`)
	if err != nil {
		t.Fatal(err)
	}
	if f := tb.Float(0, "d"); f != 1.5 {
		t.Errorf("Float of a DECIMAL 1.5: %v", f)
	}
	want := map[string]string{
		"json": `[
  {"d": 1.5, "d4": -0.0500, "dl": [0.25,2.50], "iv": "1 year 2 months 3 days 04:05:06.5", "u": "00000000-0000-0000-0000-00000000000a", "day": "2024-01-02", "tod": "04:05:06.25"}
]
`,
		"csv": "d,d4,dl,iv,u,day,tod\n1.5,-0.0500,\"[0.25, 2.50]\",1 year 2 months 3 days 04:05:06.5,00000000-0000-0000-0000-00000000000a,2024-01-02,04:05:06.25\n",
	}
	for f, w := range want {
		var buf bytes.Buffer
		if err := tb.Write(&buf, f); err != nil {
			t.Fatal(err)
		}
		if buf.String() != w {
			t.Errorf("%s:\n%s\nwant\n%s", f, buf.String(), w)
		}
	}
	var buf bytes.Buffer
	if err := tb.Write(&buf, "table"); err != nil {
		t.Fatal(err)
	}
	// Numbers are right-aligned: the DECIMAL column is as wide as its header "d4" and "-0.0500".
	if lines := strings.Split(buf.String(), "\n"); !strings.HasPrefix(lines[2], "1.5  -0.0500  [0.25, 2.50]  1 year 2 months 3 days 04:05:06.5  00000000-") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// TestReportParamsRejected: a spike threshold that SQL cannot hold (NaN, ±Inf) or that makes no
// sense (negative), or a negative window, is an error naming the parameter, not a DuckDB binder
// error about a column "NaN" nor a silent fallback to the default.
func TestReportParamsRejected(t *testing.T) {
	for _, p := range []analysis.ReportParams{{SpikeK: math.NaN()}, {SpikeK: math.Inf(1)}, {SpikeK: -3}, {Window: -1}} {
		q, err := analysis.ReportSQL("gradnorm", p)
		if err == nil || !(strings.Contains(err.Error(), "spike threshold k") || strings.Contains(err.Error(), "window")) {
			t.Errorf("%+v: %v\n%s", p, err, q)
		}
	}
	if q, err := analysis.ReportSQL("gradnorm", analysis.ReportParams{}); err != nil || !strings.Contains(q, "grad_norm > 2 * rolling_median") || !strings.Contains(q, "5 PRECEDING") {
		t.Errorf("defaults: %v\n%s", err, q)
	}
}

// TestCacheUnderNameValueFolders: a cache root whose path has name=value folders (as data lakes
// lay out theirs) must not turn them into columns that replace the files' own: every view
// answers as from a plain cache.
func TestCacheUnderNameValueFolders(t *testing.T) {
	ctx := context.Background()
	store, _ := analysistest.Source(t)
	plain := open(t, store, t.TempDir())
	odd := open(t, store, filepath.Join(t.TempDir(), "model=x", "iteration=7", "run=r", "estimator=e", "agent=a", "step=9"))
	queries := []string{
		`SELECT run, iteration, agent, model, count(*) FROM rollouts GROUP BY ALL ORDER BY ALL`,
		`SELECT estimator, iteration, agent, count(*), sum(advantage) FROM advantages GROUP BY ALL ORDER BY ALL`,
		`SELECT estimator, iteration, agent, mu_k FROM diagnostics ORDER BY ALL`,
		`SELECT estimator, iteration, model, agent, step, grad_norm FROM metrics ORDER BY ALL`,
		`SELECT step, data_source, avg_at_k FROM evals ORDER BY ALL`,
		`SELECT split, step, task_id, successes FROM eval_prompts ORDER BY ALL`,
	}
	for _, q := range queries {
		var out []string
		for _, s := range []*analysis.Session{plain, odd} {
			tb, err := s.Query(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			var buf bytes.Buffer
			if err := tb.WriteCSV(&buf); err != nil {
				t.Fatal(err)
			}
			out = append(out, buf.String())
		}
		if strings.Count(out[0], "\n") < 2 {
			t.Fatalf("%s: no rows\n%s", q, out[0])
		}
		if out[0] != out[1] {
			t.Errorf("%s:\nplain cache\n%s\ncache under name=value folders\n%s", q, out[0], out[1])
		}
	}
}

// TestNestedTypesRender: STRUCT, MAP, UNION, BLOB and lists of them come out as DuckDB itself
// prints them (its own cast to VARCHAR is the oracle), with fields in the type's order and
// NULL inside nested values; in JSON a STRUCT or MAP is an object in that order and a BLOB is
// its escaped text, not raw bytes that JSON replaces by U+FFFD.
func TestNestedTypesRender(t *testing.T) {
	s := emptySession(t)
	exprs := []string{
		`{'z': 1, 'a': 'x y', 'n': NULL::INTEGER}`,
		`{'a, "b"': 2, 'c d': [1, NULL, 3]}`,
		`MAP {'k2': 2.5::DOUBLE, 'k1': NULL::DOUBLE}`,
		`MAP {3: 'three', 1: 'one'}`,
		`'\xAA\x00ab\x5C\x7F ~'::BLOB`,
		`[{'q': 1, 'r': 'x'}, NULL, {'q': 2, 'r': NULL}]`,
		`['x', NULL]`,
		`union_value(num := 2)`,
		`[1.50::DECIMAL(4,2), -0.001::DECIMAL(5,3), 0::DECIMAL(3,1), 123456789012345678.5::DECIMAL(38,2)]`,
		`-12.5::DECIMAL(18,6)`,
		`{'m': MAP {'k': [true, false]}, 'u': '00000000-0000-0000-0000-00000000000a'::UUID, 'd': DATE '2024-01-02'}`,
	}
	tb := renderedLikeDuckDB(t, s, exprs)
	var buf bytes.Buffer
	if err := tb.Write(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"v0": {"z":1,"a":"x y","n":null}`,
		`"v1": {"a, \"b\"":2,"c d":[1,null,3]}`,
		`"v2": {"k2":2.5,"k1":null}`,
		`"v3": {"3":"three","1":"one"}`,
		`"v4": "\\xAA\\x00ab\\x5C\\x7F ~"`,
		`"v5": [{"q":1,"r":"x"},null,{"q":2,"r":null}]`,
		`"v7": 2`,
		`"v8": [1.50,0.00,0.00,123456789012345678.50]`,
		`"v9": -12.500000`,
		`"v10": {"m":{"k":[true,false]},"u":"00000000-0000-0000-0000-00000000000a","d":"2024-01-02"}`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, buf.String())
		}
	}
}

// TestNestedStringsQuoted: text inside a nested value is quoted where DuckDB quotes it (empty,
// NULL spelt out, edge spaces, one of "'(),:=[]{}), with ' and \ escaped, and struct keys
// always escaped, so that ['a,b', 'c'] is not shown as three elements nor ['NULL'] as a null;
// a UNION member stays unquoted, as DuckDB prints it; a nested BIT is its bits in JSON.
func TestNestedStringsQuoted(t *testing.T) {
	ctx := context.Background()
	s := emptySession(t)
	exprs := []string{
		`['a,b', 'c']`, `['NULL', NULL, 'null']`, `{'a': '', 'b': ' x', 'c': 'y '}`, `{'it''s': 'a''b\c'}`,
		`MAP {'a=b': 'c, d', 'e': NULL}`, `['[x]', '{y}', 'p:q', '(r)', 'say "hi"']`, `[chr(10), 'a' || chr(10) || 'b']`,
		`{'u': union_value(t := 'a,b')}`, `[TIME '01:02:03']`, `[DATE '2024-01-02']`, `['\xAA,'::BLOB]`,
	}
	renderedLikeDuckDB(t, s, exprs)
	bits, err := s.Query(ctx, "SELECT [1::BIT] AS b, MAP {TIMESTAMP '2024-01-02 03:04:05': 1} AS m")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := bits.Write(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	if want := `"b": ["00000000000000000000000000000001"], "m": {"2024-01-02 03:04:05":1}`; !strings.Contains(buf.String(), want) {
		t.Errorf("json of a nested BIT: %s, want %s", buf.String(), want)
	}
}

// emptySession opens an analysis session over an empty store, for queries of literals.
func emptySession(t *testing.T) *analysis.Session {
	t.Helper()
	b, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, err := analysis.Open(context.Background(), analysis.Options{Bucket: b, Run: "nothing", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// renderedLikeDuckDB selects each expression as column vI beside DuckDB's own cast of it to
// VARCHAR as sI (the oracle), checks that drmas renders vI as DuckDB prints it, and returns the
// table for further checks.
func renderedLikeDuckDB(t *testing.T, s *analysis.Session, exprs []string) *analysis.Table {
	t.Helper()
	var sel []string
	for i, e := range exprs {
		sel = append(sel, fmt.Sprintf("%s AS v%d, (%s)::VARCHAR AS s%d", e, i, e, i))
	}
	tb, err := s.Query(context.Background(), "SELECT "+strings.Join(sel, ", "))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range exprs {
		if got, want := tb.String(0, fmt.Sprintf("v%d", i)), tb.String(0, fmt.Sprintf("s%d", i)); got != want {
			t.Errorf("%s: rendered %q, DuckDB prints %q", e, got, want)
		}
	}
	return tb
}

// TestNumbersAndTimesRenderAsDuckDB: floats inside nested values, and dates and times
// anywhere, print as DuckDB's cast to VARCHAR prints them (infinities were printed as the
// year 294247, TIMETZ on 0001-01-01, timestamps in RFC 3339, 1.0 in a list as 1).
func TestNumbersAndTimesRenderAsDuckDB(t *testing.T) {
	s := emptySession(t)
	exprs := []string{
		"[1.0::DOUBLE, 0.1, 1e15, 1e16, 123456789012345678, 1e-4, 1e-5, 0.00012345, 1.5e-7, -0.0, 'nan'::DOUBLE, 'inf'::DOUBLE, '-inf'::DOUBLE, 1e300, 5e-324, 0.30000000000000004, 100.0, -1234.5]",
		"[0.1::FLOAT, 1.0::FLOAT, 1e20::FLOAT, 3.4e38::FLOAT, 1e-7::FLOAT, 16777216::FLOAT, 1e15::FLOAT, 123456789::FLOAT, 1e-45::FLOAT, 'nan'::FLOAT, -0.0::FLOAT]",
		"{'u': union_value(d := 1.0::DOUBLE), 'm': MAP {1.0::DOUBLE: 2.5e20::FLOAT}}",
		"TIMESTAMP '2024-01-02 03:04:05'", "TIMESTAMP '2024-01-02 03:04:05.000001'", "TIMESTAMP '1960-01-01 00:00:00.25'",
		"TIMESTAMP_NS '2024-01-02 03:04:05.123456789'", "TIMESTAMP_MS '2024-01-02 03:04:05.5'", "TIMESTAMP_S '2024-01-02 03:04:05'",
		"TIMESTAMPTZ '2024-01-02 03:04:05.5+05:30'", "TIMESTAMP '10000-01-01 00:00:00'",
		"TIMESTAMP '-0044-03-15 12:00:00'", "TIMESTAMP '0000-03-15 00:00:00'", "DATE '-0044-03-15'", "DATE '0010-01-01'",
		"TIME '23:59:59.999999'", "TIMETZ '03:04:05.123+05:30'", "TIMETZ '03:04:05-08'", "TIMETZ '03:04:05+00'",
		"['infinity'::TIMESTAMP, '-infinity'::TIMESTAMP, NULL]", "'infinity'::TIMESTAMP_NS", "'-infinity'::TIMESTAMP_NS",
		"'infinity'::TIMESTAMP_MS", "'-infinity'::TIMESTAMP_S", "'infinity'::TIMESTAMPTZ", "['infinity'::DATE, '-infinity'::DATE]",
		"{'t': TIMESTAMP '2024-01-02 03:04:05', 'd': DATE '2024-01-02', 'z': TIMETZ '01:02:03-01:30'}",
	}
	tb := renderedLikeDuckDB(t, s, exprs)
	var buf bytes.Buffer
	if err := tb.Write(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"v3": "2024-01-02 03:04:05"`, `"v11": "0045-03-15 (BC) 12:00:00"`, `"v19": ["infinity","-infinity",null]`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("json: no %s in\n%s", want, buf.String())
		}
	}
}

// TestReportsDeterministic: the canned reports give the same bits every time. DuckDB adds a
// parallel aggregate's partial sums in whatever order its threads finish (avg of 300k rows came
// out different in the last digits run to run); the reports order their float aggregates.
func TestReportsDeterministic(t *testing.T) {
	ctx := context.Background()
	s := emptySession(t)
	for _, q := range []string{
		"SET threads TO 8",
		// Views of the same names in the temp schema, which DuckDB searches first: 300k rows
		// of one agent and iteration, deterministic pseudo-random values.
		`CREATE TEMP VIEW rollouts AS SELECT 0 AS iteration, 'a' AS agent, i AS row_id,
  sin(i) * 1000 + i * 1e-7 AS score, cos(i) * 10 AS episode_reward, true AS valid FROM range(300000) t(i)`,
		`CREATE TEMP VIEW eval_prompts AS SELECT 'eval' AS split, s.step, 'math' AS data_source, 't' || i AS task_id,
  16 AS k, CAST((hash(i, s.step) % 17) AS INTEGER) AS successes FROM range(300000) t(i), (VALUES (0), (1)) s(step)`,
	} {
		if _, err := s.Query(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"rewards", "evaldelta"} {
		var first string
		for i := range 5 {
			q, err := analysis.ReportSQL(name, analysis.ReportParams{})
			if err != nil {
				t.Fatal(err)
			}
			tb, err := s.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := tb.Write(&buf, "csv"); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = buf.String()
			} else if buf.String() != first {
				t.Fatalf("%s: run %d differs:\n%s\nvs\n%s", name, i, buf.String(), first)
			}
		}
	}
}

// TestGradNormSkipsIterationsWithoutRows: an agent with no rows in an iteration (it never acted:
// a searcher the router never called) has a metrics row with grad norm 0. That is no update:
// counted as one, its 0 pulled the rolling median down and made the next update a spike.
func TestGradNormSkipsIterationsWithoutRows(t *testing.T) {
	ctx := context.Background()
	env, store := analysistest.Env(t)
	dir := layout.LearnDir(analysistest.Run, 1)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := commit.ReadFile(ctx, env.Bucket, dir, m.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	rows, err := shards.ReadTable[learn.MetricsRow](bytes.NewReader(data), int64(len(data)), m.Files[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	idle := ""
	for i := range rows {
		if rows[i].Agent != "*" && idle == "" {
			idle = rows[i].Agent
			rows[i].Rows, rows[i].Tokens, rows[i].GradNorm, rows[i].GradNormMax, rows[i].Loss = 0, 0, 0, 0, 0
		}
	}
	if idle == "" {
		t.Fatal("no agent rows in the metrics")
	}
	if data, err = shards.EncodeTable(rows); err != nil {
		t.Fatal(err)
	}
	if err := env.Bucket.Delete(ctx, path.Join(dir, commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	if m.Files[0], err = commit.PutFile(ctx, env.Bucket, dir, m.Files[0].Name, data, m.Files[0].Rows); err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Commit(ctx, env.Bucket, dir, m); err != nil {
		t.Fatal(err)
	}
	s := open(t, store, t.TempDir())
	tb, err := s.Report(ctx, "gradnorm", analysis.ReportParams{SpikeK: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for i := range tb.Rows {
		want := analysistest.Iterations
		if tb.String(i, "agent") == idle {
			want, seen = analysistest.Iterations-1, true
		}
		if got := int(tb.Float(i, "updates")); got != want {
			t.Errorf("gradnorm %s: %d updates, want %d", tb.String(i, "agent"), got, want)
		}
		if tb.String(i, "agent") == idle && strings.Contains(tb.String(i, "spike_iterations"), "1") {
			t.Errorf("gradnorm %s: iteration 1, where it had no rows, is a spike: %v", idle, tb.Rows[i])
		}
	}
	if !seen {
		t.Fatalf("gradnorm has no row for %s", idle)
	}
}
