package analysis_test

import (
	"bytes"
	"context"
	"path"
	"testing"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
	"github.com/drmas-dev/drmas/storage"
)

// TestEvalsWithoutF1Column: the evaluation views have f1_mean even when no file has the column
// (a run evaluated before it existed): NULL for those rows, the stored value for newer files
// beside them; the success and evaldelta reports run over both.
func TestEvalsWithoutF1Column(t *testing.T) {
	ctx := context.Background()
	env, store := analysistest.Env(t)
	last := int64(analysistest.Iterations)
	for step := int64(0); step <= last; step++ {
		dir := layout.EvalDir(analysistest.Run, step)
		recommit(t, env.Bucket, dir, func(name string, data []byte) []byte {
			switch name {
			case shards.EvalResultsFile:
				return encode(t, shardtest.ResultsBeforeF1(readRows[shards.ResultRow](t, data)))
			case shards.EvalPromptsFile:
				return encode(t, shardtest.PromptsBeforeF1(readRows[shards.PromptRow](t, data)))
			}
			t.Fatalf("%s: unexpected file %s", dir, name)
			return nil
		})
	}
	check := func(s *analysis.Session, wantLast *float64) {
		t.Helper()
		tb, err := s.Report(ctx, "success", analysis.ReportParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(tb.Rows) < int(last)+1 {
			t.Fatalf("success: %d rows", len(tb.Rows))
		}
		for i, row := range tb.Rows {
			f1 := row[len(row)-1]
			if tb.Columns[len(row)-1] != "f1_mean" {
				t.Fatalf("success columns %v, want f1_mean last", tb.Columns)
			}
			want := any(nil)
			if int64(tb.Float(i, "step")) == last && wantLast != nil {
				want = *wantLast
			}
			if f1 != want {
				t.Errorf("success row %v: f1_mean %v, want %v", row, f1, want)
			}
		}
		var n int
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM eval_prompts WHERE f1_mean IS NULL`).Scan(&n); err != nil || n == 0 {
			t.Errorf("eval_prompts without f1_mean: %d NULL rows, %v", n, err)
		}
		if _, err := s.Report(ctx, "evaldelta", analysis.ReportParams{}); err != nil {
			t.Errorf("evaldelta: %v", err)
		}
	}
	check(open(t, store, t.TempDir()), nil)

	// The last step evaluated again by a version that writes the column (a search workflow's F1).
	f1 := 0.375
	recommit(t, env.Bucket, layout.EvalDir(analysistest.Run, last), func(name string, data []byte) []byte {
		if name != shards.EvalResultsFile {
			return data
		}
		rows := readRows[shards.ResultRow](t, data)
		for i := range rows {
			rows[i].F1Mean = &f1
		}
		return encode(t, rows)
	})
	check(open(t, store, t.TempDir()), &f1)
}

// recommit replaces the files of the committed folder dir by what edit makes of them.
func recommit(t *testing.T, b storage.Bucket, dir string, edit func(name string, data []byte) []byte) {
	t.Helper()
	ctx := context.Background()
	m, _, err := commit.Read(ctx, b, dir)
	if err != nil {
		t.Fatal(err)
	}
	datas := make([][]byte, len(m.Files))
	for i, f := range m.Files {
		data, err := commit.ReadFile(ctx, b, dir, f)
		if err != nil {
			t.Fatal(err)
		}
		datas[i] = edit(f.Name, data)
	}
	if err := b.Delete(ctx, path.Join(dir, commit.ManifestName)); err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Files {
		if m.Files[i], err = commit.PutFile(ctx, b, dir, f.Name, datas[i], f.Rows); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := commit.Commit(ctx, b, dir, m); err != nil {
		t.Fatal(err)
	}
}

func readRows[T any](t *testing.T, data []byte) []T {
	t.Helper()
	rows, err := shards.ReadTable[T](bytes.NewReader(data), int64(len(data)), "table")
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func encode[T any](t *testing.T, rows []T) []byte {
	t.Helper()
	data, err := shards.EncodeTable(rows)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
