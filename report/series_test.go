package report

import (
	"context"
	"fmt"
	"testing"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/shards"
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
	for it := range 3 {
		var rows []learn.MetricsRow
		for mi, m := range []string{"big", "small"} {
			for _, a := range []string{"*", []string{"solver", "verifier"}[mi]} {
				rows = append(rows, learn.MetricsRow{Iteration: int32(it), Estimator: "drmas", Model: m, Agent: a, Step: int64(it + 1), GradNorm: float64(10*mi + it)})
			}
		}
		data, err := shards.EncodeTable(rows)
		if err != nil {
			t.Fatal(err)
		}
		dir := commit.LearnDir(run, it)
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
