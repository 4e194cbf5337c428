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
