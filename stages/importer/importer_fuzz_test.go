package importer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/stages/importer"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// FuzzImportJSONL: `drmas import` of any JSONL file errors or succeeds, never panics, keeps
// memory proportional to the file, and on success leaves a committed rollout that verifies;
// on error it leaves the store untouched.
func FuzzImportJSONL(f *testing.F) {
	f.Add([]byte(`{"uid":"u1","traj_uid":"t2","agent":"a","step":0,"score":0}
{"uid":"u1","traj_uid":"t1","agent":"b","step":0,"score":1,"response_ids":[5,6],"response_logprobs":[-0.5,-0.25],"prompt_ids":[1,2,3]}
{"uid":"u1","traj_uid":"t1","agent":"a","step":0,"score":1,"policy_version":3}
{"uid":"u2","traj_uid":"t4","agent":"a","step":0,"score":0.3,"data_source":"gsm","task_id":7,"valid":false,"finish_reason":"length"}
`))
	f.Add([]byte(`{"uid":"u1","traj_uid":"t1","agent":"a","step":0,"score":1e400}` + "\n"))
	f.Add([]byte(`{"uid":"u1","traj_uid":"t1","agent":"a","step":-1,"score":"x","response_ids":[1],"response_logprobs":[]}` + "\n"))
	f.Add([]byte(`{"uid":"u1","traj_uid":"t1","agent":"a","step":0,"score":0}` + "\n" + `{"uid":"u1","traj_uid":"t1","agent":"a","step":0,"score":0}` + "\n"))
	f.Add([]byte("{\n\n[1,2]\nnull\n\"x\"\n"))
	f.Add([]byte(`{"uid":"u1","traj_uid":"t1","agent":"a","step":99999999999,"score":0,"response_ids":[4294967296]}` + "\n"))
	f.Add([]byte{})
	cfg := stagetest.Config(f, "math")
	f.Fuzz(func(t *testing.T, data []byte) {
		env := stagetest.Env(t, cfg)
		path := filepath.Join(t.TempDir(), "in.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		res, err := importer.Run(ctx, env, importer.Options{Path: path, Iteration: 0})
		runtime.ReadMemStats(&ms)
		if got := ms.TotalAlloc - before; got > 64<<20+1000*uint64(len(data)) {
			t.Fatalf("import allocated %d MiB for %d bytes", got>>20, len(data))
		}
		dir := layout.RolloutDir(cfg.Run, 0)
		m, _, rerr := commit.Read(ctx, env.Bucket, dir)
		if err != nil {
			if !errors.Is(rerr, commit.ErrNotCommitted) {
				t.Fatalf("a failed import (%v) left a committed rollout: %v", err, rerr)
			}
			n := 0
			_ = env.Bucket.Iter(ctx, "", func(string) error { n++; return nil })
			if n != 0 {
				t.Fatalf("a failed import (%v) wrote %d objects", err, n)
			}
			return
		}
		if rerr != nil {
			t.Fatalf("import succeeded but the rollout is not committed: %v", rerr)
		}
		if err := commit.Verify(ctx, env.Bucket, dir, m, true); err != nil {
			t.Fatal(err)
		}
		if m.Rows != res.Rows {
			t.Fatalf("manifest rows %d, result %d", m.Rows, res.Rows)
		}
	})
}
