package engine

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// tinyLoRA is a LoRA of rank 3 and scale 5/3 over base on targets (all when nil), with B moved
// away from 0 so that every module changes the output and every A gets a gradient.
func tinyLoRA(t *testing.T, base *model.LLM, targets []string) *model.LoRA {
	t.Helper()
	l, err := model.NewLoRA(base, model.LoRAConfig{R: 3, Alpha: 5, Targets: targets}, 21)
	if err != nil {
		t.Fatal(err)
	}
	perturbB(l, 22)
	return l
}

// perturbB draws every B of l from N(0, 0.3²).
func perturbB(l *model.LoRA, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 23))
	for _, p := range l.Params() {
		if strings.HasSuffix(p.Name, ".lora_B.weight") {
			for i := range p.Data {
				p.Data[i] = float32(0.3 * r.NormFloat64())
			}
		}
	}
}

// loraDiffs are the worst differences between the GPU engine and model.LoRA: log-probs and
// entropies absolute, gradients relative to each tensor's largest |gradient|.
type loraDiffs struct{ logp, ent, grad float64 }

// compareLoRA runs l's forward and backward (a loss with log-prob and entropy terms) on dev
// and on the CPU engine; tune, when not nil, alters the device trainer before its Forward.
func compareLoRA(t *testing.T, dev Device, l *model.LoRA, seqs []model.Sequence, tune func(*LoRATrainer)) loraDiffs {
	t.Helper()
	const temp = 0.8
	cp, err := l.TrainForward(seqs, temp)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewLoRA(dev, l)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tune != nil {
		tune(tr)
	}
	gp, err := tr.Forward(l, seqs, temp)
	if err != nil {
		t.Fatal(err)
	}
	var d loraDiffs
	d.logp = worstAbs(t, "log-probs", gp.LogProbs(), cp.LogProbs())
	d.ent = worstAbs(t, "entropies", gp.Entropy(), cp.Entropy())
	r := rand.New(rand.NewPCG(10, 11))
	dlp, dent := cp.LogProbs(), cp.Entropy()
	for i := range dlp {
		for j := range dlp[i] {
			dlp[i][j], dent[i][j] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
	}
	want, got := l.NewGradBuf(), l.NewGradBuf().(*model.LoRAGrads)
	if err := cp.Backward(dlp, dent, want); err != nil {
		t.Fatal(err)
	}
	if err := gp.Backward(dlp, dent, got); err != nil {
		t.Fatal(err)
	}
	off := 0
	for _, p := range l.Params() {
		w, g := want.Flat()[off:off+len(p.Data)], got.Flat()[off:off+len(p.Data)]
		off += len(p.Data)
		scale := 0.0
		for _, v := range w {
			scale = max(scale, math.Abs(float64(v)))
		}
		if scale == 0 {
			t.Fatalf("%s: zero CPU gradient (the test needs every tensor to get one)", p.Name)
		}
		for j := range w {
			d.grad = max(d.grad, math.Abs(float64(g[j]-w[j]))/scale)
		}
	}
	return d
}

// worstAbs is the largest |got − want| (NaN when the shapes differ or a value is NaN).
func worstAbs(t *testing.T, what string, got, want [][]float32) float64 {
	t.Helper()
	w := 0.0
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s[%d]: %d values, CPU %d", what, i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			d := math.Abs(float64(got[i][j] - want[i][j]))
			if math.IsNaN(d) {
				return d
			}
			w = max(w, d)
		}
	}
	return w
}

// checkLoRA is compareLoRA on seqs (tinySeqs when nil), the head in chunks of headRows scored
// rows and attention in blocks of as many query rows (0: the defaults), within the tolerances
// of compareLLM.
func checkLoRA(t *testing.T, dev Device, l *model.LoRA, seqs []model.Sequence, headRows int) {
	t.Helper()
	if seqs == nil {
		seqs = tinySeqs
	}
	d := compareLoRA(t, dev, l, seqs, func(tr *LoRATrainer) { tr.lt.t.headRows, tr.lt.attnRows = headRows, headRows })
	t.Logf("worst |diff|: log-probs %.3g, entropies %.3g; gradients %d tensors, worst |diff|/max|grad| %.3g", d.logp, d.ent, len(l.Params()), d.grad)
	if !(d.logp <= 1e-4 && d.ent <= 1e-4 && d.grad <= 1e-4) {
		t.Fatalf("GPU engine differs from model.LoRA: %+v (tolerance 1e-4)", d)
	}
}

// TestLoRAMatchesCPU: the GPU engine's LoRA passes on the interpreter against model.LoRA, on
// Qwen3 (q/k norms, untied head) and Qwen2 (q/k/v biases, tied head), with every target and
// with a subset (k and v of the fused q|k|v, up of gate|up, and down); -head3 with the output
// head in chunks of 3 scored rows and attention in blocks of 3 query rows.
func TestLoRAMatchesCPU(t *testing.T) {
	dev := interp(t)
	q3, q2 := tinyLLM(t, "qwen3", false), tinyLLM(t, "qwen2", true)
	t.Run("qwen3-all", func(t *testing.T) { checkLoRA(t, dev, tinyLoRA(t, q3, nil), nil, 0) })
	t.Run("qwen2-all", func(t *testing.T) { checkLoRA(t, dev, tinyLoRA(t, q2, nil), nil, 0) })
	t.Run("qwen3-subset", func(t *testing.T) {
		checkLoRA(t, dev, tinyLoRA(t, q3, []string{"k_proj", "v_proj", "up_proj", "down_proj"}), nil, 0)
	})
	t.Run("qwen2-all-head3", func(t *testing.T) { checkLoRA(t, dev, tinyLoRA(t, q2, nil), nil, 3) })
}

// TestGPULoRAMatchesCPU is TestLoRAMatchesCPU on the GPU (gpu/devicecheck.sh runs it), then
// at TestGPULLMMatchesCPU's mid shape (head dim 64, 4 query heads a kv head, sequences past
// 128 tokens, the head in chunks of 64 scored rows, attention in blocks of 64), where the adapter's GEMMs span several
// tiles.
func TestGPULoRAMatchesCPU(t *testing.T) {
	d := gpuDevice(t)
	q3, q2 := tinyLLM(t, "qwen3", false), tinyLLM(t, "qwen2", true)
	t.Run("qwen3-tiny", func(t *testing.T) { checkLoRA(t, d, tinyLoRA(t, q3, nil), nil, 0) })
	t.Run("qwen2-tiny", func(t *testing.T) { checkLoRA(t, d, tinyLoRA(t, q2, []string{"v_proj", "gate_proj"}), nil, 0) })
	mid := model.ArchConfig{Hidden: 128, Layers: 3, Heads: 8, KVHeads: 2, HeadDim: 64, Intermediate: 352, Vocab: 1000, Context: 512}
	t.Run("qwen3-mid", func(t *testing.T) {
		checkLoRA(t, d, tinyLoRA(t, randLLM(t, "qwen3", mid), nil), long(mid.Vocab, [2]int{100, 160}, [2]int{1, 200}, [2]int{5, 0}, [2]int{30, 40}), 64)
	})
}

// TestLoRAScaleMatters: with the adapter's scale off by a factor of 2 on the device, the
// comparison of TestLoRAMatchesCPU fails by far (it would not catch a wrong scale otherwise).
func TestLoRAScaleMatters(t *testing.T) {
	l := tinyLoRA(t, tinyLLM(t, "qwen3", false), nil)
	d := compareLoRA(t, interp(t), l, tinySeqs, func(tr *LoRATrainer) { tr.ad.scale *= 2 })
	t.Logf("with twice the scale: %+v", d)
	if !(d.logp > 1e-2 && d.grad > 1e-2) {
		t.Fatalf("a wrong scale went unnoticed: %+v", d)
	}
}

// TestLoRAUpdates: after a change of B on the host and MarkDirty the device scores with the new
// adapter; without MarkDirty it keeps the old one (the base is never uploaded again).
func TestLoRAUpdates(t *testing.T) {
	l := tinyLoRA(t, tinyLLM(t, "qwen2", true), []string{"q_proj", "o_proj"})
	tr, err := NewLoRA(interp(t), l)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	score := func() [][]float32 {
		t.Helper()
		p, err := tr.Forward(l, tinySeqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		return p.LogProbs()
	}
	before := score()
	perturbB(l, 99)
	if d := worstAbs(t, "stale", score(), before); d != 0 {
		t.Fatalf("the device's adapter changed without MarkDirty (%.3g)", d)
	}
	tr.MarkDirty()
	want, _, err := l.Score(tinySeqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := worstAbs(t, "updated", score(), want); !(d <= 1e-4) {
		t.Fatalf("after MarkDirty the log-probs differ from the CPU engine's by %.3g", d)
	}
}

// TestLoRARefuses: dropout, gradients of another shape, a stale pass and another layout are
// errors, not wrong results.
func TestLoRARefuses(t *testing.T) {
	dev := interp(t)
	base := tinyLLM(t, "qwen3", false)
	drop, err := model.NewLoRA(base, model.LoRAConfig{R: 2, Alpha: 4, Dropout: 0.1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewLoRA(dev, drop); err == nil || !strings.Contains(err.Error(), "dropout") {
		t.Errorf("NewLoRA with dropout: %v, want a dropout error", err)
	}
	l := tinyLoRA(t, base, []string{"q_proj"})
	tr, err := NewLoRA(dev, l)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	seqs := []model.Sequence{{Prompt: []int32{1, 2}, Response: []int32{3}}}
	p1, err := tr.Forward(l, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	dlp := [][]float32{{1}}
	other := tinyLoRA(t, base, []string{"v_proj", "o_proj"})
	if err := p1.Backward(dlp, nil, other.NewGradBuf().(*model.LoRAGrads)); err == nil {
		t.Error("Backward accepted the gradients of another adapter layout")
	}
	if err := p1.LLMPass.Backward(dlp, nil, base.NewGrads()); err == nil {
		t.Error("a LoRA pass gave base gradients")
	}
	if _, err := tr.Forward(other, seqs, 1); err == nil {
		t.Error("Forward accepted an adapter of another layout")
	}
	if _, err := tr.Forward(l, seqs, 1); err != nil {
		t.Fatal(err)
	}
	if err := p1.Backward(dlp, nil, l.NewGradBuf().(*model.LoRAGrads)); err == nil {
		t.Error("Backward ran on a stale pass")
	}
}

// TestLoRANoBaseGradients counts the backward's launches: a LoRA pass launches no norm, bias or
// embedding gradient kernel, and its GEMMs are the LLM's minus the base's weight gradients
// (the head and four a layer) plus four a module (u·B-side, dB, dA and the input gradient).
func TestLoRANoBaseGradients(t *testing.T) {
	base := tinyLLM(t, "qwen2", false) // biases and an untied head: every kind of base gradient
	l := tinyLoRA(t, base, []string{"q_proj", "v_proj", "up_proj"})
	seqs := []model.Sequence{{Prompt: []int32{1, 2, 3}, Response: []int32{4, 5}}}
	dlp := [][]float32{{1, -1}}
	backward := func(lora bool) map[string]int {
		t.Helper()
		dev := &countingDevice{Device: interp(t), launches: map[string]int{}}
		var err error
		if lora {
			tr, e := NewLoRA(dev, l)
			if e != nil {
				t.Fatal(e)
			}
			defer tr.Close()
			p, e := tr.Forward(l, seqs, 1)
			if e != nil {
				t.Fatal(e)
			}
			clear(dev.launches)
			err = p.Backward(dlp, nil, l.NewGradBuf().(*model.LoRAGrads))
		} else {
			lt, e := NewLLM(dev, base)
			if e != nil {
				t.Fatal(e)
			}
			defer lt.Close()
			p, e := lt.Forward(base, seqs, 1)
			if e != nil {
				t.Fatal(e)
			}
			clear(dev.launches)
			err = p.Backward(dlp, nil, base.NewGrads())
		}
		if err != nil {
			t.Fatal(err)
		}
		return dev.launches
	}
	full, lora := backward(false), backward(true)
	gemms := func(n map[string]int) int {
		s := 0
		for name, c := range n {
			if strings.HasPrefix(name, "gemm") && !strings.Contains(name, "batched") {
				s += c
			}
		}
		return s
	}
	for _, k := range []string{"rms_dw_part", "colsum_part", "csr_rows_add"} {
		if full[k] == 0 {
			t.Fatalf("the LLM's backward launched no %s: the test no longer sees base gradients", k)
		}
		if lora[k] != 0 {
			t.Errorf("the LoRA backward launched %s %d times", k, lora[k])
		}
	}
	layers, mods := base.Config().Layers, len(l.Params())/2
	if want := gemms(full) - (1 + 4*layers) + 4*mods; gemms(lora) != want {
		t.Errorf("LoRA backward: %d GEMM launches, want %d (LLM %d)", gemms(lora), want, gemms(full))
	}
}
