package rollout_test

import (
	"context"
	"slices"
	"testing"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/workflows"
)

// markTokenizer stands for a model's own tokenizer: ids and text nobody else would produce.
type markTokenizer struct{}

func (markTokenizer) PromptIDs(agent, prompt string) ([]int32, error) {
	return []int32{9000, int32(len(agent)), int32(len(prompt))}, nil
}
func (markTokenizer) TargetIDs(string) []int32           { return []int32{9001} }
func (markTokenizer) ResponseText(tokens []int32) string { return "#### 4" }

// tokenizedBackend answers every request with token 9002 and carries markTokenizer.
type tokenizedBackend struct{ prompts [][]int32 }

func (b *tokenizedBackend) Model() string               { return "qwen" }
func (b *tokenizedBackend) Version() int64              { return 0 }
func (b *tokenizedBackend) Tokenizer() actors.Tokenizer { return markTokenizer{} }
func (b *tokenizedBackend) Generate(_ context.Context, reqs []actors.Request, _ actors.Sampling) ([]actors.Response, error) {
	out := make([]actors.Response, len(reqs))
	for i, r := range reqs {
		b.prompts = append(b.prompts, r.Prompt)
		out[i] = actors.Response{Tokens: []int32{9002}, FinishReason: "stop"}
	}
	return out, nil
}

// TestPlayUsesTheModelsTokenizer: a backend's own tokenizer encodes its agents' prompts and
// decodes their responses (the built-in policy's byte ids are covered by the other tests).
func TestPlayUsesTheModelsTokenizer(t *testing.T) {
	wf, err := workflows.New("math", workflows.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	be := &tokenizedBackend{}
	backends := map[string]actors.Backend{}
	for _, a := range wf.Agents() {
		backends[a] = be
	}
	tasks := []workflows.Task{{ID: "t", Question: "2+2", Answer: "4"}}
	eps, err := rollout.Play(context.Background(), wf, tasks, backends, rollout.PlayOptions{
		Samples: 1, Seed: func(workflows.Task, int, int) uint64 { return 1 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || len(eps[0].Turns) == 0 {
		t.Fatalf("episodes %+v", eps)
	}
	for i, turn := range eps[0].Turns {
		want := []int32{9000, int32(len(turn.Agent)), int32(len(turn.PromptText))}
		if !slices.Equal(turn.PromptIDs, want) || !slices.Equal(be.prompts[i], want) || turn.ResponseText != "#### 4" {
			t.Errorf("turn %d: prompt ids %v (sent %v), text %q; want %v and the tokenizer's text", i, turn.PromptIDs, be.prompts[i], turn.ResponseText, want)
		}
	}
}
