package gateway

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/tokenizer"
	"github.com/drmas-dev/drmas/workflows"
)

// scripted is a model that always replies with one text, in a real tokenizer's ids: it makes
// a client's code path (a handoff) happen that a random model would not take.
type scripted struct {
	id    string
	reply string
	bpe   *tokenizer.BPE
}

func (s scripted) Model() string               { return s.id }
func (s scripted) Version() int64              { return 0 }
func (s scripted) Tokenizer() actors.Tokenizer { return actors.Chat{BPE: s.bpe} }
func (s scripted) Generate(_ context.Context, reqs []actors.Request, _ actors.Sampling) ([]actors.Response, error) {
	out := make([]actors.Response, len(reqs))
	for i := range reqs {
		ids := append(s.bpe.Encode(s.reply), s.bpe.EOS())
		out[i] = actors.Response{Tokens: ids, LogProbs: make([]float32, len(ids)), FinishReason: "stop"}
	}
	return out, nil
}

// TestAgentsSDKHandoff runs examples/agents-sdk unchanged on @openai/agents: the solver's
// reply is a Qwen <tool_call> of the handoff tool, which the gateway returns as tool_calls; the
// SDK hands off, and the verifier's call carries the handoff's tool turn; the verifier's
// \boxed{4} is the final answer, graded 1 by the math grader.
func TestAgentsSDKHandoff(t *testing.T) {
	dir := oracles.NodeProgram(t, filepath.Join("..", "examples", "agents-sdk", "team.mjs"))
	bpe, err := tokenizer.LoadDir(oracles.Qwen3TokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]actors.Backend{
		"solver":   scripted{id: "s", bpe: bpe, reply: "I will ask.\n<tool_call>\n{\"name\": \"transfer_to_verifier\", \"arguments\": {}}\n</tool_call>"},
		"verifier": scripted{id: "v", bpe: bpe, reply: `The answer is \boxed{4}.`},
	}
	grade := func(t workflows.Task, final string) (float64, string, bool) {
		if strings.Contains(final, `\boxed{`+t.Answer+`}`) {
			return 1, "", true
		}
		return 0, "", true
	}
	var log strings.Builder
	outs, err := Run(context.Background(), RunOptions{
		Program: workflows.ProgramOptions{Command: []string{"node", "team.mjs"}, Dir: dir, Timeout: time.Minute, Concurrency: 1, MaxCalls: 4},
		Grade:   grade, Agents: agents, Sampling: actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 64},
		Tasks: []workflows.Task{{ID: "t", Question: "What is 2+2?", Answer: "4"}}, Samples: 1,
		Seed: func(workflows.Task, int, int) uint64 { return 1 },
		Logf: func(f string, a ...any) { log.WriteString(f) },
	})
	if err != nil {
		t.Fatal(err)
	}
	oc := outs[0]
	if oc.Failed || len(oc.Calls) != 2 || oc.Calls[0].Agent != "solver" || oc.Calls[1].Agent != "verifier" || oc.Reward != 1 {
		t.Fatalf("outcome %+v, log %s", oc, log.String())
	}
	if p := oc.Calls[1].PromptText; !strings.Contains(p, "<tool_response>") || !strings.Contains(p, `<tool_call>
{"name": "transfer_to_verifier", "arguments": {}}
</tool_call>`) {
		t.Errorf("the verifier's prompt lacks the handoff call and its result:\n%s", p)
	}
}
