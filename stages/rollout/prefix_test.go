package rollout_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/workflows"
)

// plainBackend is the in-process backend without a prefix cache: every call prefills its
// prompts.
type plainBackend struct{ m *model.Model }

func (plainBackend) Model() string  { return "m" }
func (plainBackend) Version() int64 { return 0 }
func (p plainBackend) Generate(ctx context.Context, reqs []actors.Request, s actors.Sampling) ([]actors.Response, error) {
	sr := make([]model.SampleRequest, len(reqs))
	for i, r := range reqs {
		sr[i] = model.SampleRequest{Prompt: r.Prompt, Seed: r.Seed}
	}
	res, err := p.m.Sample(ctx, sr, model.SampleOptions{Temperature: float32(s.Temperature), TopP: float32(s.TopP), MaxTokens: s.MaxTokens})
	if err != nil {
		return nil, err
	}
	out := make([]actors.Response, len(res))
	for i, r := range res {
		out[i] = actors.Response{Tokens: r.Tokens, LogProbs: r.LogProbs, FinishReason: r.FinishReason}
	}
	return out, nil
}

// TestPlayOverPrefixCache: the math workflow's episodes (solver, verifier, solver again) played
// by the in-process backend, whose later turns take their opening from its prefix cache, are
// those of a backend that prefills every prompt: the same prompts, tokens and log-probs.
func TestPlayOverPrefixCache(t *testing.T) {
	wf, err := workflows.New("math", workflows.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(model.Config{Vocab: model.VocabSize, Context: 1024, Dim: 16, Layers: 1, Heads: 2, FFMult: 2, TiedHead: true}, 5)
	if err != nil {
		t.Fatal(err)
	}
	tasks := []workflows.Task{{ID: "a", Question: "What is 17 + 25?", Answer: "42"}, {ID: "b", Question: "What is 6 * 7?", Answer: "42"}}
	play := func(be actors.Backend) []*rollout.Episode {
		eps, err := rollout.Play(context.Background(), wf, tasks, map[string]actors.Backend{"solver": be, "verifier": be}, rollout.PlayOptions{
			Samples: 4, Sampling: actors.Sampling{Temperature: 1, TopP: 0.95, MaxTokens: 24},
			Seed: func(t workflows.Task, sample, turn int) uint64 { return uint64(len(t.ID)*100 + 10*sample + turn) },
		})
		if err != nil {
			t.Fatal(err)
		}
		return eps
	}
	local := actors.NewLocal("m", 0, m)
	got, want := play(local), play(plainBackend{m})
	turns := 0
	for i := range want {
		for j := range want[i].Turns {
			g, w := got[i].Turns[j], want[i].Turns[j]
			if !reflect.DeepEqual(g.PromptIDs, w.PromptIDs) || !reflect.DeepEqual(g.Response, w.Response) {
				t.Fatalf("episode %d, turn %d: over the cache %v, plain %v", i, j, g.Response, w.Response)
			}
			turns++
		}
	}
	st := local.PrefixStats()
	t.Logf("%d turns, %+v", turns, st)
	if turns <= len(want) || st.HitTokens == 0 || st.Blocks != 0 {
		t.Errorf("%d turns in %d episodes, %d positions from the cache, %d blocks left after Play: want later turns, hits, none left", turns, len(want), st.HitTokens, st.Blocks)
	}
}
