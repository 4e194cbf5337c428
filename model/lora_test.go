package model

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// randomLoRA returns an adapter of a randomized base with B drawn away from 0, so that every
// path through A and B carries gradient.
func randomLoRA(t testing.TB, c ArchConfig, cfg LoRAConfig, seed uint64) *LoRA {
	t.Helper()
	m, err := InitLLM(c, seed)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, seed+1, 0.3)
	l, err := NewLoRA(m, cfg, seed+2)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 99))
	for _, p := range l.Params() {
		if strings.HasSuffix(p.Name, "lora_B.weight") {
			for j := range p.Data {
				p.Data[j] = float32(r.NormFloat64() * 0.3)
			}
		}
	}
	return l
}

func loraLoss(t testing.TB, l *LoRA, seqs []Sequence, temp float32, dropSeed uint64, dlp, dent [][]float32) float64 {
	p, err := l.trainForward(seqs, temp, dropSeed)
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

// TestLoRAGradientCheck compares Backward's dA and dB with fourth-order central finite
// differences of the float32 forward on sampled elements of every A and B, for Qwen2 (q/k/v
// biases, GQA, tied head) and Qwen3 (q/k norms, head_dim ≠ hidden/heads), with every target and
// with a subset, and with dropout (the same masks in every forward of the check).
func TestLoRAGradientCheck(t *testing.T) {
	archs := tinyArchs()
	for _, tc := range []struct {
		name string
		arch string
		cfg  LoRAConfig
		drop uint64
	}{
		{"qwen2_all", "qwen2_tied_gqa", LoRAConfig{R: 3, Alpha: 6}, 0},
		{"qwen3_all", "qwen3_untied_hd6_bias", LoRAConfig{R: 2, Alpha: 3}, 0},
		{"qwen3_subset", "qwen3_untied_hd6_bias", LoRAConfig{R: 4, Alpha: 4, Targets: []string{"up_proj", "k_proj", "o_proj"}}, 0},
		{"qwen2_subset_dropout", "qwen2_tied_gqa", LoRAConfig{R: 2, Alpha: 4, Dropout: 0.3, Targets: []string{"v_proj", "gate_proj", "down_proj", "q_proj"}}, 77},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := archs[tc.arch]
			l := randomLoRA(t, c, tc.cfg, 4)
			r := rand.New(rand.NewPCG(5, 5))
			seqs := archSeqs(c.Vocab, r, [2]int{3, 4}, [2]int{1, 6}, [2]int{5, 1})
			dlp, dent := randGrads(seqs, r)
			const temp = 0.8
			p, err := l.trainForward(seqs, temp, tc.drop)
			if err != nil {
				t.Fatal(err)
			}
			g := l.NewGradBuf()
			if err := p.Backward(dlp, dent, g); err != nil {
				t.Fatal(err)
			}
			worst, off := 0.0, 0
			for _, prm := range l.Params() {
				gr := g.Flat()[off : off+len(prm.Data)]
				off += len(prm.Data)
				for s := 0; s < 6; s++ {
					j := r.IntN(len(prm.Data))
					orig := prm.Data[j]
					const h = 1e-2
					at := func(d float64) float64 {
						prm.Data[j] = float32(float64(orig) + d)
						return loraLoss(t, l, seqs, temp, tc.drop, dlp, dent)
					}
					num := (8*(at(h)-at(-h)) - (at(2*h) - at(-2*h))) / (12 * h)
					prm.Data[j] = orig
					ana := float64(gr[j])
					e := math.Abs(num-ana) / (math.Max(math.Abs(num), math.Abs(ana)) + 5e-2)
					worst = math.Max(worst, e)
					if e > 1e-2 {
						t.Errorf("%s[%d]: numeric %.6g analytic %.6g rel err %.3g", prm.Name, j, num, ana, e)
					}
				}
			}
			if off != len(g.Flat()) {
				t.Fatalf("params cover %d of %d gradients", off, len(g.Flat()))
			}
			t.Logf("worst relative error over A and B: %.3e", worst)
		})
	}
}

// TestLoRAInitIsBase: at init B = 0 and A lies in PEFT's kaiming-uniform bound, so the
// adapted model scores the base's bits; the same seed gives the same A, another seed another.
func TestLoRAInitIsBase(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	m, err := InitLLM(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 2, 0.3)
	l, err := NewLoRA(m, LoRAConfig{R: 4, Alpha: 8}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Params() {
		bound := float32(1 / math.Sqrt(float64(p.Shape[1])))
		isA := strings.HasSuffix(p.Name, ".lora_A.weight")
		var maxAbs float32
		for _, v := range p.Data {
			maxAbs = max(maxAbs, float32(math.Abs(float64(v))))
		}
		if isA && (maxAbs > bound || maxAbs < bound/2) {
			t.Errorf("%s: max |A| %v, want within (bound/2, bound], bound %v", p.Name, maxAbs, bound)
		}
		if !isA && maxAbs != 0 {
			t.Errorf("%s: B is not 0 at init", p.Name)
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	seqs := archSeqs(c.Vocab, r, [2]int{4, 6}, [2]int{2, 3})
	want, wantE, err := m.Score(seqs, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	got, gotE, err := l.Score(seqs, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.TrainForward(seqs, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) || !slices.Equal(gotE[i], wantE[i]) || !slices.Equal(p.LogProbs()[i], want[i]) {
			t.Fatalf("sequence %d: adapter at init scores %v, base %v", i, got[i], want[i])
		}
	}
	same, _ := NewLoRA(m, LoRAConfig{R: 4, Alpha: 8}, 3)
	other, _ := NewLoRA(m, LoRAConfig{R: 4, Alpha: 8}, 4)
	if !slices.Equal(same.buf, l.buf) || slices.Equal(other.buf, l.buf) {
		t.Fatal("A is not a function of the seed")
	}
}

// TestLoRAMergedAndSample: the merged model scores within 1e-5 of the adapter; sampling with
// the KV cache gives the tokens of the recompute; the base is untouched by either.
func TestLoRAMergedAndSample(t *testing.T) {
	for _, arch := range []string{"qwen2_tied_gqa", "qwen3_untied_hd6_bias"} {
		t.Run(arch, func(t *testing.T) {
			c := tinyArchs()[arch]
			l := randomLoRA(t, c, LoRAConfig{R: 3, Alpha: 5, Targets: []string{"q_proj", "v_proj", "o_proj", "up_proj", "down_proj"}}, 6)
			before := slices.Clone(l.base.buf)
			mg, err := l.Merged()
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(mg.buf, before) {
				t.Fatal("Merged did not change the weights")
			}
			r := rand.New(rand.NewPCG(2, 2))
			seqs := archSeqs(c.Vocab, r, [2]int{7, 9}, [2]int{1, 4}, [2]int{3, 3})
			lpL, _, err := l.Score(seqs, 1)
			if err != nil {
				t.Fatal(err)
			}
			lpM, _, err := mg.Score(seqs, 1)
			if err != nil {
				t.Fatal(err)
			}
			lpB, _, err := l.base.Score(seqs, 1)
			if err != nil {
				t.Fatal(err)
			}
			var dM, dB float64
			for i := range lpL {
				for j := range lpL[i] {
					dM = max(dM, math.Abs(float64(lpL[i][j]-lpM[i][j])))
					dB = max(dB, math.Abs(float64(lpL[i][j]-lpB[i][j])))
				}
			}
			if dM > 1e-5 || dB < 1e-3 {
				t.Fatalf("|adapter − merged| %.3g (want ≤ 1e-5), |adapter − base| %.3g (want a real change)", dM, dB)
			}
			reqs := []SampleRequest{{Prompt: []int32{1, 2, 3}, Seed: 1}, {Prompt: []int32{7}, Seed: 2},
				{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, Seed: 4}}
			opts := SampleOptions{Temperature: 0.9, TopP: 0.95, MaxTokens: 12}
			a, err := l.Sample(context.Background(), reqs, opts)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := l.view(false, 0)
			b, err := v.SampleNoCache(context.Background(), reqs, opts)
			if err != nil {
				t.Fatal(err)
			}
			mgS, err := mg.Sample(context.Background(), reqs, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if !slices.Equal(a[i].Tokens, b[i].Tokens) || !slices.Equal(a[i].Tokens, mgS[i].Tokens) {
					t.Fatalf("request %d: cache %v, recompute %v, merged %v", i, a[i].Tokens, b[i].Tokens, mgS[i].Tokens)
				}
				for j := range a[i].LogProbs {
					if d := math.Abs(float64(a[i].LogProbs[j] - b[i].LogProbs[j])); d > 1e-4 {
						t.Errorf("request %d token %d: log-prob %v vs %v", i, j, a[i].LogProbs[j], b[i].LogProbs[j])
					}
				}
			}
			if !slices.Equal(l.base.buf, before) {
				t.Fatal("the base changed")
			}
		})
	}
}

// TestLoRATrainStep: the gradient holds A and B alone (r·(in+out) per module, worked from the
// shapes); a step moves A and B and leaves every base weight's bits; the optimizer state
// round-trips by PEFT name; gradients of another model are refused.
func TestLoRATrainStep(t *testing.T) {
	c := tinyArchs()["qwen2_tied_gqa"] // D 16, 4 heads × 4, 2 KV heads, F 24, 2 layers
	l := randomLoRA(t, c, LoRAConfig{R: 2, Alpha: 4, Targets: []string{"k_proj", "down_proj"}}, 8)
	// k_proj: in 16, out 8; down_proj: in 24, out 16.
	if want := 2 * 2 * ((16 + 8) + (24 + 16)); l.NumParams() != want || len(l.NewGradBuf().Flat()) != want {
		t.Fatalf("%d parameters, %d gradients, want %d", l.NumParams(), len(l.NewGradBuf().Flat()), want)
	}
	if got := l.Modules(); !slices.Equal(got, []string{"model.layers.0.self_attn.k_proj", "model.layers.0.mlp.down_proj",
		"model.layers.1.self_attn.k_proj", "model.layers.1.mlp.down_proj"}) {
		t.Fatalf("modules %v", got)
	}
	if n := l.Params()[0].Name; n != "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight" {
		t.Fatalf("first parameter %s", n)
	}
	base := slices.Clone(l.base.buf)
	adapter := slices.Clone(l.buf)
	r := rand.New(rand.NewPCG(3, 3))
	seqs := archSeqs(c.Vocab, r, [2]int{4, 5}, [2]int{2, 3})
	dlp, dent := randGrads(seqs, r)
	var tr Trainable = l
	p, err := tr.TrainForward(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := tr.NewGradBuf()
	if err := p.Backward(dlp, dent, g); err != nil {
		t.Fatal(err)
	}
	if g.Norm() == 0 {
		t.Fatal("zero gradient")
	}
	if err := p.Backward(dlp, dent, l.base.NewGradBuf()); err == nil {
		t.Fatal("Backward accepted the base's gradients")
	}
	opt := tr.NewOptimizer(DefaultAdamWConfig())
	if err := opt.Apply(g); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.base.buf, base) {
		t.Fatal("a training step changed the base")
	}
	off := 0
	for _, prm := range l.Params() {
		if slices.Equal(prm.Data, adapter[off:off+len(prm.Data)]) {
			t.Errorf("%s did not move", prm.Name)
		}
		off += len(prm.Data)
	}
	var st bytes.Buffer
	if err := opt.SaveState(&st); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(st.Bytes(), []byte("m.base_model.model.model.layers.1.mlp.down_proj.lora_B.weight")) {
		t.Fatal("optimizer state is not named by the PEFT tensor names")
	}
	o2 := l.NewOptimizer(DefaultAdamWConfig())
	if err := o2.LoadState(bytes.NewReader(st.Bytes()), int64(st.Len())); err != nil {
		t.Fatal(err)
	}
	m1, v1 := opt.Moments()
	m2, v2 := o2.Moments()
	if !slices.Equal(m1, m2) || !slices.Equal(v1, v2) || o2.Steps != 1 {
		t.Fatal("optimizer state did not round-trip")
	}
}

// TestLoRADropout: training forwards draw new masks each pass (and differ from the no-dropout
// score), Score and Sample use none, and the masks follow (seed, pass count).
func TestLoRADropout(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	l := randomLoRA(t, c, LoRAConfig{R: 4, Alpha: 8, Dropout: 0.5}, 9)
	r := rand.New(rand.NewPCG(4, 4))
	seqs := archSeqs(c.Vocab, r, [2]int{5, 6})
	lp := func() []float32 {
		p, err := l.TrainForward(seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		return p.LogProbs()[0]
	}
	a, b := lp(), lp()
	s1, _, _ := l.Score(seqs, 1)
	s2, _, _ := l.Score(seqs, 1)
	if slices.Equal(a, b) || slices.Equal(a, s1[0]) || !slices.Equal(s1[0], s2[0]) {
		t.Fatalf("dropout: passes %v %v, scores %v %v", a, b, s1[0], s2[0])
	}
	if l.TrainingPasses() != 2 {
		t.Fatalf("%d training passes counted", l.TrainingPasses())
	}
	l.SetTrainingPasses(1)
	if !slices.Equal(lp(), b) {
		t.Fatal("the second pass's masks are not a function of (seed, count)")
	}
	l.SetTrainingPasses(1)
	l.SetDropoutSeed(123)
	if slices.Equal(lp(), b) {
		t.Fatal("another dropout seed drew the same masks")
	}
	noDrop := randomLoRA(t, c, LoRAConfig{R: 4, Alpha: 8}, 9)
	p, err := noDrop.TrainForward(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := noDrop.Score(seqs, 1)
	if !slices.Equal(p.LogProbs()[0], s[0]) {
		t.Fatal("without dropout the training forward differs from Score")
	}
}

// TestLoRAConfigErrors: a bad config is one line naming every problem.
func TestLoRAConfigErrors(t *testing.T) {
	m, err := InitLLM(tinyArchs()["llama_untied"], 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewLoRA(m, LoRAConfig{R: 0, Alpha: math.NaN(), Dropout: 1, Targets: []string{"qkv", "o_proj", "o_proj"}}, 1)
	for _, want := range []string{"r 0 out of range", "alpha NaN", "dropout 1 out of range", `target "qkv" is not a linear layer`, `target "o_proj" named twice`} {
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("want one line containing %q, got %v", want, err)
		}
	}
	if _, err := NewLoRA(nil, LoRAConfig{R: 1, Alpha: 1}, 1); err == nil {
		t.Error("NewLoRA accepted no base")
	}
	l, err := NewLoRA(m, LoRAConfig{R: 1, Alpha: 1, Targets: []string{"down_proj", "q_proj"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Config().Targets; !slices.Equal(got, []string{"q_proj", "down_proj"}) {
		t.Errorf("targets %v, want LoRATargets order", got)
	}
}

// TestLoRADeterministic: with dropout, log-probs and gradients are the same bits on 1 and 4
// cores (the masks are hashes, not draws in scheduling order), and concurrent passes of one
// adapter do not interfere.
func TestLoRADeterministic(t *testing.T) {
	c := tinyArchs()["qwen3_untied_hd6_bias"]
	c.Hidden, c.Intermediate = 64, 96 // large enough for parallel splits
	l := randomLoRA(t, c, LoRAConfig{R: 4, Alpha: 8, Dropout: 0.2}, 11)
	r := rand.New(rand.NewPCG(4, 4))
	seqs := archSeqs(c.Vocab, r, [2]int{20, 30}, [2]int{3, 40})
	dlp, dent := randGrads(seqs, r)
	run := func(procs int) ([][]float32, []float32) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		p, err := l.trainForward(seqs, 1, 42)
		if err != nil {
			t.Fatal(err)
		}
		g := l.NewGradBuf()
		if err := p.Backward(dlp, dent, g); err != nil {
			t.Fatal(err)
		}
		return p.LogProbs(), g.Flat()
	}
	lp1, g1 := run(1)
	lp4, g4 := run(4)
	for i := range lp1 {
		if !slices.Equal(lp1[i], lp4[i]) {
			t.Fatalf("sequence %d: log-probs differ between 1 and 4 cores", i)
		}
	}
	if !slices.Equal(g1, g4) {
		t.Fatal("gradients differ between 1 and 4 cores")
	}
	var wg sync.WaitGroup
	gs := make([][]float32, 3)
	for i := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := l.trainForward(seqs, 1, 42)
			if err != nil {
				t.Error(err)
				return
			}
			g := l.NewGradBuf()
			if err := p.Backward(dlp, dent, g); err != nil {
				t.Error(err)
			}
			gs[i] = g.Flat()
			if _, _, err := l.Score(seqs, 1); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, g := range gs {
		if !slices.Equal(g, g1) {
			t.Fatalf("concurrent pass %d: gradients differ", i)
		}
	}
}
