package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
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

// runScripted runs examples/<name>/team.mjs unchanged for one task with scripted agents, the
// final answer graded by whether it holds want.
func runScripted(t *testing.T, name string, replies map[string]string, task workflows.Task, want string) Outcome {
	t.Helper()
	dir := oracles.NodeProgram(t, filepath.Join("..", "examples", name, "team.mjs"))
	bpe, err := tokenizer.LoadDir(oracles.Qwen3TokenizerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]actors.Backend{}
	for a, r := range replies {
		agents[a] = scripted{id: a, bpe: bpe, reply: r}
	}
	grade := func(_ workflows.Task, final string) (float64, string, bool) {
		if strings.Contains(final, want) {
			return 1, "", true
		}
		return 0, "", true
	}
	var log strings.Builder
	outs, err := Run(context.Background(), RunOptions{
		Program: workflows.ProgramOptions{Command: []string{"node", "team.mjs"}, Dir: dir, Timeout: time.Minute, Concurrency: 1, MaxCalls: 8},
		Grade:   grade, Agents: agents, Sampling: actors.Sampling{Temperature: 1, TopP: 1, MaxTokens: 64},
		Tasks: []workflows.Task{task}, Samples: 1, Seed: func(workflows.Task, int, int) uint64 { return 1 },
		Logf: func(f string, a ...any) { fmt.Fprintf(&log, f, a...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Failed {
		t.Fatalf("%s failed: %s", name, log.String())
	}
	return outs[0]
}

// agentsOf lists the agents of an outcome's calls in order.
func agentsOf(oc Outcome) []string {
	var out []string
	for _, c := range oc.Calls {
		out = append(out, c.Agent)
	}
	return out
}

// TestAgentsSDKHandoff runs examples/agents-sdk on @openai/agents: the solver's reply is a
// Qwen <tool_call> of the handoff tool, which the gateway returns as tool_calls; the SDK hands
// off, and the verifier's call carries the handoff's call and tool turn; the verifier's
// \boxed{4} is the final answer, graded 1.
func TestAgentsSDKHandoff(t *testing.T) {
	oc := runScripted(t, "agents-sdk", map[string]string{
		"solver":   "I will ask.\n<tool_call>\n{\"name\": \"transfer_to_verifier\", \"arguments\": {}}\n</tool_call>",
		"verifier": `The answer is \boxed{4}.`,
	}, workflows.Task{ID: "t", Question: "What is 2+2?", Answer: "4"}, `\boxed{4}`)
	if !slices.Equal(agentsOf(oc), []string{"solver", "verifier"}) || oc.Reward != 1 {
		t.Fatalf("calls by %v, reward %v", agentsOf(oc), oc.Reward)
	}
	if p := oc.Calls[1].PromptText; !strings.Contains(p, "<tool_response>") || !strings.Contains(p, `<tool_call>
{"name": "transfer_to_verifier", "arguments": {}}
</tool_call>`) {
		t.Errorf("the verifier's prompt lacks the handoff call and its result:\n%s", p)
	}
}

// TestSearchTeamToolCalls runs examples/search-team on the openai client: the searcher's
// replies are calls of the search tool, which the program runs and answers with tool messages
// (three rounds, its limit); the answerer reads the passages found.
func TestSearchTeamToolCalls(t *testing.T) {
	oc := runScripted(t, "search-team", map[string]string{
		"searcher": "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"Lisbon\"}}\n</tool_call>",
		"answerer": "<answer>Portugal</answer>",
	}, workflows.Task{ID: "t", Question: "Which country is Lisbon in?", Answer: "Portugal"}, "<answer>Portugal</answer>")
	if !slices.Equal(agentsOf(oc), []string{"searcher", "searcher", "searcher", "answerer"}) || oc.Reward != 1 {
		t.Fatalf("calls by %v, reward %v", agentsOf(oc), oc.Reward)
	}
	if p := oc.Calls[2].PromptText; strings.Count(p, "<tool_response>\nLisbon is the capital of Portugal.") != 2 || strings.Count(p, `{"name": "search", "arguments": {"query": "Lisbon"}}`) != 2 {
		t.Errorf("the third search prompt lacks the two earlier calls and results:\n%s", p)
	}
	if p := oc.Calls[3].PromptText; !strings.Contains(p, "Passages:\nLisbon is the capital of Portugal.") {
		t.Errorf("the answerer's prompt lacks the passages:\n%s", p)
	}
}
