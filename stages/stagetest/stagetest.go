// Package stagetest builds small, fast configurations and local-folder environments for stage
// and pipeline tests, and runs a drmas serve for tests of the openai backend.
package stagetest

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/warmup"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// TinyConfigYAML is a config file for tests that run the drmas binary: run "t", math, a
// one-layer 16-dim policy; every stage takes well under a second.
const TinyConfigYAML = `run: t
seed: 5
iterations: 2
models:
  m1: {dim: 16, layers: 1, heads: 2, context: 96, ff_mult: 2, tied_head: true}
agents:
  solver: {model: m1}
  verifier: {model: m1}
tasks: {per_iteration: 4, eval_size: 4}
rollout: {group_size: 4, parts: 2, max_tokens: 12}
warmup: {steps: 20, batch: 8, demos: 40}
evaluate: {every: 1, k: 2}
learn: {micro_batch: 8, keep_checkpoints: 2}
`

// Config returns a tiny configuration of the named workflow ("math" or "search") that runs a
// stage in about a second.
func Config(t testing.TB, workflow string) *configs.Config {
	t.Helper()
	c := configs.Default()
	c.Run = "t"
	c.Seed = 7
	c.Workflow.Name = workflow
	c.Models = map[string]configs.Model{"m1": {Dim: 16, Layers: 1, Heads: 2, Context: 96, FFMult: 2, TiedHead: true}}
	switch workflow {
	case "math":
		c.Agents = map[string]configs.Agent{"solver": {Model: "m1"}, "verifier": {Model: "m1"}}
	case "search":
		c.Models["m1"] = configs.Model{Dim: 16, Layers: 1, Heads: 2, Context: 224, FFMult: 2, TiedHead: true}
		c.Agents = map[string]configs.Agent{"router": {Model: "m1"}, "searcher": {Model: "m1"}, "answerer": {Model: "m1"}}
		c.Rollout.MaxTokens = 16
	default:
		t.Fatalf("stagetest: unknown workflow %q", workflow)
	}
	c.Tasks.PerIteration = 4
	c.Tasks.EvalSize = 4
	c.Rollout.GroupSize = 4
	c.Rollout.Parts = 2
	c.Warmup.Steps = 20
	c.Warmup.Batch = 8
	c.Warmup.Demos = 40
	c.Evaluate.K = 2
	c.Learn.MicroBatch = 8
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Env returns an environment on a fresh local-folder store in a temporary directory.
func Env(t testing.TB, cfg *configs.Config) *stages.Env {
	t.Helper()
	return EnvAt(t, cfg, t.TempDir())
}

// EnvAt returns an environment on a local-folder store rooted at dir.
func EnvAt(t testing.TB, cfg *configs.Config, dir string) *stages.Env {
	t.Helper()
	b, err := filestore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c := *cfg
	c.Store = dir
	return &stages.Env{Bucket: b, Config: &c}
}

// WriteRollout commits parts (already numbered with shards.RowID) as iteration iter's rollout,
// sampled from step 0, bypassing the writer's checks when raw is true (to plant malformed rows).
func WriteRollout(t testing.TB, env *stages.Env, iter int, parts [][]shards.Row, raw bool) {
	t.Helper()
	WriteRolloutWith(t, env, iter, parts, raw, map[string]string{"policy_version": "0"})
}

// WriteRolloutWith is WriteRollout with the manifest's params given: "policy_version" (the step
// the rows were sampled from), and "imported": "true" for what the importer commits.
func WriteRolloutWith(t testing.TB, env *stages.Env, iter int, parts [][]shards.Row, raw bool, params map[string]string) {
	t.Helper()
	ctx := context.Background()
	dir := layout.RolloutDir(env.Config.Run, iter)
	var files []commit.File
	var rows int64
	for p, part := range parts {
		var data []byte
		var err error
		if raw {
			data, err = shards.EncodeTable(part)
		} else {
			var buf bytes.Buffer
			err = shards.WriteTrajectories(&buf, p, part)
			data = buf.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := commit.PutFile(ctx, env.Bucket, dir, shards.PartName(p, len(parts)), data, int64(len(part)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		rows += int64(len(part))
	}
	if _, err := commit.Commit(ctx, env.Bucket, dir, &commit.Manifest{
		Kind: "rollout", SchemaVersion: shards.SchemaVersion, Run: env.Config.Run, Iteration: &iter, Rows: rows, Files: files,
		Params: params,
	}); err != nil {
		t.Fatal(err)
	}
}

// DeleteFolder deletes every object under dir (a committed folder of env's store), as a user
// who removes a folder to redo it does.
func DeleteFolder(t testing.TB, env *stages.Env, dir string) {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if err := env.Bucket.Iter(ctx, dir+"/", func(key string) error { keys = append(keys, key); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if err := env.Bucket.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}

// ReadRollout returns the committed rollout of iteration iter (of env's run), part by part,
// with its manifest.
func ReadRollout(t testing.TB, env *stages.Env, iter int) (*commit.Manifest, [][]shards.Row) {
	t.Helper()
	ctx := context.Background()
	dir := layout.RolloutDir(env.Config.Run, iter)
	m, _, err := commit.Read(ctx, env.Bucket, dir)
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]shards.Row
	for _, f := range m.Files {
		data, err := commit.ReadFile(ctx, env.Bucket, dir, f)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, rows)
	}
	return m, parts
}

// VaryScores replaces the scores of parts by a fixed pattern of 0, ½ and 1 that k varies: for
// tests that need a gradient, since a barely warmed-up test policy scores every sample alike
// (all advantages 0).
func VaryScores(parts [][]shards.Row, k int64) {
	for _, rows := range parts {
		for i := range rows {
			rows[i].Score = float64((rows[i].RowID*(7+k)+int64(rows[i].Sample))%3) / 2
		}
	}
}

// Serve runs a drmas serve with o on a free 127.0.0.1 port until the test ends (then checks
// that it shut down cleanly) and returns it with its base URL, http://127.0.0.1:PORT.
func Serve(t testing.TB, o serve.Options) (*serve.Server, string) {
	t.Helper()
	s, url, stop := ServeUntil(t, o)
	t.Cleanup(stop)
	return s, url
}

// ServeUntil is Serve with the shutdown in the caller's hands: stop cancels the server, waits
// for it to return and checks that it shut down cleanly.
func ServeUntil(t testing.TB, o serve.Options) (*serve.Server, string, func()) {
	t.Helper()
	s, err := serve.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	return s, "http://" + ln.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}

// ExternalConfig returns a tiny math config of run "ext" whose only model is external: an
// openai backend without sizes, served by a drmas serve (until the test ends) of another run's
// warm-up, so drmas holds no checkpoint of it.
func ExternalConfig(t testing.TB) *configs.Config {
	t.Helper()
	src := Env(t, Config(t, "math"))
	if _, err := warmup.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	_, url := Serve(t, serve.Options{Bucket: src.Bucket, Run: "t", Poll: -1})
	cfg := Config(t, "math")
	cfg.Run = "ext"
	cfg.Models = map[string]configs.Model{"m1": {Backend: configs.BackendOpenAI, OpenAI: configs.OpenAI{Endpoint: url + "/v1", Model: "m1"}}}
	if err := cfg.Validate(); err != nil || !cfg.Models["m1"].External() {
		t.Fatalf("external config: %v", err)
	}
	return cfg
}
