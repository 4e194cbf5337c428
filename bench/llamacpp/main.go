// Command llamacpp measures drmas's KV-cache greedy decode beside llama.cpp's (node-llama-cpp's
// prebuilt build) on the same weights, in one run: a Qwen2-shaped model with random weights
// is written as GGUF in F32 and in BF16, both engines decode the same prompts at each batch
// size, and it prints tokens/s (wall and per CPU-second), their ratios and how many greedy
// tokens agree. For BF16, drmas decodes the same weights rounded to bfloat16 (it computes in
// float32); llama.cpp keeps them in BF16.
//
// Defaults: the Qwen2.5-0.5B shape (~2 GB of float32 weights in drmas, the same again for
// llama.cpp's mapping of the F32 file), 16-token prompts, 32 new tokens, batches 1 and 8,
// 2 threads each, 3 repetitions (min and median printed).
//
//	go run ./bench/llamacpp [-layers 24] [-new 32] [-reps 3] [-dtypes f32,bf16]
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/drmas-dev/drmas/internal/benchutil"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hf/gguf"
	"github.com/drmas-dev/drmas/internal/llamacpp"
	"github.com/drmas-dev/drmas/model"
)

type options struct {
	cfg     model.ArchConfig
	threads int
	prompt  int
	newTok  int
	reps    int
	batches []int
	dtypes  []gguf.Type
}

func main() {
	o := parseFlags()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/llamacpp:", err)
		os.Exit(1)
	}
}

func parseFlags() options {
	c := benchutil.QwenShapeFlags(flag.CommandLine)
	o := options{}
	flag.IntVar(&o.threads, "threads", 2, "threads for each engine")
	flag.IntVar(&o.prompt, "prompt", 16, "prompt tokens")
	flag.IntVar(&o.newTok, "new", 32, "tokens decoded per prompt")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each measurement")
	batches := flag.String("batches", "1,8", "batch sizes, comma-separated")
	dtypes := flag.String("dtypes", "f32,bf16", "GGUF tensor types, comma-separated (f32, bf16)")
	flag.Parse()
	cfg, err := benchutil.Arch(c)
	if err != nil {
		fail(err)
	}
	o.cfg = cfg
	for _, s := range strings.Split(*batches, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || b < 1 {
			fail(fmt.Errorf("-batches: %q is not a positive integer", s))
		}
		o.batches = append(o.batches, b)
	}
	for _, s := range strings.Split(*dtypes, ",") {
		t, err := gguf.ParseType(strings.TrimSpace(s))
		if err != nil {
			fail(fmt.Errorf("-dtypes: %w", err))
		}
		o.dtypes = append(o.dtypes, t)
	}
	if o.reps < 1 || o.newTok < 1 || o.prompt < 1 {
		fail(fmt.Errorf("-reps, -new and -prompt must be at least 1"))
	}
	return o
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/llamacpp:", err)
	os.Exit(2)
}

// row is one (dtype, batch) comparison.
type row struct {
	dtype         gguf.Type
	batch         int
	drmas, llama  stats // tokens/s over wall time
	drmasC, llamC stats // tokens/s per CPU-second × threads
	same, all     int   // greedy tokens equal, compared
}

func run(ctx context.Context, o options) error {
	if err := llamacpp.Available(); err != nil {
		return err
	}
	runtime.GOMAXPROCS(o.threads)
	m, err := model.InitLLM(o.cfg, 1)
	if err != nil {
		return err
	}
	vocab, err := gguf.ByteVocab(o.cfg.Vocab)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-llamacpp")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	prompts := makePrompts(o.cfg.Vocab, o.prompt, slices.Max(o.batches))
	c := o.cfg
	fmt.Printf("model %s: hidden %d, %d layers, %d heads, %d kv heads, intermediate %d, vocab %d (%.0fM parameters); %d-token prompts, %d new tokens, %d threads each, %d repetitions\n",
		c.Arch, c.Hidden, c.Layers, c.Heads, c.KVHeads, c.Intermediate, c.Vocab, float64(m.NumParams())/1e6, o.prompt, o.newTok, o.threads, o.reps)
	var rows []row
	for _, t := range o.dtypes {
		dm := m
		if t == gguf.BF16 {
			// drmas decodes the BF16 file's values stored as BF16, as llama.cpp does.
			roundToBF16(m)
			if dm, err = m.FrozenBF16(); err != nil {
				return err
			}
		}
		path := filepath.Join(dir, "model-"+strings.ToLower(t.String())+".gguf")
		if err := gguf.WriteFile(ctx, path, dm, t, vocab); err != nil {
			return err
		}
		rs, err := compare(ctx, o, dm, path, t, prompts)
		if err != nil {
			return err
		}
		rows = append(rows, rs...)
		os.Remove(path)
	}
	printTable(rows)
	return nil
}

// compare measures both engines on one GGUF file at every batch size.
func compare(ctx context.Context, o options, m *model.LLM, path string, t gguf.Type, prompts [][]int32) ([]row, error) {
	resp, err := llamacpp.Decode(ctx, llamacpp.Request{Model: path, Prompts: prompts, New: o.newTok, Threads: o.threads, Reps: o.reps, Batches: o.batches, Log: os.Stderr})
	if err != nil {
		return nil, err
	}
	var rows []row
	for i, b := range o.batches {
		lr := resp.Runs[i]
		r := row{dtype: t, batch: b}
		toks, wall, cpu, err := decodeDrmas(ctx, m, prompts[:b], o.newTok, o.reps)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "drmas: %v, batch %d: %.2f s a repetition (median)\n", t, b, 1/rates(1, wall).med)
		n := float64(b * o.newTok)
		r.drmas, r.llama = rates(n, wall), rates(n, lr.Seconds)
		// Tokens per CPU-second × threads: the speed on an otherwise idle machine, steadier than
		// wall time where other jobs share the cores.
		r.drmasC, r.llamC = rates(n*float64(o.threads), cpu), rates(n*float64(o.threads), lr.CPUSeconds)
		for j := range toks {
			for k := range toks[j] {
				r.all++
				if j < len(lr.Tokens) && k < len(lr.Tokens[j]) && lr.Tokens[j][k] == toks[j][k] {
					r.same++
				}
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// decodeDrmas runs drmas's greedy KV-cache decode reps times and returns the last tokens with
// each repetition's wall and CPU seconds.
func decodeDrmas(ctx context.Context, m *model.LLM, prompts [][]int32, newTok, reps int) ([][]int32, []float64, []float64, error) {
	reqs := make([]model.SampleRequest, len(prompts))
	for i, p := range prompts {
		reqs[i] = model.SampleRequest{Prompt: p, Seed: uint64(i)}
	}
	var toks [][]int32
	var wall, cpu []float64
	for range reps {
		t0, c0 := time.Now(), benchutil.CPUSeconds()
		out, err := m.Sample(ctx, reqs, model.SampleOptions{MaxTokens: newTok})
		if err != nil {
			return nil, nil, nil, err
		}
		wall = append(wall, time.Since(t0).Seconds())
		cpu = append(cpu, benchutil.CPUSeconds()-c0)
		toks = toks[:0]
		for _, r := range out {
			toks = append(toks, r.Tokens)
		}
	}
	return toks, wall, cpu, nil
}

// roundToBF16 rounds every weight matrix of m to bfloat16 in place (vectors stay, as the BF16
// GGUF keeps them F32), so drmas decodes the BF16 file's values.
func roundToBF16(m *model.LLM) {
	for _, p := range m.Params() {
		if len(p.Shape) < 2 {
			continue
		}
		for i, v := range p.Data {
			p.Data[i] = hf.Float32FromBF16(hf.BF16FromFloat32(v))
		}
	}
}

func makePrompts(vocab, length, n int) [][]int32 {
	r := rand.New(rand.NewPCG(7, 7))
	out := make([][]int32, n)
	for i := range out {
		out[i] = make([]int32, length)
		for j := range out[i] {
			out[i][j] = int32(r.IntN(vocab - 1)) // not the end token
		}
	}
	return out
}
