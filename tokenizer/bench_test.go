package tokenizer

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// benchCorpus is the oracle test's corpus: many scripts, code, emoji and odd text.
func benchCorpus() ([]string, int) {
	c := testCorpus(1, 10000)
	n := 0
	for _, s := range c {
		n += len(s)
	}
	return c, n
}

var jsRate struct {
	once sync.Once
	mbps float64
	err  error
}

// hfEncodeMBps is the throughput of HF's JS tokenizer on the corpus (warm cache), in MB/s.
func hfEncodeMBps(b *testing.B, dir string, corpus []string) (float64, error) {
	jsRate.once.Do(func() {
		nm := oracles.NodeModules(b)
		tmp := b.TempDir()
		in := filepath.Join(tmp, "in.json")
		writeJSON(b, in, corpus)
		script, _ := filepath.Abs(filepath.Join("testdata", "oracle.mjs"))
		out, err := exec.Command("node", script, nm, dir, "bench", in, filepath.Join(tmp, "out")).CombinedOutput()
		if err != nil {
			jsRate.err = fmt.Errorf("node bench: %v: %s", err, out)
			return
		}
		var nbytes, ns float64
		if _, err := fmt.Fscan(bytes.NewReader(out), &nbytes, &ns); err != nil {
			jsRate.err = fmt.Errorf("node bench output %q: %v", out, err)
			return
		}
		jsRate.mbps = nbytes / ns * 1e3
	})
	return jsRate.mbps, jsRate.err
}

// BenchmarkEncode is Encode's throughput on the oracle corpus (warm word cache, as the JS run)
// beside HF's JS tokenizer on the same strings in one node process; it reports both and their
// ratio (x_vs_hf_js > 1: drmas is faster).
func BenchmarkEncode(b *testing.B) {
	tok, dir := qwen3(b)
	corpus, n := benchCorpus()
	js, err := hfEncodeMBps(b, dir, corpus)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range corpus {
		tok.Encode(s)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for range b.N {
		for _, s := range corpus {
			tok.Encode(s)
		}
	}
	goMBps := float64(n) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	b.ReportMetric(js, "hf_js_MB/s")
	b.ReportMetric(goMBps/js, "x_vs_hf_js")
	b.Logf("Encode: drmas %.2f MB/s, HF tokenizers.js %.2f MB/s, ratio %.1fx", goMBps, js, goMBps/js)
}

// BenchmarkEncodeCold is Encode with an empty word cache before every pass.
func BenchmarkEncodeCold(b *testing.B) {
	tok, _ := qwen3(b)
	corpus, n := benchCorpus()
	b.SetBytes(int64(n))
	for range b.N {
		tok.cache.mu.Lock()
		clear(tok.cache.m)
		tok.cache.mu.Unlock()
		for _, s := range corpus {
			tok.Encode(s)
		}
	}
}
