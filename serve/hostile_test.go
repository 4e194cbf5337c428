//go:build unix

package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/serve"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// hostileModel writes a tiny random Qwen2 folder with the test tokenizer and a long context,
// so that a long generation runs for seconds while the rest of a test takes milliseconds.
func hostileModel(t testing.TB) string {
	t.Helper()
	return tinytokModel(t, hf.InitSpec{Arch: "qwen2", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 128, MaxPositions: 1 << 15}, 3)
}

func postCtx(ctx context.Context, c *http.Client, url string, body any) (int, string, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// TestHostileClients: what clients can do to a server, all at once on one server, and nothing
// left running after it: a short completion is answered while a long generation runs; a
// client that leaves stops its generation; a request past --request-timeout gets a 504 and
// stops its generation; a text prompt over --max-prompt-bytes is refused before it is
// tokenized; a slow reader does not hold other requests; concurrent adapter loads (one from
// a named pipe, one from outside --adapter-root, one with a 1 MiB name) and completions each
// get their answer, the pipe at once.
func TestHostileClients(t *testing.T) {
	dir := hostileModel(t)
	root := t.TempDir()
	adapter := filepath.Join(root, "runs", "r1", "checkpoints", "step=000001", "m")
	if err := os.MkdirAll(adapter, 0o755); err != nil {
		t.Fatal(err)
	}
	writeHostileAdapter(t, adapter)
	fifo := filepath.Join(root, "runs", "r1", "checkpoints", "step=000002", "m")
	if err := os.MkdirAll(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fifo, hf.AdapterConfigFile), []byte(`{"r": 1, "lora_alpha": 1, "target_modules": ["q_proj"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifo, hf.AdapterWeightsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	writeHostileAdapter(t, outside)

	before := runtime.NumGoroutine()
	var logs logBuffer
	s, url, stop := stagetest.ServeUntil(t, serve.Options{HF: dir, Name: "m", MaxPromptTokens: 1000, RequestTimeout: 2 * time.Second,
		AdapterRoot: root, AdapterCheckpoints: true, MaxLoRAs: 8, Logf: logs.Logf})
	client := &http.Client{}
	long := map[string]any{"prompt": []int{1, 2, 3}, "max_tokens": 30000, "temperature": 0}

	// A long generation, then a short completion beside it: answered while the long one runs.
	lctx, leave := context.WithCancel(context.Background())
	longDone := make(chan int, 1)
	go func() { st, _, _ := postCtx(lctx, client, url+"/v1/completions", long); longDone <- st }()
	time.Sleep(100 * time.Millisecond)
	if st, body, err := postCtx(context.Background(), client, url+"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 4}); st != 200 {
		t.Fatalf("short completion beside a long one: %d %s %v", st, body, err)
	}
	select {
	case st := <-longDone:
		t.Fatalf("the long generation ended (%d) before the short one was answered: they were not sampled together", st)
	default:
	}
	// The long generation's client leaves: its sampling stops.
	leave()
	<-longDone
	waitStopped(t, s, 1)

	// Past the request timeout: a 504, and the sampling stops.
	if st, body, _ := postCtx(context.Background(), client, url+"/v1/completions", long); st != http.StatusGatewayTimeout || !strings.Contains(body, "--request-timeout") {
		t.Fatalf("past the deadline: %d %s", st, body)
	}
	waitStopped(t, s, 2)

	// A text prompt over the byte cap (1000 tokens × 16) is refused before tokenizing.
	if st, body, _ := postCtx(context.Background(), client, url+"/v1/completions", map[string]any{"prompt": strings.Repeat("ab ", 6000), "max_tokens": 1}); st != 413 || !strings.Contains(body, "--max-prompt-bytes") {
		t.Fatalf("a big prompt: %d %s", st, body)
	}

	// A slow reader: sends a request, reads its answer a byte at a time, leaves halfway.
	slow, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt": [1, 2], "max_tokens": 64, "logprobs": 1}`
	fmt.Fprintf(slow, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	one := make([]byte, 1)
	for range 20 {
		if _, err := slow.Read(one); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Concurrent loads and completions.
	type answer struct {
		what   string
		status int
		body   string
	}
	var wg sync.WaitGroup
	answers := make(chan answer, 16)
	do := func(what, path string, req any) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b, _ := postCtx(context.Background(), client, url+path, req)
			answers <- answer{what, st, b}
		}()
	}
	do("ok", "/v1/load_lora_adapter", map[string]string{"lora_name": "a1", "lora_path": adapter})
	do("ok spelt file://…/./", "/v1/load_lora_adapter", map[string]string{"lora_name": "a2", "lora_path": "file://" + filepath.Dir(adapter) + "/./m"})
	do("fifo", "/v1/load_lora_adapter", map[string]string{"lora_name": "f", "lora_path": fifo})
	do("outside", "/v1/load_lora_adapter", map[string]string{"lora_name": "o", "lora_path": outside})
	do("dotdot", "/v1/load_lora_adapter", map[string]string{"lora_name": "d", "lora_path": adapter + "/../../../../../../" + filepath.Base(outside)})
	do("huge name", "/v1/load_lora_adapter", map[string]string{"lora_name": strings.Repeat("\x1b[31m", 1<<18), "lora_path": adapter})
	for i := range 4 {
		do("completion", "/v1/completions", map[string]any{"prompt": []int{1, 2, i + 3}, "max_tokens": 8})
	}
	wg.Wait()
	close(answers)
	want := map[string]int{"ok": 200, "ok spelt file://…/./": 200, "fifo": 400, "outside": 403, "dotdot": 403, "huge name": 400, "completion": 200}
	for a := range answers {
		if a.status != want[a.what] || len(a.body) > 2048 || strings.Contains(a.body, "\x1b") {
			t.Errorf("%s: %d (%d bytes) %.300s, want %d", a.what, a.status, len(a.body), a.body, want[a.what])
		}
		if a.what == "fifo" && !strings.Contains(a.body, "a named pipe") {
			t.Errorf("fifo: %s", a.body)
		}
	}
	slow.Close()
	stop()
	client.CloseIdleConnections()
	if strings.Contains(logs.String(), "\x1b") || len(logs.String()) > 64<<10 {
		t.Errorf("the log holds escapes or is %d bytes", len(logs.String()))
	}
	// Nothing left running: every goroutine the server or its requests started has ended.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after the server stopped, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// waitStopped waits until the server has stopped n sampling calls early.
func waitStopped(t *testing.T, s *serve.Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.Stats().Stopped < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sampling calls stopped, want %d: a generation went on for a request that was gone", s.Stats().Stopped, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeHostileAdapter writes an r = 1 adapter on layer 0's q_proj of hostileModel.
func writeHostileAdapter(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, hf.AdapterConfigFile), []byte(`{"peft_type": "LORA", "r": 1, "lora_alpha": 2, "target_modules": ["q_proj"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	const q = "base_model.model.model.layers.0.self_attn.q_proj"
	var buf bytes.Buffer
	hdr := fmt.Sprintf(`{"%s.lora_A.weight": {"dtype": "F32", "shape": [1, 64], "data_offsets": [0, 256]}, "%s.lora_B.weight": {"dtype": "F32", "shape": [64, 1], "data_offsets": [256, 512]}}`, q, q)
	n := uint64(len(hdr))
	buf.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24), 0, 0, 0, 0})
	buf.WriteString(hdr)
	buf.Write(make([]byte, 512))
	if err := os.WriteFile(filepath.Join(dir, hf.AdapterWeightsFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
