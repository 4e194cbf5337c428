package pipeline_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/pipeline"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

// syncBuffer is a log both the server and the loop write to. onLine, if set, is called
// (outside the lock) with each line written.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	onLine func(string)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	on := s.onLine
	s.mu.Unlock()
	if on != nil {
		on(string(p))
	}
	return n, err
}

// setOnLine sets onLine (the server may be writing already).
func (s *syncBuffer) setOnLine(f func(string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onLine = f
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLoopThroughDrmasServe runs the documented loop with the policy behind `drmas serve`
// (configs/vllm-shared.yaml). The server here reloads LATEST only when a stage logs that it
// waits for it, so every new step finds it still serving the one before: each must be waited
// for (the backend refuses responses of another step, so the loop fails if it is not), and
// every iteration's rows and manifest record the step that sampled them.
func TestLoopThroughDrmasServe(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	env := stagetest.Env(t, cfg)
	var log syncBuffer
	env.Log = &log
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	srv, url := stagetest.Serve(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, Poll: -1, Logf: env.Logf})
	log.setOnLine(func(l string) { // a reload only once a stage waits: as late as a poll can be
		if strings.Contains(l, "waiting up to") {
			go func() {
				time.Sleep(50 * time.Millisecond)
				if _, err := srv.Reload(ctx); err != nil {
					t.Errorf("reload: %v", err)
				}
			}()
		}
	})
	remote := *cfg
	remote.Models = map[string]configs.Model{}
	for id, m := range cfg.Models { // sizes kept: drmas trains the model, the server samples it
		m.Backend = configs.BackendOpenAI
		m.OpenAI = configs.OpenAI{Endpoint: url, Concurrency: 4}
		remote.Models[id] = m
	}
	if err := remote.Validate(); err != nil {
		t.Fatal(err)
	}
	env.Config = &remote
	const iters = 3
	if _, err := pipeline.Run(ctx, env, pipeline.Options{Iterations: iters, EvalEvery: 1}); err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log.String())
	}
	for iter := range iters {
		dir := layout.RolloutDir(cfg.Run, iter)
		m, _, err := commit.Read(ctx, env.Bucket, dir)
		if err != nil {
			t.Fatal(err)
		}
		if m.Params["policy_version"] != strconv.Itoa(iter) {
			t.Fatalf("iter %d: manifest policy_version %s", iter, m.Params["policy_version"])
		}
		rows := 0
		for _, f := range m.Files {
			data, err := commit.ReadFile(ctx, env.Bucket, dir, f)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), f.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.PolicyVersion != int64(iter) {
					t.Fatalf("iter %d: a row has policy_version %d, but the rollout records step %d\nlog:\n%s", iter, r.PolicyVersion, iter, log.String())
				}
				rows++
			}
		}
		if rows == 0 {
			t.Fatalf("iter %d: no rows", iter)
		}
	}
	// Steps 1..iters were each published while the server served the one before.
	waits := 0
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "now serves checkpoint step") {
			t.Log(l)
			waits++
		}
	}
	if waits != iters {
		t.Errorf("the loop waited for %d new steps, want %d:\n%s", waits, iters, log.String())
	}
}
