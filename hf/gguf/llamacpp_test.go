package gguf

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/drmas-dev/drmas/internal/llamacpp"
	"github.com/drmas-dev/drmas/model"
)

// llamaCpp returns when the oracle can run, else skips (fails under CI=true, as
// internal/oracles does for the other oracles).
func llamaCpp(t *testing.T) {
	t.Helper()
	if err := llamacpp.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// TestLlamaCppDecodesLikeDrmas loads the F32 GGUF of a small Qwen2 (untied head, random
// biases and norms) in llama.cpp and checks that its greedy tokens, alone and as a batch of
// three, are drmas's. A misnamed or transposed tensor, a wrong hyperparameter, or a missing
// key makes llama.cpp refuse the file or decode other tokens. One thread: llama.cpp's threads
// wait for each other at every op, which on a loaded machine costs far more than they gain.
func TestLlamaCppDecodesLikeDrmas(t *testing.T) {
	llamaCpp(t)
	m := testModel(t, false)
	v, err := ByteVocab(m.Config().Vocab)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	ctx := context.Background()
	if err := WriteFile(ctx, path, m, F32, v); err != nil {
		t.Fatal(err)
	}
	prompts := [][]int32{{3, 300, 17, 42, 99, 250, 7}, {510, 1, 2}, {400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410}}
	const newTok = 20
	resp, err := llamacpp.Decode(ctx, llamacpp.Request{Model: path, Prompts: prompts, New: newTok, Threads: 1, Reps: 1, Batches: []int{1, 3}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]model.SampleRequest, len(prompts))
	for i, p := range prompts {
		reqs[i] = model.SampleRequest{Prompt: p}
	}
	want, err := m.Sample(ctx, reqs, model.SampleOptions{MaxTokens: newTok})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(resp.Runs))
	}
	for _, run := range resp.Runs {
		if len(run.Tokens) != run.Batch {
			t.Fatalf("batch %d: %d sequences", run.Batch, len(run.Tokens))
		}
		for i, got := range run.Tokens {
			if !equalTokens(got, want[i].Tokens) {
				t.Errorf("batch %d, prompt %d: llama.cpp %v\n drmas %v", run.Batch, i, got, want[i].Tokens)
			}
		}
	}
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
