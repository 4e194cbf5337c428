package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/gpu/internal/gemmtest"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
)

func interp(t testing.TB) *ir.Interp {
	t.Helper()
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	return ir.NewInterp(ks)
}

func testBatch(c model.Config, seed uint64, lens [][2]int) []model.Sequence {
	r := rand.New(rand.NewPCG(seed, 1))
	var seqs []model.Sequence
	for _, l := range lens {
		s := model.Sequence{Prompt: make([]int32, l[0]), Response: make([]int32, l[1])}
		for i := range s.Prompt {
			s.Prompt[i] = int32(r.IntN(c.Vocab))
		}
		for i := range s.Response {
			s.Response[i] = int32(r.IntN(c.Vocab))
		}
		seqs = append(seqs, s)
	}
	return seqs
}

// smallCase is interpCases[0]'s model and batch, the usual input of a single-pass test.
func smallCase(t testing.TB) (*model.Model, []model.Sequence) {
	t.Helper()
	tc := interpCases[0]
	m, err := model.New(tc.cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	return m, testBatch(tc.cfg, 9, tc.lens)
}

// passGrads runs Forward and Backward of seqs on a new Trainer on dev (after applying opts to
// it) with a gradient of 1 on every log-prob (and on every entropy when withEntropy), and
// returns the log-probs, flattened, and the gradients.
func passGrads(t testing.TB, dev Device, m *model.Model, seqs []model.Sequence, withEntropy bool, opts ...func(*Trainer)) ([]float32, *model.Grads) {
	t.Helper()
	tr, err := New(dev, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(tr)
	}
	defer tr.Close()
	p, err := tr.Forward(m, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	ones := func(v [][]float32) [][]float32 {
		for i := range v {
			for j := range v[i] {
				v[i][j] = 1
			}
		}
		return v
	}
	var dEnt [][]float32
	if withEntropy {
		dEnt = ones(p.Entropy())
	}
	g := m.NewGrads()
	if err := p.Backward(ones(p.LogProbs()), dEnt, g); err != nil {
		t.Fatal(err)
	}
	var lp []float32
	for _, r := range p.LogProbs() {
		lp = append(lp, r...)
	}
	return lp, g
}

// compareEngines runs the CPU engine and the GPU engine on dev with the same weights and
// batch and checks log-probs, entropies and gradients.
func compareEngines(t *testing.T, dev Device, c model.Config, lens [][2]int, withEntropy bool, headRows, attnRows int) {
	t.Helper()
	m, err := model.New(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	// Non-trivial LayerNorm and bias parameters, and weights 5× the init scale so that
	// attention maps are far from uniform and every path carries a visible gradient.
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range m.Params() {
		switch {
		case !p.Decay && len(p.Shape) == 1:
			for i := range p.Data {
				p.Data[i] += float32(0.1 * r.NormFloat64())
			}
		case p.Decay:
			for i := range p.Data {
				p.Data[i] *= 5
			}
		}
	}
	seqs := testBatch(c, 11, lens)
	const temp = 0.8
	cpu, err := m.Forward(seqs, temp)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(dev, m)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	}()
	tr.headRows, tr.attnRows = headRows, attnRows
	gp, err := tr.Forward(m, seqs, temp)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, a, b [][]float32, tol float64) {
		t.Helper()
		worst := 0.0
		for i := range a {
			if len(a[i]) != len(b[i]) {
				t.Fatalf("%s[%d]: %d vs %d tokens", what, i, len(a[i]), len(b[i]))
			}
			for j := range a[i] {
				worst = max(worst, math.Abs(float64(a[i][j]-b[i][j])))
			}
		}
		if worst > tol || math.IsNaN(worst) {
			t.Errorf("%s: max |cpu-gpu| = %.3g > %.3g", what, worst, tol)
		}
		t.Logf("%s: max |cpu-gpu| = %.3g", what, worst)
	}
	check("log-probs", cpu.LogProbs(), gp.LogProbs(), 2e-4)
	check("entropy", cpu.Entropy(), gp.Entropy(), 2e-4)
	dlp := make([][]float32, len(seqs))
	var dent [][]float32
	if withEntropy {
		dent = make([][]float32, len(seqs))
	}
	for i, s := range seqs {
		dlp[i] = make([]float32, len(s.Response))
		for j := range dlp[i] {
			dlp[i][j] = float32(r.NormFloat64())
		}
		if withEntropy {
			dent[i] = make([]float32, len(s.Response))
			for j := range dent[i] {
				dent[i][j] = float32(0.3 * r.NormFloat64())
			}
		}
	}
	gc, gg := m.NewGrads(), m.NewGrads()
	if err := cpu.Backward(dlp, dent, gc); err != nil {
		t.Fatal(err)
	}
	// Accumulation: two GPU backward calls with half the upstream gradient each.
	half := func(d [][]float32) [][]float32 {
		if d == nil {
			return nil
		}
		out := make([][]float32, len(d))
		for i := range d {
			out[i] = make([]float32, len(d[i]))
			for j, v := range d[i] {
				out[i][j] = v / 2
			}
		}
		return out
	}
	for k := 0; k < 2; k++ {
		if err := gp.Backward(half(dlp), half(dent), gg); err != nil {
			t.Fatal(err)
		}
	}
	// Per row of each weight matrix (a whole vector for 1-D tensors): the largest difference
	// relative to the row's largest gradient, so that small rows (e.g. the query and key
	// rows of qkv) are held to the same relative precision as large ones.
	worstRel := 0.0
	for i, p := range m.Params() {
		a, b := gc.Tensor(i), gg.Tensor(i)
		cols := len(a)
		if len(p.Shape) == 2 {
			cols = p.Shape[1]
		}
		for r := 0; r < len(a); r += cols {
			var scale, worst float64
			for j := r; j < r+cols; j++ {
				scale = max(scale, math.Abs(float64(a[j])))
				worst = max(worst, math.Abs(float64(a[j]-b[j])))
			}
			if scale < 1e-7 {
				continue // no gradient (an unused embedding row)
			}
			rel := worst / scale
			worstRel = max(worstRel, rel)
			if rel > gradTol || math.IsNaN(worst) {
				t.Errorf("grad %s row %d: max |cpu-gpu| = %.3g, max |cpu| %.3g (relative %.2g > %.2g)", p.Name, r/cols, worst, scale, rel, gradTol)
				return
			}
		}
	}
	t.Logf("gradients: max |cpu-gpu| / row max = %.3g", worstRel)
}

// gradTol bounds the per-row relative gradient difference between the engines.
const gradTol = 1e-3

var interpCases = []struct {
	name string
	cfg  model.Config
	lens [][2]int
	ent  bool
	head int // scored rows a head chunk (0: the default, one chunk here)
	attn int // query rows an attention block (0: AttnBlockRows, one block here)
}{
	{"tied", model.Config{Vocab: model.VocabSize, Context: 24, Dim: 16, Layers: 2, Heads: 2, FFMult: 2, TiedHead: true}, [][2]int{{3, 5}, {1, 1}, {4, 0}, {6, 9}}, false, 0, 0},
	{"untied-entropy", model.Config{Vocab: model.VocabSize + 3, Context: 80, Dim: 24, Layers: 1, Heads: 3, FFMult: 3}, [][2]int{{10, 60}, {2, 3}}, true, 0, 0},
	// 15 scored rows in head chunks of 4 that straddle the sequences.
	{"tied-entropy-head4", model.Config{Vocab: model.VocabSize, Context: 24, Dim: 16, Layers: 2, Heads: 2, FFMult: 2, TiedHead: true}, [][2]int{{3, 5}, {1, 1}, {4, 0}, {6, 9}}, true, 4, 0},
	// Attention in blocks of 3 query rows: sequences of 7, 1, 3 and 14 rows.
	{"tied-attn3", model.Config{Vocab: model.VocabSize, Context: 24, Dim: 16, Layers: 2, Heads: 2, FFMult: 2, TiedHead: true}, [][2]int{{3, 5}, {1, 1}, {4, 0}, {6, 9}}, true, 0, 3},
}

// TestInterpMatchesCPU runs the whole GPU engine on the ir interpreter: the kernels' math,
// the launch shapes and the host glue, against model.Model.
func TestInterpMatchesCPU(t *testing.T) {
	for _, tc := range interpCases {
		t.Run(tc.name, func(t *testing.T) { compareEngines(t, interp(t), tc.cfg, tc.lens, tc.ent, tc.head, tc.attn) })
	}
}

func TestStalePassAndValidation(t *testing.T) {
	c := interpCases[0].cfg
	m, err := model.New(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(interp(t), m)
	if err != nil {
		t.Fatal(err)
	}
	seqs := testBatch(c, 2, [][2]int{{2, 2}})
	p1, err := tr.Forward(m, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Forward(m, seqs, 1); err != nil {
		t.Fatal(err)
	}
	if err := p1.Backward([][]float32{{1, 1}}, nil, m.NewGrads()); err == nil {
		t.Error("Backward on a stale pass succeeded")
	}
	for _, bad := range [][]model.Sequence{
		{{Prompt: nil, Response: []int32{1}}},
		{{Prompt: []int32{int32(c.Vocab)}, Response: []int32{1}}},
		{{Prompt: make([]int32, c.Context), Response: []int32{1}}},
	} {
		if _, err := tr.Forward(m, bad, 1); err == nil {
			t.Errorf("Forward(%v) succeeded", bad)
		}
	}
	if _, err := tr.Forward(m, seqs, 0); err == nil {
		t.Error("temperature 0 accepted")
	}
	p, err := tr.Forward(m, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Backward([][]float32{{1}}, nil, m.NewGrads()); err == nil {
		t.Error("wrong dLogProb shape accepted")
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Forward(m, seqs, 1); err == nil {
		t.Error("Forward after Close succeeded")
	}
}

func TestCSR(t *testing.T) {
	ptr, idx := csr([]int32{2, 0, 2, 1, 2}, 4)
	if fmt.Sprint(ptr, idx) != "[0 1 2 5 5] [1 3 0 2 4]" {
		t.Errorf("csr = %v %v", ptr, idx)
	}
}

func TestAdamStep(t *testing.T) {
	in := interp(t)
	const n = 300
	p, g := make([]float32, n), make([]float32, n)
	for i := range p {
		p[i], g[i] = float32(i)/n, float32(math.Cos(float64(i)))
	}
	var bufs [4]ir.Ptr
	for i := range bufs {
		b, err := in.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		bufs[i] = b
	}
	if err := in.WriteF32(bufs[0], p); err != nil {
		t.Fatal(err)
	}
	if err := in.WriteF32(bufs[1], g); err != nil {
		t.Fatal(err)
	}
	for _, b := range bufs[2:] { // the moments start at zero (device memory starts undefined)
		if err := in.WriteF32(b, make([]float32, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := AdamStep(in, bufs[0], bufs[1], bufs[2], bufs[3], n, 0.99, 0.9, 0.999, 0.01, 1.2, 1e-8); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := in.ReadF32(got, bufs[0]); err != nil {
		t.Fatal(err)
	}
	for i := range p {
		// Every product is rounded by an explicit conversion, so that a compiler that fuses
		// a·b + c (arm64; amd64 with GOAMD64=v3) does not fuse the reference.
		b1, b2 := float32(0.9), float32(0.999)
		m := (1 - b1) * g[i]
		v := float32((1-b2)*g[i]) * g[i]
		den := float32(float32(math.Sqrt(float64(v)))*1.2) + 1e-8
		want := float32(p[i]*0.99) - float32(0.01*m)/den
		if math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("p[%d] = %v, want %v", i, got[i], want)
		}
	}
}

// TestBigGemmSameBits: a Trainer that uses the TileBig GEMMs wherever their padding allows
// (bigBlocks 1) computes the same bits as one that never does, and does launch them.
func TestBigGemmSameBits(t *testing.T) {
	checkBigGemmSameBits(t, interp(t), interp(t))
}

// checkBigGemmSameBits runs one pass with TileBig GEMMs on dev and one without on ref.
func checkBigGemmSameBits(t *testing.T, dev, ref Device) {
	c := model.Config{Vocab: model.VocabSize, Context: 160, Dim: 128, Layers: 1, Heads: 4, FFMult: 2, TiedHead: true}
	m, err := model.New(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	seqs := testBatch(c, 5, [][2]int{{64, 65}}) // 128 rows: one TileBig
	counter := &countingDevice{Device: dev, launches: map[string]int{}}
	lpBig, gBig := passGrads(t, counter, m, seqs, true, func(tr *Trainer) { tr.bigBlocks = 1 })
	lp, g := passGrads(t, ref, m, seqs, true, func(tr *Trainer) { tr.bigBlocks = 0 })
	big := 0
	for name, n := range counter.launches {
		if strings.HasSuffix(name, "_128") {
			big += n
		}
	}
	if big < 8 {
		t.Fatalf("only %d TileBig GEMM launches: %v", big, counter.launches)
	}
	for i := range lp {
		if math.Float32bits(lp[i]) != math.Float32bits(lpBig[i]) {
			t.Fatalf("log-prob %d: %v with TileBig GEMMs, %v without", i, lpBig[i], lp[i])
		}
	}
	for i, p := range m.Params() {
		a, b := g.Tensor(i), gBig.Tensor(i)
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("gradient of %s[%d]: %v with TileBig GEMMs, %v without", p.Name, j, b[j], a[j])
			}
		}
	}
	t.Logf("%d TileBig GEMM launches, same bits", big)
}

// TestSplitKGemm: a split-K GEMM (every transpose, beta 0 and 1, k not a multiple of the
// chunk) equals gonum's within float32 rounding and is the same bits run to run.
func TestSplitKGemm(t *testing.T) {
	c := model.Config{Vocab: model.VocabSize, Context: 16, Dim: 16, Layers: 1, Heads: 2, FFMult: 2, TiedHead: true}
	m0, err := model.New(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	dev := interp(t)
	tr, err := New(dev, m0)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.splitBlocks, tr.splitMinK = 1<<30, 16
	r := rand.New(rand.NewPCG(5, 6))
	randv := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	for _, v := range []struct{ ta, tb bool }{{true, false}, {false, false}, {false, true}} {
		for _, beta := range []float32{0, 1} {
			m, n, k := 37, 70, 203
			lo := gemmtest.For(v.ta, v.tb, m, n, k)
			lda, ldb, ldc := lo.Lda, lo.Ldb, lo.Ldc
			a, b, c := randv(lo.ARows*lda), randv(lo.BRows*ldb), randv(m*ldc)
			want := append([]float32(nil), c...)
			model.GonumGEMM{}.Sgemm(v.ta, v.tb, m, n, k, 1, a, lda, b, ldb, beta, want, ldc)
			l := tr.launcher()
			if s := l.splits(m, n, k); s < 2 {
				t.Fatalf("splits(%d, %d, %d) = %d: the test needs a split", m, n, k, s)
			}
			var runs [2][]float32
			for i := range runs {
				pa, pb, pc := l.keep(dev.Alloc(len(a))), l.keep(dev.Alloc(len(b))), l.keep(dev.Alloc(len(c)))
				for _, w := range []struct {
					p ir.Ptr
					v []float32
				}{{pa, a}, {pb, b}, {pc, c}} {
					if err := dev.WriteF32(w.p, w.v); err != nil {
						t.Fatal(err)
					}
				}
				l.gemmW(v.ta, v.tb, m, n, k, 1, pa, lda, pb, ldb, beta, pc, ldc)
				if l.err != nil {
					t.Fatal(l.err)
				}
				runs[i] = make([]float32, len(c))
				if err := dev.ReadF32(runs[i], pc); err != nil {
					t.Fatal(err)
				}
			}
			for i := range want {
				if math.Abs(float64(runs[0][i]-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("ta %v tb %v beta %v: c[%d] = %v, want %v", v.ta, v.tb, beta, i, runs[0][i], want[i])
				}
				if math.Float32bits(runs[0][i]) != math.Float32bits(runs[1][i]) {
					t.Fatalf("c[%d] differs between runs", i)
				}
			}
		}
	}
}

// TestSplitKPass: with every weight gradient split along k, a pass gives the same log-probs
// bit for bit (activation GEMMs are never split) and the same gradients within float32
// rounding, the same bits twice, and does run the split kernels.
func TestSplitKPass(t *testing.T) {
	m, seqs := smallCase(t)
	layers := interpCases[0].cfg.Layers
	split := func(tr *Trainer) { tr.splitBlocks, tr.splitMinK = 1<<30, 8 }
	counter := &countingDevice{Device: interp(t), launches: map[string]int{}}
	lpS, gS := passGrads(t, counter, m, seqs, true, split)
	_, gS2 := passGrads(t, interp(t), m, seqs, true, split)
	lp, g := passGrads(t, interp(t), m, seqs, true, func(tr *Trainer) { tr.splitBlocks = 0 })
	if n := counter.launches["splitk_sum"]; n < 4*layers { // the head's too when its k allows
		t.Fatalf("%d split-K sums for %d layers: %v", n, layers, counter.launches)
	}
	for i := range lp {
		if math.Float32bits(lp[i]) != math.Float32bits(lpS[i]) {
			t.Fatalf("log-prob %d: %v with split-K, %v without", i, lpS[i], lp[i])
		}
	}
	for i, p := range m.Params() {
		a, b, b2 := g.Tensor(i), gS.Tensor(i), gS2.Tensor(i)
		scale := 0.0
		for _, x := range a {
			scale = max(scale, math.Abs(float64(x)))
		}
		for j := range a {
			if math.Abs(float64(a[j]-b[j])) > 1e-5*(scale+1e-30) {
				t.Fatalf("gradient of %s[%d]: %v with split-K, %v without (scale %g)", p.Name, j, b[j], a[j], scale)
			}
			if math.Float32bits(b[j]) != math.Float32bits(b2[j]) {
				t.Fatalf("gradient of %s[%d] differs between split-K runs", p.Name, j)
			}
		}
	}
}

// boundedDevice is a Device that refuses allocations above max words (so that a test of a
// batch too large for the kernels does not allocate it on the interpreter).
type boundedDevice struct {
	Device
	max int
}

func (b boundedDevice) Alloc(words int) (ir.Ptr, error) {
	if words > b.max {
		return 0, fmt.Errorf("test device: refusing %d words", words)
	}
	return b.Device.Alloc(words)
}

// boundedTrainer is a Trainer for a new model of c on the interpreter behind a boundedDevice
// of 2^24 words, closed at the test's end.
func boundedTrainer(t *testing.T, c model.Config) (*Trainer, *model.Model) {
	t.Helper()
	m, err := model.New(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(boundedDevice{interp(t), 1 << 24}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr, m
}

// TestAttnBlocksPassSizeChecks: one sequence of 19,999 positions over 8 heads (3.2e9 words
// of whole attention maps) passes the size checks, as attention holds the maps of one block
// of AttnBlockRows query rows at a time; a block of every row is refused, before anything is
// allocated for it, naming the attention scratch and int32 indexing.
func TestAttnBlocksPassSizeChecks(t *testing.T) {
	c := model.Config{Vocab: model.VocabSize, Context: 20000, Dim: 8, Layers: 1, Heads: 8, FFMult: 1, TiedHead: true}
	tr, m := boundedTrainer(t, c)
	batch := testBatch(c, 1, [][2]int{{1, 19999}})
	if _, err := tr.newPass(m, batch, 1); err != nil {
		t.Fatalf("attention in blocks: %v", err)
	}
	tr.attnRows = 19999
	if _, err := tr.newPass(m, batch, 1); err == nil || !strings.Contains(err.Error(), "attention") || !strings.Contains(err.Error(), "int32") {
		t.Fatalf("one block of every row: %v, want a refusal naming the attention scratch and int32 indexing", err)
	}
}

// TestHeadChunksPassSizeChecks: 625 sequences of 64 scored tokens over a vocabulary of 65,535
// (2.6e9 words of logits for the whole batch) pass the size checks, as the head holds one
// chunk of HeadChunkRows rows at a time; a chunk of every scored row is refused naming the
// logits and int32 indexing.
func TestHeadChunksPassSizeChecks(t *testing.T) {
	c := model.Config{Vocab: 65535, Context: 128, Dim: 8, Layers: 1, Heads: 1, FFMult: 1, TiedHead: true}
	lens := make([][2]int, 625)
	for i := range lens {
		lens[i] = [2]int{1, 64}
	}
	tr, m := boundedTrainer(t, c)
	batch := testBatch(c, 1, lens)
	if _, err := tr.newPass(m, batch, 1); err != nil {
		t.Fatalf("chunked head: %v", err)
	}
	tr.headRows = 625 * 64
	if _, err := tr.newPass(m, batch, 1); err == nil || !strings.Contains(err.Error(), "logits") || !strings.Contains(err.Error(), "int32") {
		t.Fatalf("one chunk of every row: %v, want a refusal naming the logits and int32 indexing", err)
	}
}

// TestBufRefusesInt32Overflow: every device buffer goes through buf, which refuses one the
// kernels' int32 word indices cannot address, whatever Forward's own size checks list.
func TestBufRefusesInt32Overflow(t *testing.T) {
	tr, _ := boundedTrainer(t, interpCases[0].cfg)
	if _, err := tr.buf("huge", maxWords+1); err == nil || !strings.Contains(err.Error(), "huge needs") || !strings.Contains(err.Error(), "int32") {
		t.Fatalf("buf of %d words: %v, want a refusal naming it", maxWords+1, err)
	}
	if _, err := tr.buf("fits", 16); err != nil {
		t.Fatal(err)
	}
}

// TestSplitTablesDoNotAccumulate: passes of ever new token counts (as a learner's
// micro-batches have) keep only the current pass's split-K tables on the device, not one
// allocation per shape ever seen; Close frees everything.
func TestSplitTablesDoNotAccumulate(t *testing.T) {
	c := interpCases[0].cfg
	m, err := model.New(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	in := interp(t)
	tr, err := New(in, m)
	if err != nil {
		t.Fatal(err)
	}
	tr.splitBlocks, tr.splitMinK = 1<<30, 8
	others := -1 // live buffers that are not split-K tables: the same every pass
	for k := 0; k < 6; k++ {
		p, err := tr.Forward(m, testBatch(c, 1, [][2]int{{3, 14 + k}}), 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(p.LogProbs(), nil, m.NewGrads()); err != nil {
			t.Fatal(err)
		}
		if len(tr.splitTabs) == 0 {
			t.Fatal("no split-K GEMM ran: the test needs them")
		}
		for key := range tr.splitTabs {
			if key.k != p.n && key.k != p.m {
				t.Fatalf("pass %d (%d rows, %d scored): a split-K table for k = %d is still allocated", k, p.n, p.m, key.k)
			}
		}
		if n := in.Live() - len(tr.splitTabs); others < 0 {
			others = n
		} else if n != others {
			t.Fatalf("pass %d: %d live buffers besides the tables, %d after the first pass", k, n, others)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if n := in.Live(); n != 0 {
		t.Fatalf("%d buffers live after Close", n)
	}
}

// TestGradsOfAnotherConfigRefused: Backward and Grads.Read refuse a host gradient of a model
// with other layers or another head (same tensor 0): it was indexed past its end (a panic) or
// received other parameters' gradients (the one-layer ln_f gradient in the second layer's ln1).
func TestGradsOfAnotherConfigRefused(t *testing.T) {
	c := interpCases[0].cfg // 2 layers, tied head
	seqs := testBatch(c, 1, [][2]int{{3, 4}})
	others := func(c model.Config) []model.Config {
		fewer, more, untied := c, c, c
		fewer.Layers, more.Layers, untied.TiedHead = c.Layers-1, c.Layers+1, !c.TiedHead
		return []model.Config{fewer, more, untied}
	}
	for _, own := range []model.Config{c, func() model.Config { u := c; u.TiedHead = false; return u }()} {
		m, err := model.New(own, 1)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := New(interp(t), m)
		if err != nil {
			t.Fatal(err)
		}
		p, err := tr.Forward(m, seqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		dg, err := tr.NewGrads()
		if err != nil {
			t.Fatal(err)
		}
		for _, oc := range others(own) {
			o, err := model.New(oc, 1)
			if err != nil {
				t.Fatal(err)
			}
			g := o.NewGrads()
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("trainer %+v, grads of %+v: panic %v", own, oc, r)
					}
				}()
				if err := p.Backward(p.LogProbs(), nil, g); err == nil || !strings.Contains(err.Error(), "do not match") {
					t.Errorf("trainer %+v: Backward into grads of %+v: %v", own, oc, err)
				}
				if err := dg.Read(g); err == nil || !strings.Contains(err.Error(), "do not match") {
					t.Errorf("trainer %+v: Read into grads of %+v: %v", own, oc, err)
				}
			}()
			if g.Norm() != 0 {
				t.Errorf("trainer %+v: grads of %+v were written", own, oc)
			}
		}
		if err := p.Backward(p.LogProbs(), nil, m.NewGrads()); err != nil {
			t.Fatalf("own grads: %v", err)
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
