package serve_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestLimitsAsVLLM: a prompt and max_tokens beyond the model's context get vLLM's 400, not a
// completion cut short at the context; too many prompts get a 400 and too many prompt tokens
// a 413, each naming the limit; a request within every limit is answered.
func TestLimitsAsVLLM(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	ctxLen := cfg.Models["m1"].Context
	_, url := start(t, serve.Options{Bucket: env.Bucket, Run: cfg.Run, MaxPrompts: 4, MaxPromptTokens: ctxLen})
	prompt := make([]int, ctxLen-10)
	for i := range prompt {
		prompt[i] = 1
	}
	i := 0
	for _, c := range []struct {
		body   map[string]any
		status int
		want   string
	}{
		{map[string]any{"prompt": prompt[:4], "max_tokens": ctxLen}, 400,
			"This model's maximum context length is " + strconv.Itoa(ctxLen) + " tokens. However, you requested " + strconv.Itoa(ctxLen+4) + " tokens (4 in the messages, " + strconv.Itoa(ctxLen) + " in the completion)."},
		{map[string]any{"prompt": [][]int{{1}, {1}, {1}, {1}, {1}}, "max_tokens": 1}, 400, "this request has 5 prompts; this server takes at most 4 per request (--max-prompts)"},
		{map[string]any{"prompt": [][]int{prompt[:50], prompt[:ctxLen-49]}, "max_tokens": 1}, 413,
			"this request's prompts have " + strconv.Itoa(ctxLen+1) + " tokens in all; this server takes at most " + strconv.Itoa(ctxLen) + " per request (--max-prompt-tokens)"},
		{map[string]any{"prompt": [][]int{prompt[:30], prompt[:10]}, "max_tokens": 2}, 200, ""},
		{map[string]any{"prompt": prompt[:ctxLen-12], "max_tokens": 12}, 200, ""}, // exactly the context
	} {
		i++
		status, out := post(t, url+"/v1/completions", c.body)
		msg := toString(out)
		if status != c.status || !strings.Contains(msg, c.want) {
			t.Errorf("case %d: got %d %s, want %d with %q", i, status, msg, c.status, c.want)
		}
	}
}

// TestShutdownLogsOneLine: a cancelled Serve (SIGINT, SIGTERM in drmas serve) says so in one
// line.
func TestShutdownLogsOneLine(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	env := warm(t, cfg)
	var log logBuffer
	s, err := serve.New(context.Background(), serve.Options{Bucket: env.Bucket, Run: cfg.Run, Logf: log.Logf, Poll: -1})
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
	log.waitFor(t, "serve: model")
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if n := strings.Count(strings.Join(log.lines, "\n"), "shutting down"); n != 1 {
		t.Errorf("%d shutdown lines in\n%s", n, strings.Join(log.lines, "\n"))
	}
}
