package analysis_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// openSandboxed opens the fixture run with sb (nil: no sandbox).
func openSandboxed(t *testing.T, sb *analysis.Sandbox) *analysis.Session {
	t.Helper()
	store, _ := analysistest.Store(t)
	b, err := filestore.New(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	s, err := analysis.Open(context.Background(), analysis.Options{Bucket: b, Run: analysistest.Run, CacheDir: t.TempDir(), Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSandboxRefusesWhatTheDefaultAllows, with real DuckDB: COPY … TO a file, read_csv of a
// file outside the run, ATTACH, INSTALL and LOAD, and changing the settings work in a plain
// session (the user's own DuckDB) and are refused in a sandboxed one, which still reads the
// run's views.
func TestSandboxRefusesWhatTheDefaultAllows(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "secret.csv")
	if err := os.WriteFile(outside, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plain, boxed := openSandboxed(t, nil), openSandboxed(t, &analysis.Sandbox{})
	for _, s := range []*analysis.Session{plain, boxed} {
		tab, err := s.Query(ctx, "SELECT count(*) AS n FROM rollouts")
		if err != nil || len(tab.Rows) != 1 || tab.Rows[0][0].(int64) == 0 {
			t.Fatalf("the views: %v %v", tab, err)
		}
	}
	for i, q := range []string{
		"COPY (SELECT agent FROM rollouts) TO '" + filepath.Join(dir, "out%d.csv") + "'",
		"SELECT * FROM read_csv('" + outside + "')",
		"SELECT count(*) FROM read_text('/etc/passwd')",
		"ATTACH '" + filepath.Join(dir, "x%d.db") + "' AS x%d",
		"ATTACH ':memory:' AS m%d",
		"LOAD json",
		"SET threads = 1",
		"COPY (SELECT 1) TO '" + filepath.Join(dir, "multi%d.csv") + "'; SELECT 1", // the driver runs all but the last statement
	} {
		sub := func(n int) string { return strings.ReplaceAll(q, "%d", string(rune('a'+n))) }
		if _, err := plain.Query(ctx, sub(i)); err != nil {
			t.Errorf("plain session refused %q: %v", q, err)
		}
		_, err := boxed.Query(ctx, sub(i+20))
		if err == nil {
			t.Errorf("sandbox ran %q", q)
			continue
		}
		var se *analysis.SandboxError
		if !errors.As(err, &se) && !strings.Contains(err.Error(), "disabled by configuration") && !strings.Contains(err.Error(), "Permission Error") {
			t.Errorf("sandbox refused %q for another reason: %v", q, err)
		}
	}
	for _, f := range []string{"out" + string(rune('a'+20)) + ".csv", "multi" + string(rune('a'+7+20)) + ".csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("the sandbox wrote %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "outa.csv")); err != nil {
		t.Errorf("the plain session did not write its COPY: %v", err)
	}
}

// TestSandboxBounds: the row cap, DuckDB's memory limit and a deadline stop a sandboxed query
// with a message, not the process.
func TestSandboxBounds(t *testing.T) {
	s := openSandboxed(t, &analysis.Sandbox{MaxRows: 10, MemoryLimit: 64 << 20})
	ctx := context.Background()
	if _, err := s.Query(ctx, "SELECT * FROM range(11)"); err == nil || !strings.Contains(err.Error(), "more than 10 rows") {
		t.Errorf("rows: %v", err)
	}
	if tab, err := s.Query(ctx, "SELECT * FROM range(10)"); err != nil || len(tab.Rows) != 10 {
		t.Errorf("10 rows: %v", err)
	}
	if _, err := s.Query(ctx, "SELECT count(DISTINCT range::VARCHAR || 'padding to fill memory') FROM range(20000000)"); err == nil || !strings.Contains(strings.ToLower(err.Error()), "memory") {
		t.Errorf("memory: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := s.Query(dctx, "SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3")
	if err == nil || time.Since(t0) > 20*time.Second {
		t.Errorf("deadline: %v after %s", err, time.Since(t0))
	}
}
