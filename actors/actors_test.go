package actors_test

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/model"
)

// TestTinyTopPKeepsTheMostLikelyToken: a top_p in (0, 1] below float32's range (config
// validation lets it through) samples as any tiny top_p does, keeping only the most likely
// token; it must not round to 0, which model.Sample reads as "no nucleus".
func TestTinyTopPKeepsTheMostLikelyToken(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want float32
	}{{1, 1}, {0.5, 0.5}, {0, 0}, {1e-300, math.SmallestNonzeroFloat32}, {math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat32}} {
		if got := actors.TopP32(c.in); got != c.want {
			t.Errorf("TopP32(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	cfg := model.Config{Vocab: model.VocabSize, Context: 32, Dim: 16, Layers: 1, Heads: 2, FFMult: 2, TiedHead: true}
	m, err := model.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	l := actors.NewLocal("m", 0, m)
	var reqs []actors.Request
	for i := range 8 {
		reqs = append(reqs, actors.Request{Agent: "a", Prompt: actors.PromptIDs("a", "q"), Seed: uint64(i)})
	}
	gen := func(p float64) []actors.Response {
		res, err := l.Generate(context.Background(), reqs, actors.Sampling{Temperature: 1, TopP: p, MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		for i := range res {
			res[i].LogProbs = nil // the log-probs are of the full distribution either way
		}
		return res
	}
	if tiny, small := gen(1e-300), gen(1e-30); !reflect.DeepEqual(tiny, small) {
		t.Fatalf("top_p 1e-300 samples other tokens than top_p 1e-30:\n%v\n%v", tiny, small)
	}
}

// TestLocalReusesPrefixes: an in-process backend's later call whose prompts repeat an earlier
// prompt's opening (a later turn) takes those positions from its prefix cache and returns what
// a fresh backend returns; Release empties the cache.
func TestLocalReusesPrefixes(t *testing.T) {
	cfg := model.Config{Vocab: model.VocabSize, Context: 128, Dim: 16, Layers: 1, Heads: 2, FFMult: 2, TiedHead: true}
	m, err := model.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	question := "What is the sum of the first ten primes?"
	first := []actors.Request{{Agent: "solver", Prompt: actors.PromptIDs("solver", question+" Solve it."), Seed: 1}}
	later := []actors.Request{
		{Agent: "solver", Prompt: actors.PromptIDs("solver", question+" Check: 129."), Seed: 2},
		{Agent: "solver", Prompt: actors.PromptIDs("solver", question+" Check: 131."), Seed: 3},
	}
	s := actors.Sampling{Temperature: 1, TopP: 0.9, MaxTokens: 6}
	warm := actors.NewLocal("m", 0, m)
	if _, err := warm.Generate(context.Background(), first, s); err != nil {
		t.Fatal(err)
	}
	got, err := warm.Generate(context.Background(), later, s)
	if err != nil {
		t.Fatal(err)
	}
	want, err := actors.NewLocal("m", 0, m).Generate(context.Background(), later, s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("over the cache %v, fresh %v", got, want)
	}
	// The shared opening is 49 byte tokens (BOS, "solver", SEP, the 40-byte question and a
	// space): 3 whole blocks of 16 for each later request.
	if hit := warm.PrefixStats().HitTokens; hit != 2*48 {
		t.Errorf("the later call took %d positions from the cache, want 96", hit)
	}
	warm.Release()
	if n := warm.PrefixStats().Blocks; n != 0 {
		t.Errorf("%d blocks after Release", n)
	}
}
