//go:build unix

package tokenizer

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
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

type jsRate struct {
	once      sync.Once
	mbps, cpu float64 // MB per wall second, MB per CPU second
	err       error
}

var jsRates sync.Map // tokenizer folder → *jsRate

// hfEncodeMBps is the throughput of HF's JS tokenizer on the corpus (warm cache) in MB per
// wall second and per CPU second.
func hfEncodeMBps(b *testing.B, dir string, corpus []string) (wall, cpu float64, err error) {
	v, _ := jsRates.LoadOrStore(dir, &jsRate{})
	jsRate := v.(*jsRate)
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
		var nbytes, ns, cpuNS float64
		if _, err := fmt.Fscan(bytes.NewReader(out), &nbytes, &ns, &cpuNS); err != nil {
			jsRate.err = fmt.Errorf("node bench output %q: %v", out, err)
			return
		}
		jsRate.mbps, jsRate.cpu = nbytes/ns*1e3, nbytes/cpuNS*1e3
	})
	return jsRate.mbps, jsRate.cpu, jsRate.err
}

// processCPU is the user + system CPU time of this process in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkEncode is Encode's throughput on the oracle corpus (warm word cache, as the JS run)
// beside HF's JS tokenizer on the same strings in one node process; it reports both and their
// ratio (x_vs_hf_js > 1: drmas is faster), by wall time and by CPU time, the figure that holds
// on a busy machine.
func BenchmarkEncode(b *testing.B) {
	tok, dir := qwen3(b)
	corpus, _ := benchCorpus()
	benchEncode(b, tok, dir, corpus)
}

// BenchmarkEncodeLlama3 is BenchmarkEncode on the real Llama 3 tokenizer and the Llama oracle
// test's corpus.
func BenchmarkEncodeLlama3(b *testing.B) {
	tok, dir := llama3(b)
	benchEncode(b, tok, dir, corpusOf(3, 10000, llamaFragments))
}

func benchEncode(b *testing.B, tok *BPE, dir string, corpus []string) {
	n := 0
	for _, s := range corpus {
		n += len(s)
	}
	js, jsCPU, err := hfEncodeMBps(b, dir, corpus)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range corpus {
		tok.Encode(s)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		for _, s := range corpus {
			tok.Encode(s)
		}
	}
	mb := float64(n) * float64(b.N) / 1e6
	goMBps, goCPU := mb/b.Elapsed().Seconds(), mb/(processCPU()-cpu0)
	b.ReportMetric(js, "hf_js_MB/s")
	b.ReportMetric(goMBps/js, "x_vs_hf_js")
	b.ReportMetric(goCPU/jsCPU, "x_vs_hf_js_cpu")
	b.Logf("Encode: drmas %.2f MB/s (%.2f per CPU-s), HF tokenizers.js %.2f MB/s (%.2f per CPU-s); ratio %.1fx wall, %.1fx CPU",
		goMBps, goCPU, js, jsCPU, goMBps/js, goCPU/jsCPU)
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

// BenchmarkSplit is the pre-tokenizer alone (Qwen's pattern) on the oracle corpus: the loop
// every Encode runs, without merges or the word cache.
func BenchmarkSplit(b *testing.B) {
	corpus, n := benchCorpus()
	b.SetBytes(int64(n))
	for range b.N {
		for _, s := range corpus {
			for i := 0; i < len(s); {
				i = nextPiece(s, i, 1)
			}
		}
	}
}
