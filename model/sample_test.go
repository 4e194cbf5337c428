package model

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func sampleModel(t testing.TB) *Model {
	cfg := Config{Vocab: VocabSize, Context: 48, Dim: 32, Layers: 2, Heads: 4, FFMult: 4, TiedHead: false}
	m, err := New(cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	randomizeParams(m, 5, 0.15) // a peakier, less uniform distribution than init
	return m
}

func sampleReqs() []SampleRequest {
	return []SampleRequest{
		{Prompt: Encode("hello"), Seed: 1},
		{Prompt: []int32{BOS}, Seed: 2},
		{Prompt: Encode("a much longer prompt here"), Seed: 3},
		{Prompt: Encode("xy"), Seed: 4},
	}
}

func TestSampleLogProbsMatchForward(t *testing.T) {
	m := sampleModel(t)
	for _, opts := range []SampleOptions{
		{Temperature: 1, MaxTokens: 20},
		{Temperature: 0.7, TopP: 0.9, MaxTokens: 20},
		{Temperature: 0, MaxTokens: 20},
	} {
		reqs := sampleReqs()
		res, err := m.Sample(context.Background(), reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		temp := opts.Temperature
		if temp == 0 {
			temp = 1
		}
		seqs := make([]Sequence, len(reqs))
		for i := range reqs {
			seqs[i] = Sequence{Prompt: reqs[i].Prompt, Response: res[i].Tokens}
		}
		lp, _, err := m.Score(seqs, temp)
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for i := range res {
			if len(res[i].Tokens) == 0 {
				t.Fatalf("request %d sampled nothing", i)
			}
			for j := range res[i].LogProbs {
				worst = math.Max(worst, math.Abs(float64(res[i].LogProbs[j]-lp[i][j])))
			}
		}
		t.Logf("opts %+v: max |sample logprob - forward logprob| = %.2e", opts, worst)
		if worst > 1e-4 {
			t.Errorf("sampling log-probs differ from teacher-forced by %.3g", worst)
		}
	}
}

func TestKVCacheMatchesRecompute(t *testing.T) {
	m := sampleModel(t)
	opts := SampleOptions{Temperature: 0.8, TopP: 0.95, MaxTokens: 30}
	a, err := m.Sample(context.Background(), sampleReqs(), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.SampleNoCache(context.Background(), sampleReqs(), opts)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range a {
		if !slices.Equal(a[i].Tokens, b[i].Tokens) || a[i].FinishReason != b[i].FinishReason {
			t.Fatalf("request %d: cache %v/%s vs recompute %v/%s", i, a[i].Tokens, a[i].FinishReason, b[i].Tokens, b[i].FinishReason)
		}
		for j := range a[i].LogProbs {
			worst = math.Max(worst, math.Abs(float64(a[i].LogProbs[j]-b[i].LogProbs[j])))
		}
	}
	t.Logf("max |cache - recompute| log-prob = %.2e", worst)
	if worst > 1e-4 {
		t.Errorf("log-probs differ by %.3g", worst)
	}
}

func TestSampleDeterministicAndBatchIndependent(t *testing.T) {
	m := sampleModel(t)
	opts := SampleOptions{Temperature: 1, TopP: 0.9, MaxTokens: 25, Stop: []int32{'\n'}}
	reqs := sampleReqs()
	all, err := m.Sample(context.Background(), reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m.Sample(context.Background(), reqs, opts)
	for i := range all {
		if !slices.Equal(all[i].Tokens, again[i].Tokens) || !slices.Equal(all[i].LogProbs, again[i].LogProbs) {
			t.Fatalf("request %d: not deterministic", i)
		}
	}
	// Alone, and inside a reversed batch with extra requests.
	for i, r := range reqs {
		alone, err := m.Sample(context.Background(), []SampleRequest{r}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(alone[0].Tokens, all[i].Tokens) || !slices.Equal(alone[0].LogProbs, all[i].LogProbs) {
			t.Errorf("request %d alone: %v vs batched %v", i, alone[0].Tokens, all[i].Tokens)
		}
	}
	rev := []SampleRequest{{Prompt: Encode("zzz"), Seed: 99}}
	for i := len(reqs) - 1; i >= 0; i-- {
		rev = append(rev, reqs[i])
	}
	out, _ := m.Sample(context.Background(), rev, opts)
	for i := range reqs {
		o := out[len(reqs)-i]
		if !slices.Equal(o.Tokens, all[i].Tokens) || !slices.Equal(o.LogProbs, all[i].LogProbs) {
			t.Errorf("request %d in reversed batch differs", i)
		}
	}
	// Different seed ⇒ (almost surely) different tokens.
	r2 := reqs[0]
	r2.Seed = 12345
	o2, _ := m.Sample(context.Background(), []SampleRequest{r2}, opts)
	if slices.Equal(o2[0].Tokens, all[0].Tokens) {
		t.Log("note: a different seed produced the same tokens")
	}
}

func TestSampleLimits(t *testing.T) {
	m := sampleModel(t)
	C := m.Config().Context
	prompt := make([]int32, C-3)
	for i := range prompt {
		prompt[i] = 'a'
	}
	res, err := m.Sample(context.Background(), []SampleRequest{{Prompt: prompt}, {Prompt: make([]int32, C)}}, SampleOptions{Temperature: 1, Stop: nil})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; len(r.Tokens) > 3 || (len(r.Tokens) < 3 && r.FinishReason != FinishStop) || (len(r.Tokens) == 3 && r.FinishReason != FinishLength && r.Tokens[2] != EOS) {
		t.Errorf("context limit: %v %s", r.Tokens, r.FinishReason)
	}
	if r := res[1]; len(r.Tokens) != 0 || r.FinishReason != FinishLength {
		t.Errorf("full prompt: %v %s", r.Tokens, r.FinishReason)
	}
	res, _ = m.Sample(context.Background(), []SampleRequest{{Prompt: []int32{BOS}}}, SampleOptions{Temperature: 0, MaxTokens: 5, Stop: []int32{}})
	if len(res[0].Tokens) > 5 {
		t.Errorf("MaxTokens ignored: %d", len(res[0].Tokens))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Sample(ctx, sampleReqs(), SampleOptions{Temperature: 1}); err == nil {
		t.Error("cancelled context: want error")
	}
	if _, err := m.Sample(context.Background(), []SampleRequest{{Prompt: nil}}, SampleOptions{}); err == nil {
		t.Error("empty prompt: want error")
	}
	if _, err := m.Sample(context.Background(), []SampleRequest{{Prompt: []int32{9999}}}, SampleOptions{}); err == nil {
		t.Error("bad token: want error")
	}
}

// TestSampleBatchIndependentEveryKernel: a request samples the same tokens
// and log-probs, bit for bit, alone and in a batch whose prefill has many
// rows, with either GEMM (gonum used to switch to a differently rounded
// parallel path for the many-row products).
func TestSampleBatchIndependentEveryKernel(t *testing.T) {
	for name, g := range map[string]GEMM{"gonum": GonumGEMM{}, "blocked": BlockedGEMM{}} {
		t.Run(name, func(t *testing.T) {
			m, err := New(Config{Vocab: VocabSize, Context: 64, Dim: 32, Layers: 1, Heads: 2, FFMult: 4}, 3)
			if err != nil {
				t.Fatal(err)
			}
			randomizeParams(m, 5, 0.15)
			m.SetGEMM(g)
			opts := SampleOptions{Temperature: 1, MaxTokens: 10}
			r := SampleRequest{Prompt: Encode("hello"), Seed: 1}
			alone, err := m.Sample(context.Background(), []SampleRequest{r}, opts)
			if err != nil {
				t.Fatal(err)
			}
			reqs := []SampleRequest{r}
			for i := 0; i < 8; i++ {
				reqs = append(reqs, SampleRequest{Prompt: Encode("a prompt of forty bytes, give or take..."), Seed: uint64(i)})
			}
			batch, err := m.Sample(context.Background(), reqs, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(alone[0].Tokens, batch[0].Tokens) || !slices.Equal(alone[0].LogProbs, batch[0].LogProbs) {
				t.Fatalf("alone %v %v, in a batch %v %v", alone[0].Tokens, alone[0].LogProbs, batch[0].Tokens, batch[0].LogProbs)
			}
		})
	}
}

func TestSampleTopPNaN(t *testing.T) {
	m := sampleModel(t)
	_, err := m.Sample(context.Background(), sampleReqs(), SampleOptions{Temperature: 1, TopP: float32(math.NaN())})
	if err == nil || !strings.Contains(err.Error(), "top_p") {
		t.Fatalf("TopP NaN: error %v, want one naming top_p", err)
	}
}

func TestSampleTopKNegative(t *testing.T) {
	m := sampleModel(t)
	_, err := m.Sample(context.Background(), sampleReqs(), SampleOptions{Temperature: 1, TopK: -1})
	if err == nil || !strings.Contains(err.Error(), "top_k") {
		t.Fatalf("TopK -1: error %v, want one naming top_k", err)
	}
}

// TestSampleCacheSizedByMaxTokens: a request's KV cache covers its prompt
// and MaxTokens, not the whole context (16 one-token prompts for two tokens
// used to allocate 2 MiB of cache each on this 8192-position model).
func TestSampleCacheSizedByMaxTokens(t *testing.T) {
	m, err := New(Config{Vocab: VocabSize, Context: 8192, Dim: 16, Layers: 2, Heads: 2, FFMult: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]SampleRequest, 16)
	for i := range reqs {
		reqs[i] = SampleRequest{Prompt: []int32{BOS}, Seed: uint64(i)}
	}
	opts := SampleOptions{Temperature: 1, MaxTokens: 2}
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	res, err := m.Sample(context.Background(), reqs, opts)
	runtime.ReadMemStats(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.TotalAlloc - a.TotalAlloc; got > 4<<20 {
		t.Fatalf("Sample allocated %d bytes for 16 requests of 3 positions", got)
	}
	// The bounded cache gives the same results as the full-context path.
	full, err := m.SampleNoCache(context.Background(), reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range res {
		if !slices.Equal(res[i].Tokens, full[i].Tokens) || res[i].FinishReason != full[i].FinishReason {
			t.Fatalf("request %d: %v/%s vs %v/%s", i, res[i].Tokens, res[i].FinishReason, full[i].Tokens, full[i].FinishReason)
		}
	}
}

// TestSoftmaxProbsMatchesStats: the entropy-free softmax gives softmaxStats's log-sum-exp and
// probabilities bit for bit, at several temperatures and with logits far below the maximum
// (the clamped tail), on a vocabulary-sized row.
func TestSoftmaxProbsMatchesStats(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	z := make([]float32, 151936)
	for i := range z {
		z[i] = float32(r.NormFloat64() * 4)
	}
	z[7], z[99] = 40, -200
	for _, invT := range []float64{1, 1 / 0.7, 1 / 0.05} {
		pw, pg := make([]float32, len(z)), make([]float32, len(z))
		lw, _ := softmaxStats(z, invT, pw)
		lg := softmaxProbs(z, invT, pg)
		if math.Float64bits(lw) != math.Float64bits(lg) {
			t.Fatalf("1/T %v: log-sum-exp %v, want %v", invT, lg, lw)
		}
		for i := range pw {
			if math.Float32bits(pw[i]) != math.Float32bits(pg[i]) {
				t.Fatalf("1/T %v: p[%d] = %v, want %v", invT, i, pg[i], pw[i])
			}
		}
	}
}
