package pipeline_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/client"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
)

// scaleoutConfig has 4 rollout parts so that 3 workers split them unevenly.
const scaleoutConfig = `run: t
seed: 9
models:
  m1: {dim: 16, layers: 1, heads: 2, context: 96, ff_mult: 2, tied_head: true}
agents:
  solver: {model: m1}
  verifier: {model: m1}
tasks: {per_iteration: 8, eval_size: 4}
rollout: {group_size: 4, parts: 4, max_tokens: 12}
normalize: {estimators: [drmas, grpo]}
warmup: {steps: 20, batch: 8, demos: 40}
learn: {micro_batch: 8}
`

// snapshot returns key → sha256 of every object under prefix.
func snapshot(t *testing.T, b storage.Bucket, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	err := b.Iter(ctx, prefix, func(k string) error {
		data, err := storage.ReadAll(ctx, b, k)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(k, prefix)] = commit.Digest(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, ", ")
}

// TestScaleOutWorkersOnMinIO runs rollout and normalize as P worker processes with distinct
// shard indices (plus a duplicate of one index, as Kubernetes may start) against a real MinIO,
// and checks that the committed iteration equals a single-process run byte for byte, and that
// finalizing again changes nothing.
func TestScaleOutWorkersOnMinIO(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts MinIO")
	}
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	bin := buildDrmas(t)
	cfgPath := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := os.WriteFile(cfgPath, []byte(scaleoutConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey,
		"DRMAS_S3_ENDPOINT="+srv.Endpoint, "DRMAS_S3_INSECURE=true", "DRMAS_S3_MAX_RETRIES=2")
	drmas := func(store string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"-q", "--config", cfgPath, "--store", store}, args...)...)
		cmd.Env = env
		return cmd
	}
	run := func(store string, args ...string) {
		t.Helper()
		if out, err := drmas(store, args...).CombinedOutput(); err != nil {
			t.Fatalf("drmas %v: %v\n%s", args, err, out)
		}
	}
	single, sharded := "s3://"+bucket+"/single", "s3://"+bucket+"/sharded"
	for _, store := range []string{single, sharded} {
		run(store, "run-stage", "warmup")
	}
	singleOut, err := drmas(single, "run-stage", "rollout", "--iter", "0", "--step", "0").CombinedOutput()
	if err != nil {
		t.Fatalf("single rollout: %v\n%s", err, singleOut)
	}
	// "…, committed; 48 episodes, 144 rows, 1234 tokens in 0.5s (…)": the iteration's totals.
	totals := regexp.MustCompile(`committed; (\d+ episodes, \d+ rows, \d+ tokens)`).FindSubmatch(singleOut)
	if totals == nil {
		t.Fatalf("single rollout log has no totals:\n%s", singleOut)
	}
	run(single, "run-stage", "normalize", "--iter", "0")

	for _, stage := range []string{"rollout", "normalize"} {
		args := []string{"run-stage", stage, "--iter", "0"}
		if stage == "rollout" {
			args = append(args, "--step", "0")
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		outs := make([][]byte, 4)
		for w, shard := range []string{"0/3", "1/3", "2/3", "1/3"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := append(append([]string(nil), args...), "--shard", shard)
				outs[w], errs[w] = drmas(sharded, a...).CombinedOutput()
			}()
		}
		wg.Wait()
		reported := 0
		for w, err := range errs {
			if err != nil {
				t.Fatalf("%s worker %d: %v\n%s", stage, w, err, outs[w])
			}
			// The worker that commits the rollout reports the folder's totals, the same as a
			// single process's, and then its own share.
			if bytes.Contains(outs[w], []byte(", committed; "+string(totals[1])+"; this shard ")) {
				reported++
			}
		}
		if stage == "rollout" && reported == 0 {
			t.Errorf("no rollout worker reports the iteration's totals %q:\n%s", totals[1], bytes.Join(outs, []byte("\n")))
		}
	}
	ctx := context.Background()
	b, err := client.Open(ctx, "s3://"+bucket, s3store.Config{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := snapshot(t, b, "single/runs/t/iter=000000/")
	got := snapshot(t, b, "sharded/runs/t/iter=000000/")
	if len(want) < 10 {
		t.Fatalf("single-process run wrote only %v", want)
	}
	if d := diff(want, got); d != "" {
		t.Fatalf("sharded workers differ from the single process in: %s", d)
	}
	// Finalize is idempotent: a late worker of any index finds everything committed.
	run(sharded, "run-stage", "rollout", "--iter", "0", "--step", "0", "--shard", "2/3")
	run(sharded, "run-stage", "normalize", "--iter", "0", "--shard", "2/3")
	if d := diff(want, snapshot(t, b, "sharded/runs/t/iter=000000/")); d != "" {
		t.Fatalf("a late worker changed: %s", d)
	}
	t.Logf("%d objects identical across 1 process and 3 workers + 1 duplicate", len(want))
}
