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

// tinyArch returns small configs covering every structural option: Qwen2
// (q/k/v biases, tied head, GQA), Qwen3 (q/k norms, head_dim ≠
// hidden/heads, attention biases, untied head), Llama.
func tinyArchs() map[string]ArchConfig {
	return map[string]ArchConfig{
		"qwen2_tied_gqa": ArchConfig{Arch: "qwen2", Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 24, Vocab: 40, Context: 64, RopeTheta: 1e6, Tie: true}.WithDefaults(),
		"qwen3_untied_hd6_bias": ArchConfig{Arch: "qwen3", Hidden: 16, Layers: 2, Heads: 4, KVHeads: 1, HeadDim: 6, Intermediate: 20, Vocab: 40, Context: 64,
			RopeTheta: 1e4, QKVBias: true}.WithDefaults(),
		"llama_untied": ArchConfig{Arch: "llama", Hidden: 12, Layers: 1, Heads: 3, KVHeads: 3, Intermediate: 16, Vocab: 30, Context: 64, RMSNormEps: 1e-5}.WithDefaults(),
		// Wavelengths 6.3, 19.9, 62.8, 199 against an original context of 32: kept, blended, slowed.
		"llama3_tied_scaled": ArchConfig{Arch: "llama", Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, Intermediate: 24, Vocab: 30, Context: 64, RopeTheta: 100, Tie: true,
			RopeScaling: RopeScaling{Type: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 32}}.WithDefaults(),
	}
}

// randomizeLLM gives every tensor a non-trivial value (norm weights around
// 1) so that every path carries gradient.
func randomizeLLM(m *LLM, seed uint64, std float64) {
	r := rand.New(rand.NewPCG(seed, 11))
	for _, p := range m.Params() {
		for j := range p.Data {
			v := r.NormFloat64() * std
			if strings.HasSuffix(p.Name, "norm.weight") {
				v = 1 + v
			}
			p.Data[j] = float32(v)
		}
	}
}

func archSeqs(vocab int, r *rand.Rand, lens ...[2]int) []Sequence {
	out := make([]Sequence, len(lens))
	for i, l := range lens {
		s := Sequence{Prompt: make([]int32, l[0]), Response: make([]int32, l[1])}
		for j := range s.Prompt {
			s.Prompt[j] = int32(r.IntN(vocab))
		}
		for j := range s.Response {
			s.Response[j] = int32(r.IntN(vocab))
		}
		out[i] = s
	}
	return out
}

func randGrads(seqs []Sequence, r *rand.Rand) (dlp, dent [][]float32) {
	for _, s := range seqs {
		a, b := make([]float32, len(s.Response)), make([]float32, len(s.Response))
		for j := range a {
			a[j], b[j] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		dlp, dent = append(dlp, a), append(dent, b)
	}
	return dlp, dent
}

func weightedLoss(t testing.TB, m *LLM, seqs []Sequence, temp float32, dlp, dent [][]float32) float64 {
	p, err := m.Forward(seqs, temp)
	if err != nil {
		t.Fatal(err)
	}
	var L float64
	lp, en := p.LogProbs(), p.Entropy()
	for i := range lp {
		for j := range lp[i] {
			L += float64(dlp[i][j])*float64(lp[i][j]) + float64(dent[i][j])*float64(en[i][j])
		}
	}
	return L
}

// TestLLMGradientCheck compares Backward with fourth-order central finite
// differences of the float32 forward on sampled elements of every tensor.
func TestLLMGradientCheck(t *testing.T) {
	for name, c := range tinyArchs() {
		t.Run(name, func(t *testing.T) {
			m, err := InitLLM(c, 1)
			if err != nil {
				t.Fatal(err)
			}
			randomizeLLM(m, 2, 0.3)
			r := rand.New(rand.NewPCG(3, 3))
			seqs := archSeqs(c.Vocab, r, [2]int{3, 4}, [2]int{1, 6}, [2]int{5, 1})
			dlp, dent := randGrads(seqs, r)
			const temp = 0.8
			p, err := m.Forward(seqs, temp)
			if err != nil {
				t.Fatal(err)
			}
			g := m.NewGrads()
			if err := p.Backward(dlp, dent, g); err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i, prm := range m.Params() {
				gr := g.parts[i]
				for s := 0; s < 8; s++ {
					j := r.IntN(len(prm.Data))
					orig := prm.Data[j]
					const h = 1e-2
					at := func(d float64) float64 {
						prm.Data[j] = float32(float64(orig) + d)
						return weightedLoss(t, m, seqs, temp, dlp, dent)
					}
					num := (8*(at(h)-at(-h)) - (at(2*h) - at(-2*h))) / (12 * h)
					prm.Data[j] = orig
					ana := float64(gr[j])
					// float32 rounding of the loss (~1e-6) divided by
					// the step leaves ~3e-4 of noise in num.
					e := math.Abs(num-ana) / (math.Max(math.Abs(num), math.Abs(ana)) + 5e-2)
					worst = math.Max(worst, e)
					if e > 1e-2 {
						t.Errorf("%s[%d]: numeric %.6g analytic %.6g rel err %.3g", prm.Name, j, num, ana, e)
					}
				}
			}
			t.Logf("worst relative error over all tensors: %.3e", worst)
		})
	}
}

// TestLLMSampleCacheMatchesRecompute: the KV-cache decoder yields the
// tokens of the no-cache recompute, with log-probs equal to within float32
// rounding, and a request's tokens do not depend on its batch.
func TestLLMSampleCacheMatchesRecompute(t *testing.T) {
	for name, c := range tinyArchs() {
		t.Run(name, func(t *testing.T) {
			m, err := InitLLM(c, 5)
			if err != nil {
				t.Fatal(err)
			}
			randomizeLLM(m, 6, 0.5)
			reqs := []SampleRequest{{Prompt: []int32{1, 2, 3}, Seed: 1}, {Prompt: []int32{7}, Seed: 2}, {Prompt: []int32{4, 4, 4, 4, 4, 9}, Seed: 3},
				// A long prompt: prefill rows outnumber some layers' outputs (direct GEMM).
				{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, Seed: 4}}
			opts := SampleOptions{Temperature: 0.9, TopP: 0.95, MaxTokens: 20, Stop: []int32{5}}
			a, err := m.Sample(context.Background(), reqs, opts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := m.SampleNoCache(context.Background(), reqs, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if !slices.Equal(a[i].Tokens, b[i].Tokens) || a[i].FinishReason != b[i].FinishReason {
					t.Fatalf("request %d: cache %v %s, recompute %v %s", i, a[i].Tokens, a[i].FinishReason, b[i].Tokens, b[i].FinishReason)
				}
				for j := range a[i].LogProbs {
					if d := math.Abs(float64(a[i].LogProbs[j] - b[i].LogProbs[j])); d > 1e-4 {
						t.Errorf("request %d token %d: log-prob %v vs %v", i, j, a[i].LogProbs[j], b[i].LogProbs[j])
					}
				}
				alone, err := m.Sample(context.Background(), reqs[i:i+1], opts)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(alone[0].Tokens, a[i].Tokens) || !slices.Equal(alone[0].LogProbs, a[i].LogProbs) {
					t.Errorf("request %d differs alone vs in a batch", i)
				}
			}
			// Sampled log-probs are what Forward says of those tokens.
			seqs := make([]Sequence, len(reqs))
			for i := range reqs {
				seqs[i] = Sequence{Prompt: reqs[i].Prompt, Response: a[i].Tokens}
			}
			lp, _, err := m.Score(seqs, opts.Temperature)
			if err != nil {
				t.Fatal(err)
			}
			for i := range lp {
				for j := range lp[i] {
					if d := math.Abs(float64(lp[i][j] - a[i].LogProbs[j])); d > 1e-4 {
						t.Errorf("request %d token %d: Score %v vs Sample %v", i, j, lp[i][j], a[i].LogProbs[j])
					}
				}
			}
		})
	}
}

// TestLLMDeterministic: bit-identical log-probs and gradients whatever the
// core count and whatever else is in the batch.
func TestLLMDeterministic(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	c.Hidden, c.Intermediate = 64, 96 // large enough for parallel splits
	m, err := InitLLM(c, 9)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 9, 0.2)
	r := rand.New(rand.NewPCG(4, 4))
	seqs := archSeqs(c.Vocab, r, [2]int{20, 30}, [2]int{3, 40}, [2]int{50, 9})
	dlp, dent := randGrads(seqs, r)
	run := func(procs int, s []Sequence, dl, de [][]float32) ([][]float32, []float32) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		p, err := m.Forward(s, 1)
		if err != nil {
			t.Fatal(err)
		}
		g := m.NewGrads()
		if err := p.Backward(dl, de, g); err != nil {
			t.Fatal(err)
		}
		return p.LogProbs(), g.buf
	}
	lp1, g1 := run(1, seqs, dlp, dent)
	lp4, g4 := run(4, seqs, dlp, dent)
	for i := range lp1 {
		if !slices.Equal(lp1[i], lp4[i]) {
			t.Fatalf("sequence %d: log-probs differ between 1 and 4 cores", i)
		}
	}
	if !slices.Equal(g1, g4) {
		t.Fatal("gradients differ between 1 and 4 cores")
	}
	alone, _ := run(2, seqs[1:2], dlp[1:2], dent[1:2])
	if !slices.Equal(alone[0], lp1[1]) {
		t.Fatal("log-probs of a sequence differ alone vs in a batch")
	}
}

func TestArchConfigValidate(t *testing.T) {
	good := tinyArchs()["qwen2_tied_gqa"]
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mut  func(*ArchConfig)
		want string
	}{
		{func(c *ArchConfig) { c.Arch = "gpt_neox" }, `architecture "gpt_neox" not supported`},
		{func(c *ArchConfig) { c.KVHeads = 3 }, "heads 4 not divisible by kv_heads 3"},
		{func(c *ArchConfig) { c.HeadDim = 5 }, "head_dim 5 must be even"},
		{func(c *ArchConfig) { c.QKVBias = false }, "qwen2 has qkv_bias=true"},
		{func(c *ArchConfig) { c.QKNorm = true }, "qwen2 has qk_norm=false"},
		{func(c *ArchConfig) { c.RopeTheta = math.NaN() }, "rope_theta NaN"},
		{func(c *ArchConfig) { c.Vocab = 1 << 23 }, "vocab 8388608 out of range"},
		{func(c *ArchConfig) { c.Hidden = 1 << 14; c.Intermediate = 1 << 17; c.Layers = 256 }, "parameters exceed the limit"},
	} {
		c := good
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error containing %q, got %v", tc.want, err)
		}
	}
	// Names and shapes of the Hugging Face layout.
	q3 := tinyArchs()["qwen3_untied_hd6_bias"]
	specs := map[string][]int{}
	for _, s := range q3.TensorSpecs() {
		specs[s.Name] = s.Shape
	}
	for name, shape := range map[string][]int{
		"model.embed_tokens.weight":                      {40, 16},
		"model.layers.1.self_attn.q_proj.weight":         {24, 16},
		"model.layers.1.self_attn.k_proj.bias":           {6},
		"model.layers.0.self_attn.o_proj.weight":         {16, 24},
		"model.layers.0.self_attn.o_proj.bias":           {16},
		"model.layers.0.self_attn.q_norm.weight":         {6},
		"model.layers.0.mlp.down_proj.weight":            {16, 20},
		"model.layers.1.post_attention_layernorm.weight": {16},
		"lm_head.weight":                                 {40, 16},
	} {
		if !slices.Equal(specs[name], shape) {
			t.Errorf("%s: shape %v, want %v", name, specs[name], shape)
		}
	}
	if _, ok := specs["lm_head.weight"]; ok && q3.Tie {
		t.Error("tied model lists lm_head.weight")
	}
	if len(specs) != 1+2*15+1+1 {
		t.Errorf("%d tensors, want %d", len(specs), 1+2*15+1+1)
	}
	// NewLLM asks for every tensor by name and reports the one get refuses.
	_, err := NewLLM(q3, func(name string, dst []float32) error {
		if name == "model.layers.1.mlp.up_proj.weight" {
			return errTest
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "model.layers.1.mlp.up_proj.weight [20 16]") {
		t.Errorf("NewLLM error %v does not name the tensor", err)
	}
}

var errTest = &testErr{}

type testErr struct{}

func (*testErr) Error() string { return "not in the checkpoint" }

func TestLLMInputErrors(t *testing.T) {
	m, err := InitLLM(tinyArchs()["llama_untied"], 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		seqs []Sequence
		want string
	}{
		{[]Sequence{{Prompt: []int32{1}, Response: []int32{30}}}, "token 30 out of range [0,30)"},
		{[]Sequence{{Prompt: nil, Response: []int32{3}}}, "empty prompt"},
		{[]Sequence{{Prompt: make([]int32, 60), Response: make([]int32, 5)}}, "length 65 exceeds context 64"},
	} {
		if _, err := m.Forward(tc.seqs, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
	p, err := m.Forward([]Sequence{{Prompt: []int32{1}, Response: []int32{2, 3}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Backward([][]float32{{1}}, nil, m.NewGrads()); err == nil {
		t.Error("Backward accepted a dLogProb of the wrong shape")
	}
}

// TestLLMAdamW: one step moves every tensor with a gradient, decays only
// the linear weights, and refuses the grads of another model.
func TestLLMAdamW(t *testing.T) {
	c := tinyArchs()["qwen2_tied_gqa"]
	m, err := InitLLM(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	before := slices.Clone(m.buf)
	o := NewLLMAdamW(m, AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.5})
	g := m.NewGrads() // zero gradients: only weight decay moves parameters
	if err := o.StepLLM(g); err != nil {
		t.Fatal(err)
	}
	off := 0
	for _, p := range m.Params() {
		moved := !slices.Equal(p.Data, before[off:off+len(p.Data)])
		off += len(p.Data)
		if moved != p.Decay {
			t.Errorf("%s: moved %v, decay %v", p.Name, moved, p.Decay)
		}
	}
	other, _ := InitLLM(tinyArchs()["llama_untied"], 1)
	if err := o.StepLLM(other.NewGrads()); err == nil {
		t.Error("StepLLM accepted another model's grads")
	}
	if err := o.Step(nil); err == nil {
		t.Error("Step accepted on an LLM optimizer")
	}
}

// TestLinearTSameBits: the transposed path of linear gives the bits of the
// direct GEMM, with and without a bias.
func TestLinearTSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	const in, out, n = 600, 70, 5
	x, W, b := fill(n*in), fill(out*in), fill(out)
	m := &LLM{gemm: DefaultGEMM}
	for _, bias := range [][]float32{nil, b} {
		want := make([]float32, n*out)
		beta := float32(0)
		if bias != nil {
			beta = 1
			for i := 0; i < n; i++ {
				copy(want[i*out:], bias)
			}
		}
		DefaultGEMM.Sgemm(false, true, n, out, in, 1, x, in, W, in, beta, want, out)
		got := make([]float32, n*out)
		m.linear(x, n, in, weight{f: W}, bias, out, got)
		if !slices.Equal(got, want) {
			t.Fatalf("bias %v: transposed linear differs from the direct GEMM", bias != nil)
		}
	}
}

// Gradients of two passes accumulate: Backward twice equals twice one
// Backward (to float32 rounding of the sums), and Add/Scale agree.
func TestLLMGradsAccumulate(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	m, err := InitLLM(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 3, 0.3)
	r := rand.New(rand.NewPCG(8, 8))
	seqs := archSeqs(c.Vocab, r, [2]int{4, 5})
	dlp, dent := randGrads(seqs, r)
	p, err := m.Forward(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	one, two := m.NewGrads(), m.NewGrads()
	if err := p.Backward(dlp, dent, one); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := p.Backward(dlp, dent, two); err != nil {
			t.Fatal(err)
		}
	}
	sum := m.NewGrads()
	if err := sum.Add(one); err != nil {
		t.Fatal(err)
	}
	sum.Scale(2)
	if one.Norm() == 0 {
		t.Fatal("zero gradient")
	}
	for i, v := range sum.buf {
		if math.Abs(float64(v-two.buf[i])) > 1e-5*(math.Abs(float64(v))+1e-3) {
			t.Fatalf("element %d: two Backward calls give %v, twice one gives %v", i, two.buf[i], v)
		}
	}
	if math.Abs(two.Norm()-2*one.Norm()) > 1e-6*two.Norm() {
		t.Fatalf("norm %v vs 2×%v", two.Norm(), one.Norm())
	}
	other, _ := InitLLM(tinyArchs()["llama_untied"], 1)
	if err := sum.Add(other.NewGrads()); err == nil {
		t.Fatal("Add accepted grads of another config")
	}
}
