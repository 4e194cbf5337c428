package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/actors"
)

// BenchmarkChatCall is one chat call through the gateway (HTTP, render, sample 8 tokens of a
// tiny built-in model, record, answer); BenchmarkGenerate is the sampling alone, so the
// difference is the gateway's cost per call.
func BenchmarkChatCall(b *testing.B) {
	g, err := Start(Config{Agents: tinyAgents(b), Sampling: sampling, MaxCalls: b.N + 1})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ep := g.Open(func(i int) uint64 { return uint64(i) })
	url, body := ep.BaseURL()+"/chat/completions", `{"model": "solver", "messages": [{"role": "user", "content": "What is 12 + 30?"}]}`
	b.ResetTimer()
	for range b.N {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ep.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	b.StopTimer()
	ep.Close()
}

func BenchmarkGenerate(b *testing.B) {
	be := tinyAgents(b)["solver"]
	prompt := actors.PromptIDs("solver", "user: What is 12 + 30?")
	b.ResetTimer()
	for i := range b.N {
		if _, err := be.Generate(context.Background(), []actors.Request{{Agent: "solver", Prompt: prompt, Seed: uint64(i)}}, sampling); err != nil {
			b.Fatal(err)
		}
	}
}
