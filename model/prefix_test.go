package model

import (
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"syscall"
	"testing"
	"time"
)

// cpuSeconds is the user and system CPU time of this process: on a machine shared with other
// jobs, a ratio of CPU times is steadier than one of wall times.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// TestSharedPrefillSameDraws: eight requests over three prompts (a group's samples share one)
// draw the same tokens and log-probs, bit for bit, as each request decoded alone, while the
// model runs each distinct prompt once: the rows fed are the distinct prompts' tokens plus one
// row per later token, and the output head runs one row per sampled token.
func TestSharedPrefillSameDraws(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	m, err := InitLLM(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 3, 0.4)
	r := rand.New(rand.NewPCG(4, 5))
	prompts := archSeqs(c.Vocab, r, [2]int{9, 0}, [2]int{4, 0}, [2]int{13, 0})
	var reqs []SampleRequest
	for i := range 8 {
		reqs = append(reqs, SampleRequest{Prompt: prompts[i%3].Prompt, Seed: uint64(100 + i)})
	}
	opts := SampleOptions{Temperature: 1, TopP: 0.9, MaxTokens: 7}
	before, headBefore := cachedRows.Load(), headRowsRun.Load()
	got, err := m.Sample(context.Background(), reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	rows, head := cachedRows.Load()-before, headRowsRun.Load()-headBefore
	want := int64(9 + 4 + 13)
	for i, req := range reqs {
		alone, err := m.Sample(context.Background(), []SampleRequest{req}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[i].Tokens, alone[0].Tokens) || !slices.Equal(got[i].LogProbs, alone[0].LogProbs) {
			t.Fatalf("request %d: shared %v %v, alone %v %v", i, got[i].Tokens, got[i].LogProbs, alone[0].Tokens, alone[0].LogProbs)
		}
		want += int64(len(got[i].Tokens) - 1)
	}
	if rows != want {
		t.Errorf("the batch ran %d rows, want %d (each distinct prompt once)", rows, want)
	}
	sampled := int64(0)
	for _, g := range got {
		sampled += int64(len(g.Tokens))
	}
	if head != sampled {
		t.Errorf("the head ran %d rows, want %d (one per sampled token, none for the other prompt rows)", head, sampled)
	}
}

// The rollout benchmarks' shape: -rollout-shape small (hidden 256, 4 layers, vocab 32,000) or
// qwen05 (Qwen2.5-0.5B: hidden 896, 14 heads, 2 KV heads, MLP 4864, vocab 151,936, tied), with
// -rollout-layers overriding its layer count (0: the shape's), and their top_p (-rollout-top-p,
// 0.95; random weights give a nearly flat distribution, whose nucleus at 0.95 holds most of
// the vocabulary, so the sampler sorts far more candidates than after training), and the
// dtype of its matrices (-rollout-dtype: f32, or bf16 as a LoRA run's frozen base holds them).
var (
	rolloutDType  = flag.String("rollout-dtype", "f32", "rollout benchmarks' matrices: f32 or bf16 (stored in BF16, as a frozen LoRA base)")
	rolloutShape  = flag.String("rollout-shape", "small", "rollout benchmarks' model shape: small or qwen05")
	rolloutLayers = flag.Int("rollout-layers", 0, "rollout benchmarks' layers (0: the shape's)")
	rolloutTopP   = flag.Float64("rollout-top-p", 0.95, "rollout benchmarks' top_p (1: off)")
	rolloutPrompt = flag.Int("rollout-prompt", 512, "BenchmarkGroupRollout's and BenchmarkRolloutPhases' prompt tokens")
)

func rolloutModel(b *testing.B) *LLM {
	c := ArchConfig{Arch: "qwen3", Hidden: 256, Layers: 4, Heads: 4, KVHeads: 2, Intermediate: 768, Vocab: 32000, Context: 1024, RopeTheta: 1e6}
	if *rolloutShape == "qwen05" {
		c = ArchConfig{Arch: "qwen2", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, Intermediate: 4864, Vocab: 151936, Context: 32768, RopeTheta: 1e6, QKVBias: true, Tie: true}
	} else if *rolloutShape != "small" {
		b.Fatalf("-rollout-shape %q: want small or qwen05", *rolloutShape)
	}
	if *rolloutLayers > 0 {
		c.Layers = *rolloutLayers
	}
	m, err := InitLLM(c.WithDefaults(), 1)
	if err != nil {
		b.Fatal(err)
	}
	switch *rolloutDType {
	case "f32":
	case "bf16":
		roundMatricesBF16(m)
		if m, err = m.FrozenBF16(); err != nil {
			b.Fatal(err)
		}
	default:
		b.Fatalf("-rollout-dtype %q: want f32 or bf16", *rolloutDType)
	}
	b.Logf("shape %s: hidden %d, %d layers, vocab %d, %s", *rolloutShape, c.Hidden, c.Layers, c.Vocab, *rolloutDType)
	return m
}

// rollout decodes reqs as streams over pc (nil: none), with the shared prefill on or off, and
// returns the seconds of the first step (the prefill and each stream's first token), of the
// rest, the tokens sampled and the distinct KV blocks the streams hold at the end.
func rollout(b *testing.B, m *LLM, reqs []SampleRequest, opts SampleOptions, share bool, pc *PrefixCache) (first, rest float64, tokens, blocks int) {
	defer func(old bool) { sharePrefixes = old }(sharePrefixes)
	sharePrefixes = share
	var ss []*Stream
	for _, r := range reqs {
		s, err := m.NewStream(r, opts)
		if err != nil {
			b.Fatal(err)
		}
		if pc != nil {
			if err := s.UsePrefixCache(pc); err != nil {
				b.Fatal(err)
			}
		}
		ss = append(ss, s)
	}
	t0 := time.Now()
	for step := 0; ; step++ {
		done := true
		for _, s := range ss {
			done = done && s.Done()
		}
		if done {
			break
		}
		if step == 1 {
			first = time.Since(t0).Seconds()
		}
		if err := Step(context.Background(), ss, StepOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	rest = time.Since(t0).Seconds() - first
	seen := map[*kvBlock]bool{}
	for _, s := range ss {
		tokens += s.Len()
		for _, bl := range s.kv.blocks {
			seen[bl] = true
		}
	}
	return first, rest, tokens, len(seen)
}

// BenchmarkGroupRollout: 8 prompts × 8 samples, 512-token prompts (-rollout-prompt), 64 new
// tokens at top_p 0.95, with the group's prefill shared (forks sharing the prompt's KV blocks)
// and without, in one run: tokens/s of each, their ratio, the seconds of the first step (prefill) and of
// the decode steps, and the KV memory the 64 streams hold at the end.
func BenchmarkGroupRollout(b *testing.B) {
	m := rolloutModel(b)
	r := rand.New(rand.NewPCG(6, 7))
	var lens [][2]int
	for range 8 {
		lens = append(lens, [2]int{*rolloutPrompt, 0})
	}
	prompts := archSeqs(m.d.vocab, r, lens...)
	var reqs []SampleRequest
	for p := range 8 {
		for s := range 8 {
			reqs = append(reqs, SampleRequest{Prompt: prompts[p].Prompt, Seed: uint64(8*p + s)})
		}
	}
	opts := SampleOptions{Temperature: 1, TopP: float32(*rolloutTopP), MaxTokens: 64}
	blockMB := float64(2*m.d.layers*kvBlockLen*m.d.KV*m.d.hd*4) / 1e6
	for i := 0; i < b.N; i++ {
		var rate, cpu [2]float64
		for k, share := range []bool{true, false} {
			c0 := cpuSeconds()
			first, rest, n, blocks := rollout(b, m, reqs, opts, share, nil)
			cpu[k] = cpuSeconds() - c0
			rate[k] = float64(n) / (first + rest)
			name := map[bool]string{true: "shared", false: "unshared"}[share]
			b.ReportMetric(rate[k], name+"-tokens/s")
			b.ReportMetric(first, name+"-prefill-s")
			b.ReportMetric(rest, name+"-decode-s")
			b.ReportMetric(float64(blocks)*blockMB, name+"-KV-MB")
		}
		b.ReportMetric(rate[0]/rate[1], "ratio")
		b.ReportMetric(cpu[1]/cpu[0], "cpu-ratio")
	}
}

// BenchmarkMultiTurnRollout: the math workflow's solver → verifier → solver retry over 4 tasks
// × 8 samples, 64 new tokens a turn at top_p 0.95, with a prefix cache across the three calls
// and without (today's Sample: a group's identical prompts still prefill once). The prompts
// have the workflow's layout as a chat template renders it: a 64-token opening every prompt
// shares (system message and team), the task's 64-token question, then per turn a header,
// the earlier turns' responses and the role's instruction (32, 48, 40 tokens). It checks that
// both draw the same tokens and log-probs and reports tokens/s, their ratio and the rows run.
func BenchmarkMultiTurnRollout(b *testing.B) {
	m := rolloutModel(b)
	r := rand.New(rand.NewPCG(8, 9))
	seg := func(n int) []int32 { return archSeqs(m.d.vocab, r, [2]int{n, 0})[0].Prompt }
	opening, r1, h2, r2, h3, h4, r3 := seg(64), seg(32), seg(8), seg(48), seg(8), seg(8), seg(40)
	const tasks, samples = 4, 8
	questions := make([][]int32, tasks)
	for t := range questions {
		questions[t] = slices.Concat(opening, seg(64))
	}
	opts := SampleOptions{Temperature: 1, TopP: float32(*rolloutTopP), MaxTokens: 64}
	turns := func(pc *PrefixCache) (res [3][]SampleResult, rows int64, secs, cpu float64) {
		before, t0, c0 := cachedRows.Load(), time.Now(), cpuSeconds()
		for turn := range 3 {
			var reqs []SampleRequest
			for t := range tasks {
				for s := range samples {
					i := t*samples + s
					p := slices.Concat(questions[t], r1)
					if turn == 1 {
						p = slices.Concat(questions[t], h2, res[0][i].Tokens, r2)
					} else if turn == 2 {
						p = slices.Concat(questions[t], h3, res[0][i].Tokens, h4, res[1][i].Tokens, r3)
					}
					reqs = append(reqs, SampleRequest{Prompt: p, Seed: uint64(1000*turn + i)})
				}
			}
			out, err := m.SampleCached(context.Background(), reqs, opts, pc)
			if err != nil {
				b.Fatal(err)
			}
			res[turn] = out
		}
		return res, cachedRows.Load() - before, time.Since(t0).Seconds(), cpuSeconds() - c0
	}
	for i := 0; i < b.N; i++ {
		on, rowsOn, secsOn, cpuOn := turns(NewPrefixCache(DefaultPrefixCacheBytes))
		off, rowsOff, secsOff, cpuOff := turns(nil)
		n := 0
		for turn := range on {
			for k := range on[turn] {
				if !slices.Equal(on[turn][k].Tokens, off[turn][k].Tokens) || !slices.Equal(on[turn][k].LogProbs, off[turn][k].LogProbs) {
					b.Fatalf("turn %d, request %d: the cache changed the draws", turn, k)
				}
				n += len(on[turn][k].Tokens)
			}
		}
		b.ReportMetric(float64(n)/secsOn, "cache-tokens/s")
		b.ReportMetric(float64(n)/secsOff, "nocache-tokens/s")
		b.ReportMetric(secsOff/secsOn, "ratio")
		b.ReportMetric(cpuOff/cpuOn, "cpu-ratio")
		b.ReportMetric(float64(rowsOn), "cache-rows")
		b.ReportMetric(float64(rowsOff), "nocache-rows")
	}
}

// BenchmarkRolloutPhases measures the two phases of BenchmarkGroupRollout separately, for
// shapes where the whole rollout takes too long: the prefill of one 512-token prompt
// (-rollout-prompt; its first step, one token sampled) and a decode step of 64 rows at the
// rollout's positions (64 samples of one such prompt, prefilled once, then stepped). It
// reports the rollout ratio these give, 8 groups × 8 samples and 64 new tokens: every sample
// prefilling (64 prefills + 63 steps) over the group's prompt prefilled once (8 prefills + 63
// steps), and the decode tokens/s at batch 64. With -rollout-profile PREFIX it writes a CPU profile of each phase
// (PREFIX-prefill.prof, PREFIX-decode.prof).
func BenchmarkRolloutPhases(b *testing.B) {
	m := rolloutModel(b)
	r := rand.New(rand.NewPCG(6, 7))
	opts := SampleOptions{Temperature: 1, TopP: float32(*rolloutTopP), MaxTokens: 64}
	for i := 0; i < b.N; i++ {
		long := archSeqs(m.d.vocab, r, [2]int{*rolloutPrompt, 0})[0].Prompt
		s, err := m.NewStream(SampleRequest{Prompt: long, Seed: 1}, opts)
		if err != nil {
			b.Fatal(err)
		}
		stop := profilePhase(b, "prefill")
		t0, c0 := time.Now(), cpuSeconds()
		if err := Step(context.Background(), []*Stream{s}, StepOptions{}); err != nil {
			b.Fatal(err)
		}
		prefill, prefillCPU := time.Since(t0).Seconds(), cpuSeconds()-c0
		stop()
		var ss []*Stream
		for k := range 64 {
			s, err := m.NewStream(SampleRequest{Prompt: long, Seed: uint64(k)}, opts)
			if err != nil {
				b.Fatal(err)
			}
			ss = append(ss, s)
		}
		if err := Step(context.Background(), ss, StepOptions{}); err != nil {
			b.Fatal(err)
		}
		const steps = 3
		stop = profilePhase(b, "decode")
		t0, c0 = time.Now(), cpuSeconds()
		for range steps {
			if err := Step(context.Background(), ss, StepOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		step, stepCPU := time.Since(t0).Seconds()/steps, (cpuSeconds()-c0)/steps
		stop()
		b.ReportMetric(prefill, "prefill-s")
		b.ReportMetric(prefillCPU, "prefill-cpu-s")
		b.ReportMetric(step, "decode-step-s")
		b.ReportMetric(stepCPU, "decode-step-cpu-s")
		b.ReportMetric(64/step, "decode-tokens/s")
		b.ReportMetric(step/prefill, "d/P")
		b.ReportMetric((64*prefill+63*step)/(8*prefill+63*step), "est-ratio")
		b.ReportMetric((64*prefillCPU+63*stepCPU)/(8*prefillCPU+63*stepCPU), "est-cpu-ratio")
	}
}

var rolloutProfile = flag.String("rollout-profile", "", "BenchmarkRolloutPhases: write PREFIX-prefill.prof and PREFIX-decode.prof")

// profilePhase starts a CPU profile of one phase when -rollout-profile is set and returns
// its stop.
func profilePhase(b *testing.B, phase string) func() {
	if *rolloutProfile == "" {
		return func() {}
	}
	f, err := os.Create(*rolloutProfile + "-" + phase + ".prof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
