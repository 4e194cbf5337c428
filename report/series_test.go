package report

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages/evaluate"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// TestWholeModelRowsOfEachModelStayApart: with two models, the grad-norm figure has a
// whole-model line per model, each one point per iteration, instead of one line that zigzags
// between the models at every iteration.
func TestWholeModelRowsOfEachModelStayApart(t *testing.T) {
	ctx := context.Background()
	b, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const run = "het"
	for it := range 4 {
		var rows []learn.MetricsRow
		for mi, m := range []string{"big", "small"} {
			for _, a := range []string{"*", []string{"solver", "verifier"}[mi]} {
				// In iteration 3 no agent had rows (grad norm 0): no update, not plotted.
				n := int64(5)
				if it == 3 {
					n = 0
				}
				rows = append(rows, learn.MetricsRow{Iteration: int32(it), Estimator: "drmas", Model: m, Agent: a, Step: int64(it + 1), Rows: n, GradNorm: float64(10*mi+it) * float64(min(n, 1))})
			}
		}
		data, err := shards.EncodeTable(rows)
		if err != nil {
			t.Fatal(err)
		}
		dir := layout.LearnDir(run, it)
		f, err := commit.PutFile(ctx, b, dir, "metrics.parquet", data, int64(len(rows)))
		if err != nil {
			t.Fatal(err)
		}
		step := int64(it + 1)
		if _, err := commit.Commit(ctx, b, dir, &commit.Manifest{Kind: "learn", SchemaVersion: 1, Run: run, Iteration: &it, Step: &step, Rows: int64(len(rows)), Files: []commit.File{f}}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := analysis.Open(ctx, analysis.Options{Bucket: b, Run: run, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	series, err := gradNormSeries(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sr := range series {
		got[sr.Name] = fmt.Sprint(sr.X, sr.Y)
	}
	want := map[string]string{
		"whole model big":   "[0 1 2] [0 1 2]",
		"whole model small": "[0 1 2] [10 11 12]",
		"solver":            "[0 1 2] [0 1 2]",
		"verifier":          "[0 1 2] [10 11 12]",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("series %q: %q, want %q (all: %v)", name, got[name], w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v", got)
	}
}

// TestFlatPlotsOfLargeValues: a single point or a constant series of large values (a grad
// norm of 1e16 before clipping, one iteration into a diverging run) is drawn: widening its
// flat range by ±0.5 was lost to rounding and gonum panicked ("illegal range").
func TestFlatPlotsOfLargeValues(t *testing.T) {
	for _, v := range []float64{1e16, -3e17, 1e300, 0, 2.5} {
		for _, s := range [][]float64{{v}, {v, v, v}} {
			x := make([]float64, len(s))
			for i := range x {
				x[i] = float64(i)
			}
			for name, plot := range map[string]func() ([]byte, error){
				"line": func() ([]byte, error) {
					return linePlot("flat", "iteration", "grad norm", []Series{{Name: "a", X: x, Y: s}})
				},
				"histogram": func() ([]byte, error) { return histPlot("flat", "score", s) },
			} {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("%s of %v: panic %v", name, s, r)
						}
					}()
					data, err := plot()
					if err != nil {
						t.Errorf("%s of %v: %v", name, s, err)
					} else if _, err := png.Decode(bytes.NewReader(data)); err != nil {
						t.Errorf("%s of %v: not a PNG: %v", name, s, err)
					}
				}()
			}
		}
	}
}

// TestEvalsWithoutRows: a committed evaluation whose results file has no rows leaves the
// success plot out with a note; the report used to index its first row and panic.
func TestEvalsWithoutRows(t *testing.T) {
	ctx := context.Background()
	b, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const run = "noevals"
	data, err := shards.EncodeTable([]evaluate.ResultRow{})
	if err != nil {
		t.Fatal(err)
	}
	dir := layout.EvalDir(run, 3)
	f, err := commit.PutFile(ctx, b, dir, evaluate.ResultsFile, data, 0)
	if err != nil {
		t.Fatal(err)
	}
	step := int64(3)
	if _, err := commit.Commit(ctx, b, dir, &commit.Manifest{Kind: "eval", SchemaVersion: 1, Run: run, Step: &step, Files: []commit.File{f}}); err != nil {
		t.Fatal(err)
	}
	s, err := analysis.Open(ctx, analysis.Options{Bucket: b, Run: run, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Empty("evals") {
		t.Fatal("the committed evaluation is not in the evals view")
	}
	var r *Report
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Build panicked: %v", p)
			}
		}()
		r, err = Build(ctx, s, Options{})
	}()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Figures {
		if f.Name == "success" {
			t.Error("a success plot of no evaluations")
		}
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "no avg@k/pass@k plot") }) {
		t.Errorf("notes %q do not say why there is no success plot", r.Notes)
	}
}

// TestLeastSquares, worked by hand: points (0,1), (1,2), (2,6): means x 1, y 3; Σ(x−1)(y−3) =
// (−1)(−2) + 0 + (1)(3) = 5, Σ(x−1)² = 2; slope 5/2, intercept 3 − 5/2 = 1/2. Constant x: slope 0.
func TestLeastSquares(t *testing.T) {
	if a, b := leastSquares([]float64{0, 1, 2}, []float64{1, 2, 6}); a != 0.5 || b != 2.5 {
		t.Fatalf("leastSquares = %v + %v·x, want 0.5 + 2.5·x", a, b)
	}
	if a, b := leastSquares([]float64{3, 3}, []float64{1, 2}); a != 1.5 || b != 0 {
		t.Fatalf("constant x: %v + %v·x, want 1.5 + 0·x", a, b)
	}
}
