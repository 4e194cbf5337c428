package importer_test

import (
	"bytes"
	"context"
	"path"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages/importer"
	"github.com/drmas-dev/drmas/stages/normalize"
)

// A rollout manifest whose row counts do not match its parts (edited by hand, damaged) is
// refused by normalize, naming the part, rather than normalized and committed.
func TestNormalizeRefusesAManifestWithWrongRows(t *testing.T) {
	ctx := context.Background()
	env := newEnv(t)
	if _, err := importer.Run(ctx, env, importer.Options{Path: writeFile(t, "s.jsonl", smallJSONL), Iteration: 0, Parts: 1}); err != nil {
		t.Fatal(err)
	}
	dir := layout.RolloutDir(run, 0)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Files[0].Rows += 1 << 40
	m.Rows += 1 << 40
	data, err := commit.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Bucket.Put(ctx, path.Join(dir, commit.ManifestName), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	_, err = normalize.Run(ctx, env, normalize.Options{Iteration: 0, Estimators: []string{"drmas"}})
	if err == nil || !strings.Contains(err.Error(), "part-00000-of-00001.parquet has 8 rows, its manifest says 1099511627784") {
		t.Fatalf("got %v", err)
	}
	if ok, err := commit.IsCommitted(ctx, env.Bucket, layout.AdvantageDir(run, 0, "drmas")); ok || err != nil {
		t.Fatalf("advantages committed: %v %v", ok, err)
	}
}
