//go:build unix

package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/internal/oracles"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// complete posts a completion and returns its status, body and decode-steps header.
func complete(ctx context.Context, t *testing.T, url string, body any) (int, string, int64) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), -1
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	steps, _ := strconv.ParseInt(resp.Header.Get(serve.StepsHeader), 10, 64)
	return resp.StatusCode, string(raw), steps
}

// choices is a response body's choices, as JSON.
func choices(t *testing.T, body string) string {
	t.Helper()
	var r struct{ Choices json.RawMessage }
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Choices) == 0 {
		t.Fatalf("not a completion: %v %.300s", err, body)
	}
	return string(r.Choices)
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// besideALongOne sends req alone, then again while a 30,000-token greedy generation decodes,
// and checks that the second is answered within maxSteps decode steps of its arrival, the
// long one still running, with the choices it got alone. leave ends the long one's client and
// waits for its answer.
func besideALongOne(t *testing.T, s *serve.Server, url string, req map[string]any, maxSteps int64) (leave func()) {
	t.Helper()
	st, alone, _ := complete(context.Background(), t, url, req)
	if st != 200 {
		t.Fatalf("alone: %d %s", st, alone)
	}
	lctx, cancel := context.WithCancel(context.Background())
	longDone := make(chan struct{})
	go func() {
		defer close(longDone)
		complete(lctx, t, url, map[string]any{"prompt": []int{1, 2, 3}, "max_tokens": 30000, "temperature": 0})
	}()
	leave = func() { cancel(); <-longDone }
	before := s.Stats().Batches
	waitFor(t, "the long generation decodes", func() bool { return s.Stats().Batches > before+3 })
	st, batched, steps := complete(context.Background(), t, url, req)
	if st != 200 || steps < 1 || steps > maxSteps {
		leave()
		t.Fatalf("beside a long generation: %d, %d decode steps (want ≤ %d): %.300s", st, steps, maxSteps, batched)
	}
	select {
	case <-longDone:
		t.Fatal("the long generation ended before the short completion was answered")
	default:
	}
	if choices(t, alone) != choices(t, batched) {
		leave()
		t.Fatalf("alone and batched differ:\n%s\n%s", choices(t, alone), choices(t, batched))
	}
	return leave
}

// TestShortCompletionJoinsALongOne: while a 30,000-token generation decodes, a 6-token
// completion joins the batch at the next step and is answered within 6 decode steps of its
// arrival (plus one for a step that ran as it arrived), the long one still running; its
// tokens and log-probs equal those it gets alone; the long one's client leaving takes it out
// of the batch.
func TestShortCompletionJoinsALongOne(t *testing.T) {
	s, url, stop := stagetest.ServeUntil(t, serve.Options{HF: hostileModel(t), Name: "m"})
	defer stop()
	short := map[string]any{"prompt": "hello there", "max_tokens": 6, "temperature": 1, "seed": 7, "logprobs": 1, "stop_token_ids": []int{}}
	leave := besideALongOne(t, s, url, short, 7)
	if s.Stats().MaxBatch < 2 {
		t.Errorf("the two were never decoded in one step: %+v", s.Stats())
	}
	leave()
	waitStopped(t, s, 1)
	idle := s.Stats().Batches
	time.Sleep(50 * time.Millisecond)
	if s.Stats().Batches != idle {
		t.Fatalf("decode steps go on after the only client left: %+v", s.Stats())
	}
}

// TestCancelledRequestFreesItsSlot: with room for one prompt (MaxBatch 1), a request waits
// while a long generation holds the place, and is decoded as soon as the long one's client
// leaves (or past its --request-timeout); the one waiting is answered, alone in the batch.
func TestCancelledRequestFreesItsSlot(t *testing.T) {
	s, url, stop := stagetest.ServeUntil(t, serve.Options{HF: hostileModel(t), Name: "m", MaxBatch: 1, RequestTimeout: 30 * time.Second})
	defer stop()
	lctx, leave := context.WithCancel(context.Background())
	longDone := make(chan struct{})
	go func() {
		defer close(longDone)
		complete(lctx, t, url, map[string]any{"prompt": []int{1, 2, 3}, "max_tokens": 30000, "temperature": 0})
	}()
	waitFor(t, "the long generation decodes", func() bool { return s.Stats().Batches > 3 })
	type answer struct {
		st    int
		steps int64
	}
	shortDone := make(chan answer, 1)
	go func() {
		st, _, steps := complete(context.Background(), t, url, map[string]any{"prompt": []int{4, 5}, "max_tokens": 3})
		shortDone <- answer{st, steps}
	}()
	waitFor(t, "the short request waits for a place", func() bool { return s.Stats().Waiting == 1 })
	arrived := s.Stats().Batches
	waitFor(t, "the short request has waited 20 steps", func() bool { return s.Stats().Batches > arrived+20 })
	select {
	case a := <-shortDone:
		t.Fatalf("answered (%d) while the only place was held", a.st)
	default:
	}
	if s.Stats().Prompts != 1 {
		t.Fatalf("%d prompts admitted with MaxBatch 1", s.Stats().Prompts)
	}
	leave()
	a := <-shortDone
	if a.st != 200 || a.steps < 20 || s.Stats().Waiting != 0 {
		t.Fatalf("after the long client left: %d, %d steps since its arrival (it waited ≥ 20)", a.st, a.steps)
	}
	<-longDone
	if st := s.Stats(); st.Stopped != 1 || st.MaxBatch != 1 {
		t.Fatalf("%+v: want one stopped request and never two prompts in a step", st)
	}
}

// TestStreamingAsOpenAIsClient: the official openai npm client streams completions from the
// server (two prompts, log-probs); the text, tokens, log-probs and finish reasons it puts
// together equal the same request's non-streaming answer.
func TestStreamingAsOpenAIsClient(t *testing.T) {
	script := filepath.Join(t.TempDir(), "stream.mjs")
	if err := os.WriteFile(script, []byte(streamScript), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := oracles.NodeProgram(t, script)
	_, url, stop := stagetest.ServeUntil(t, serve.Options{HF: hostileModel(t), Name: "m"})
	defer stop()
	req := map[string]any{"model": "m", "prompt": []string{"hello there", "a b c"}, "max_tokens": 64, "temperature": 1, "seed": 3, "logprobs": 1}
	st, body, _ := complete(context.Background(), t, url, req)
	if st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	var want struct {
		Choices []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
			Logprobs     struct {
				Tokens        []string
				TokenLogprobs []float64 `json:"token_logprobs"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "stream.mjs", url+"/v1")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got []struct {
		Text, Finish string
		Tokens       []string
		Logprobs     []float64
		Chunks       int
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got) != 2 {
		t.Fatalf("the client's output: %v\n%s", err, out)
	}
	for i, g := range got {
		w := want.Choices[i]
		if g.Text != w.Text || g.Finish != w.FinishReason || fmt.Sprint(g.Tokens) != fmt.Sprint(w.Logprobs.Tokens) || fmt.Sprint(g.Logprobs) != fmt.Sprint(w.Logprobs.TokenLogprobs) {
			t.Errorf("prompt %d streamed %+v, answered %+v", i, g, w)
		}
		if g.Chunks < 2 {
			t.Errorf("prompt %d came in %d chunks: not streamed", i, g.Chunks)
		}
	}
}

const streamScript = `import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.argv[2], apiKey: "none" });
const stream = await client.completions.create({ model: "m", prompt: ["hello there", "a b c"],
  max_tokens: 64, temperature: 1, seed: 3, logprobs: 1, stream: true });
const out = [0, 1].map(() => ({ Text: "", Finish: "", Tokens: [], Logprobs: [], Chunks: 0 }));
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    const o = out[c.index];
    o.Text += c.text; o.Chunks++;
    if (c.finish_reason) o.Finish = c.finish_reason;
    if (c.logprobs) { o.Tokens.push(...c.logprobs.tokens); o.Logprobs.push(...c.logprobs.token_logprobs); }
  }
}
console.log(JSON.stringify(out));
`

// TestSlowStreamingReader: a raw TCP client (4 KiB socket buffers on both ends) sends a
// streaming request for 20,000 tokens and never reads. The decode loop does not wait for it: a
// completion beside it is answered within its max_tokens steps; the server drops the client
// once more than StreamBacklog tokens wait unread (its generation stops long before 20,000
// tokens, and no step runs after), and its handler ends.
func TestSlowStreamingReader(t *testing.T) {
	s, err := serve.New(context.Background(), serve.Options{HF: hostileModel(t), Name: "m", StreamBacklog: 64, WriteTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, smallBuffers{inner}) }()
	url := "http://" + inner.Addr().String()

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	slow, err := d.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt": [1, 2], "max_tokens": 20000, "temperature": 0, "logprobs": 1, "stream": true}`
	fmt.Fprintf(slow, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "the slow stream decodes", func() bool { return s.Stats().Batches > 3 })
	st, out, steps := complete(context.Background(), t, url, map[string]any{"prompt": []int{4, 5}, "max_tokens": 5})
	if st != 200 || steps > 6 {
		t.Fatalf("a completion beside a client that does not read: %d, %d steps: %.200s", st, steps, out)
	}
	waitFor(t, "the slow reader is dropped", func() bool { return s.Stats().SlowReaders == 1 })
	idle := s.Stats().Batches
	if idle > 5000 {
		t.Errorf("%d decode steps ran before the slow reader was dropped (StreamBacklog 64)", idle)
	}
	time.Sleep(50 * time.Millisecond)
	if s.Stats().Batches != idle || s.Stats().Stopped != 1 {
		t.Fatalf("after the drop: %+v (%d steps then)", s.Stats(), idle)
	}
	slow.Close()
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	waitFor(t, "every goroutine of the server has ended", func() bool { return runtime.NumGoroutine() <= before })
}

// smallBuffers gives every accepted connection a 4 KiB send buffer, so that a client that
// does not read blocks the server's writes after a few kilobytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestStreamedTextIsTheAnswersText: streamed from a model with the real Qwen3 tokenizer
// (whose byte tokens cut characters between tokens), each prompt's chunks put together give
// the non-streamed answer's text and tokens, for several seeds.
func TestStreamedTextIsTheAnswersText(t *testing.T) {
	dir, _ := tinyQwen3(t)
	_, url, stop := stagetest.ServeUntil(t, serve.Options{HF: dir, Name: "q"})
	defer stop()
	for seed := range 2 {
		req := map[string]any{"prompt": []string{"你好，世界", "naïve café"}, "max_tokens": 48, "temperature": 1.5, "seed": seed, "logprobs": 1}
		st, body, _ := complete(context.Background(), t, url, req)
		if st != 200 {
			t.Fatalf("%d %s", st, body)
		}
		var want struct {
			Choices []struct {
				Text     string
				Logprobs struct{ Tokens []string }
			}
		}
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatal(err)
		}
		req["stream"] = true
		b, _ := json.Marshal(req)
		resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		text, toks := make([]string, 2), make([][]string, 2)
		sc := bufio.NewScanner(resp.Body)
		sawDone := false
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if line == "[DONE]" {
				sawDone = true
				break
			}
			var chunk struct {
				Choices []struct {
					Index    int
					Text     string
					Logprobs struct{ Tokens []string }
				}
			}
			if err := json.Unmarshal([]byte(line), &chunk); err != nil || len(chunk.Choices) != 1 {
				t.Fatalf("chunk %q: %v", line, err)
			}
			c := chunk.Choices[0]
			text[c.Index] += c.Text
			toks[c.Index] = append(toks[c.Index], c.Logprobs.Tokens...)
		}
		resp.Body.Close()
		if !sawDone || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("seed %d: no data: [DONE] (%v) or content type %q", seed, sawDone, resp.Header.Get("Content-Type"))
		}
		for i := range 2 {
			if text[i] != want.Choices[i].Text || fmt.Sprint(toks[i]) != fmt.Sprint(want.Choices[i].Logprobs.Tokens) {
				t.Errorf("seed %d prompt %d: streamed %q, answered %q", seed, i, text[i], want.Choices[i].Text)
			}
		}
	}
}

// BenchmarkStaggeredCompletions: 16 completions of 64 tokens sent 5 ms apart to one server
// (the tiny model of hostileModel), decoded in one continuous batch; tokens/s over the wall
// time of the 16.
func BenchmarkStaggeredCompletions(b *testing.B) {
	_, url, stop := stagetest.ServeUntil(b, serve.Options{HF: hostileModel(b), Name: "m"})
	defer stop()
	total := 0
	for b.Loop() {
		done := make(chan int, 16)
		for i := range 16 {
			go func() {
				body, _ := json.Marshal(map[string]any{"prompt": []int{1 + i, 2, 3}, "max_tokens": 64, "temperature": 1, "seed": i, "stop_token_ids": []int{}})
				resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					done <- 0
					return
				}
				var r struct {
					Usage struct {
						CompletionTokens int `json:"completion_tokens"`
					}
				}
				_ = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				done <- r.Usage.CompletionTokens
			}()
			time.Sleep(5 * time.Millisecond)
		}
		n := 0
		for range 16 {
			n += <-done
		}
		if n == 0 {
			b.Fatal("no tokens")
		}
		total += n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "tokens/s")
}

// TestAdapterCompletionJoinsABaseGeneration: a completion for a LoRA adapter (other weights,
// so its own model.Step each decode step) sent while the base model generates 30,000 tokens is
// answered within its max_tokens steps, with the tokens and log-probs it gets alone.
func TestAdapterCompletionJoinsABaseGeneration(t *testing.T) {
	root := t.TempDir()
	adapter := filepath.Join(root, "a")
	if err := os.MkdirAll(adapter, 0o755); err != nil {
		t.Fatal(err)
	}
	writeHostileAdapter(t, adapter)
	s, url, stop := stagetest.ServeUntil(t, serve.Options{HF: hostileModel(t), Name: "m", AdapterRoot: root})
	defer stop()
	if st, body, err := postCtx(context.Background(), http.DefaultClient, url+"/v1/load_lora_adapter", map[string]string{"lora_name": "a", "lora_path": adapter}); st != 200 {
		t.Fatalf("load: %d %s %v", st, body, err)
	}
	short := map[string]any{"model": "a", "prompt": []int{5, 6, 7}, "max_tokens": 6, "temperature": 1, "seed": 9, "logprobs": 1}
	besideALongOne(t, s, url, short, 7)()
}
