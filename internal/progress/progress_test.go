package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a writer safe for the bar's concurrent renders.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDescribeAfterCompletion: rollout describes the bar after every Add, the last one
// included. Once the bar is complete (and has ended its line), a Describe must not draw it
// again: the bar would appear twice and the next log line would be glued to the second copy.
func TestDescribeAfterCompletion(t *testing.T) {
	var w lockedBuffer
	b := New(&w, 2, "rollout", "episodes")
	b.Add(1)
	b.Describe("rollout (10 tokens)")
	b.Add(1)
	b.Describe("rollout (20 tokens)")
	b.Finish()
	out := w.String()
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "(2/2") != 1 {
		t.Fatalf("output after completion %q: want the complete bar once, ending its line", out)
	}
}

// TestConcurrentUpdates: stages add from several goroutines; the count ends at the total (run
// with -race).
func TestConcurrentUpdates(t *testing.T) {
	var w lockedBuffer
	b := New(&w, 800, "x", "u")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Add(1)
				b.Describe("y")
			}
		}()
	}
	wg.Wait()
	b.Finish()
	if out := w.String(); !strings.Contains(out, "(800/800") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("output %q", out)
	}
}

// TestSilent: a nil writer or no work draws nothing and still times the work.
func TestSilent(t *testing.T) {
	b := New(nil, 10, "x", "u")
	b.Add(3)
	b.Describe("y")
	if d := b.Finish(); d < 0 {
		t.Fatalf("elapsed %v", d)
	}
	for _, total := range []int64{0, -1} {
		var w lockedBuffer
		z := New(&w, total, "empty", "u")
		z.Add(1)
		z.Describe("y")
		z.Finish()
		if out := w.String(); out != "" {
			t.Fatalf("a bar of %d units drew %q", total, out)
		}
	}
}
