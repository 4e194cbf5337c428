package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// roundMatricesBF16 truncates every matrix value of m to a bfloat16 (its
// low 16 bits cleared), as a BF16 checkpoint's values are.
func roundMatricesBF16(m *LLM) {
	for i, p := range m.Params() {
		if isMatrix(m.specs[i]) {
			for j, v := range p.Data {
				p.Data[j] = math.Float32frombits(math.Float32bits(v) &^ 0xffff)
			}
		}
	}
}

// bf16Pair returns a randomized model of c with BF16 matrix values in float32 and its copy
// stored in BF16.
func bf16Pair(t *testing.T, c ArchConfig) (f32, h *LLM) {
	t.Helper()
	m, err := InitLLM(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeLLM(m, 3, 0.3)
	roundMatricesBF16(m)
	h, err = m.FrozenBF16()
	if err != nil {
		t.Fatal(err)
	}
	if !h.StoredBF16() || m.StoredBF16() {
		t.Fatal("FrozenBF16 did not store the copy in BF16, or changed the original")
	}
	return m, h
}

// twinLoRAs are the same adapter (B away from 0, dropout) over a float32 base and over its
// BF16 copy.
func twinLoRAs(t *testing.T, a, b *LLM) (*LoRA, *LoRA) {
	t.Helper()
	var out [2]*LoRA
	for i, base := range []*LLM{a, b} {
		l, err := NewLoRA(base, LoRAConfig{R: 3, Alpha: 6, Dropout: 0.1}, 5)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(5, 99))
		for _, p := range l.Params() {
			if strings.HasSuffix(p.Name, "lora_B.weight") {
				for j := range p.Data {
					p.Data[j] = float32(r.NormFloat64() * 0.3)
				}
			}
		}
		out[i] = l
	}
	return out[0], out[1]
}

// TestFrozenBF16BitIdentical: a model stored in BF16 gives the bits of its float32 twin (the
// same values widened) for Qwen2, Qwen3 and Llama configs: Score's log-probs and entropies on
// the GEMM path (many rows), on the small-M path (a sequence of at most 4 rows) and through a
// kernel other than BlockedGEMM; a LoRA adapter's training step with dropout (log-probs,
// entropies, A and B gradients over two Backward calls), with and without activation
// checkpointing; and sampling with the KV cache at batch 1 and 6 and through a prefix cache,
// with and without an adapter. One config's products span several k blocks of the GEMM.
func TestFrozenBF16BitIdentical(t *testing.T) {
	archs := ckptArchs()
	archs["qwen2_k_blocks"] = ArchConfig{Arch: "qwen2", Hidden: 272, Layers: 1, Heads: 4, KVHeads: 2, Intermediate: 320, Vocab: 100, Context: 64, RopeTheta: 1e6}.WithDefaults()
	for name, c := range archs {
		t.Run(name, func(t *testing.T) {
			m, h := bf16Pair(t, c)
			r := rand.New(rand.NewPCG(7, 7))
			seqs := ckptSeqs(c, r)
			score := func(name string, seqs []Sequence) {
				t.Helper()
				lpA, enA, errA := m.Score(seqs, 0.9)
				lpB, enB, errB := h.Score(seqs, 0.9)
				if errA != nil || errB != nil {
					t.Fatal(errA, errB)
				}
				if !sameBits(flat(lpA), flat(lpB)) || !sameBits(flat(enA), flat(enB)) {
					t.Errorf("%s: log-probs or entropies differ between float32 and BF16 storage", name)
				}
			}
			score("GEMM path", seqs)
			score("small-M path", archSeqs(c.Vocab, r, [2]int{1, 3}))
			m.SetGEMM(GonumGEMM{})
			h.SetGEMM(GonumGEMM{})
			score("another kernel", seqs)
			m.SetGEMM(nil)
			h.SetGEMM(nil)

			dlp, dent := randGrads(seqs, r)
			la, lb := twinLoRAs(t, m, h)
			for _, on := range []bool{false, true} {
				run := func(l *LoRA) ckptRun {
					l.SetActivationCheckpointing(on)
					p, err := l.trainForward(seqs, 0.9, 42)
					if err != nil {
						t.Fatal(err)
					}
					return ckptStep(t, p, dlp, dent, l.NewGradBuf())
				}
				if a, b := run(la), run(lb); !a.same(b) {
					t.Errorf("LoRA step (checkpointing %v): log-probs, entropies or gradients differ", on)
				}
			}

			opts := SampleOptions{Temperature: 1, TopP: 0.9, MaxTokens: 6}
			prompts := archSeqs(c.Vocab, r, [2]int{7, 0}, [2]int{3, 0}, [2]int{12, 0}, [2]int{5, 0}, [2]int{9, 0}, [2]int{20, 0})
			var reqs []SampleRequest
			for i, s := range prompts {
				reqs = append(reqs, SampleRequest{Prompt: s.Prompt, Seed: uint64(i + 1)})
			}
			type sampler func(context.Context, []SampleRequest, SampleOptions) ([]SampleResult, error)
			sample := func(name string, a, b sampler, reqs []SampleRequest) {
				t.Helper()
				ra, errA := a(context.Background(), reqs, opts)
				rb, errB := b(context.Background(), reqs, opts)
				if errA != nil || errB != nil {
					t.Fatal(errA, errB)
				}
				for i := range ra {
					if !slices.Equal(ra[i].Tokens, rb[i].Tokens) || !sameBits(ra[i].LogProbs, rb[i].LogProbs) {
						t.Errorf("%s, request %d: %v %v against %v %v", name, i, ra[i].Tokens, ra[i].LogProbs, rb[i].Tokens, rb[i].LogProbs)
					}
				}
			}
			sample("decode, batch 1", m.Sample, h.Sample, reqs[:1])
			sample("decode, batch 6", m.Sample, h.Sample, reqs)
			sample("LoRA decode, batch 1", la.Sample, lb.Sample, reqs[:1])
			pa, pb := NewPrefixCache(1<<20), NewPrefixCache(1<<20)
			cached := func(m *LLM, pc *PrefixCache) sampler {
				return func(ctx context.Context, reqs []SampleRequest, o SampleOptions) ([]SampleResult, error) {
					return m.SampleCached(ctx, reqs, o, pc)
				}
			}
			for turn := range 2 { // the second turn finds the first's prefix in the cache
				sample("prefix cache, turn "+string(rune('1'+turn)), cached(m, pa), cached(h, pb), reqs)
			}
		})
	}
}

// TestFrozenBF16Storage: the BF16 copy holds 2 bytes a matrix value (the heap grows by that,
// not by float32 copies), Params exposes the bits and Float32 widens them back to the
// original, Merged of an adapter over it is the float32 merge, and training every weight or
// storing values that are not bfloat16 is refused.
func TestFrozenBF16Storage(t *testing.T) {
	c := ArchConfig{Arch: "qwen2", Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 256, Vocab: 8192, Context: 64, Tie: false}.WithDefaults()
	m, err := InitLLM(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	roundMatricesBF16(m)
	var matrix int
	for _, s := range m.specs {
		if isMatrix(s) {
			matrix += prod(s.Shape)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h, err := m.FrozenBF16()
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	want := int64(2*matrix + 4*(m.NumParams()-matrix))
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew < want*9/10 || grew > want*11/10 {
		t.Errorf("the BF16 copy grew the heap by %d bytes, want about %d (float32: %d)", grew, want, 4*m.NumParams())
	}
	if len(h.hbuf) != matrix || len(h.buf) != m.NumParams()-matrix || h.NumParams() != m.NumParams() {
		t.Errorf("BF16 copy holds %d bfloat16 and %d float32 values, want %d and %d", len(h.hbuf), len(h.buf), matrix, m.NumParams()-matrix)
	}
	for i, p := range h.Params() {
		if (p.BF16 != nil) != isMatrix(h.specs[i]) || (p.Data != nil) == (p.BF16 != nil) {
			t.Errorf("%s: Data %d values, BF16 %d", p.Name, len(p.Data), len(p.BF16))
		}
		if !sameBits(p.Float32(), m.Params()[i].Data) {
			t.Errorf("%s: Float32 does not give back the values", p.Name)
		}
	}
	if !sameBits(h.Float32().buf, m.buf) {
		t.Error("Float32() is not the float32 model")
	}
	la, lb := twinLoRAs(t, m, h)
	ma, errA := la.Merged()
	mb, errB := lb.Merged()
	if errA != nil || errB != nil || !sameBits(ma.buf, mb.buf) || mb.StoredBF16() {
		t.Errorf("Merged over the BF16 base differs from the float32 merge (%v, %v)", errA, errB)
	}
	if _, err := h.TrainForward(archSeqs(c.Vocab, rand.New(rand.NewPCG(1, 1)), [2]int{3, 3}), 1); !errors.Is(err, ErrStoredBF16) {
		t.Errorf("training every weight of a BF16 model: error %v, want ErrStoredBF16", err)
	}
	m.Params()[0].Data[5] = 0.1 // not a bfloat16
	if _, err := m.FrozenBF16(); err == nil || !strings.Contains(err.Error(), m.Params()[0].Name) {
		t.Errorf("FrozenBF16 of a value that is not a bfloat16: error %v, want one naming %s", err, m.Params()[0].Name)
	}
}

// packedBF16 is row-major bits h [Σsegs × in] stored as a model stores them: each segment
// (a tensor) packed in strips on its own.
func packedBF16(h []uint16, in int, segs ...int) bf16W {
	p, off := slices.Clone(h), 0
	for _, r := range segs {
		packStrips(p[off:off+r*in], r, in)
		off += r * in
	}
	return bf16W{bits: p, in: in, segs: segs}
}

// TestLinearBF16PathsSameBits: a product by bfloat16 weights gives the bits of the same
// product by their float32 values on every path linear takes (the strips' small-M path up to
// 128 rows, the direct GEMM with W as operand B) and the transposed product (W widened a block
// of rows at a time), with and without a bias, at widths spanning several k blocks and blocks of rows,
// for one tensor and for tensors stacked (q, k, v) whose row counts are not multiples of 16.
func TestLinearBF16PathsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 12))
	const n, in = 400, 600
	for _, segs := range [][]int{{130}, {2500}, {100, 19, 19}, {64, 32, 32}} {
		out := 0
		for _, r := range segs {
			out += r
		}
		x, W, b := gemvOperands(rng, n, in, out)
		h, _ := toBF16(W)
		W = widenAllBF16(h)
		hw := packedBF16(h, in, segs...)
		for _, bias := range [][]float32{nil, b} {
			m := &LLM{gemm: BlockedGEMM{}}
			for _, rows := range []int{1, 3, 5, 8, 16, 17, 64, transposedRows, transposedRows + 1, 313, n} {
				xs := x[:rows*in]
				want, got := make([]float32, rows*out), make([]float32, rows*out)
				m.linear(xs, rows, in, weight{f: W}, bias, out, want)
				m.linear(xs, rows, in, weight{h: hw}, bias, out, got)
				if !sameBits(want, got) {
					t.Fatalf("segments %v, bias %v, %d rows: BF16 weights differ from their float32 values", segs, bias != nil, rows)
				}
				// The transposed product (linear's path under another GEMM).
				linearT(BlockedGEMM{}, xs, rows, in, weight{h: hw}, bias, out, got)
				if !sameBits(want, got) {
					t.Fatalf("segments %v, bias %v, %d rows: linearT over BF16 weights differs", segs, bias != nil, rows)
				}
			}
		}
	}
}

func widenAllBF16(h []uint16) []float32 {
	f := make([]float32, len(h))
	for i, v := range h {
		f[i] = widenBF16(v)
	}
	return f
}

// TestBF16StripLayout: packStrips puts element (o, k) of a [out × in] tensor at
// (o/16)·16·in + k·w + o%16 (w = 16, or out%16 in the last strip, no padding) for out not a
// multiple of 16 and in not a multiple of 256; every reader (rows widened, rows of bits, the
// GEMM's packing of B in both layouts) gives back the row-major values, also for stacked
// tensors.
func TestBF16StripLayout(t *testing.T) {
	const out, in = 37, 300
	rm := make([]uint16, out*in)
	for i := range rm {
		rm[i] = uint16(i*7919 + 13)
	}
	w := packedBF16(rm, in, out)
	for o := 0; o < out; o++ {
		width := min(16, out-o/16*16)
		for k := 0; k < in; k++ {
			if got := w.bits[o/16*16*in+k*width+o%16]; got != rm[o*in+k] {
				t.Fatalf("element (%d, %d) stored as %d, want %d", o, k, got, rm[o*in+k])
			}
		}
	}
	for _, segs := range [][]int{{out}, {20, 9, 8}} {
		w := packedBF16(rm, in, segs...)
		bits, wide := make([]uint16, (out-3)*in), make([]float32, (out-3)*in)
		w.bitsRows(bits, 3, out)
		w.widenRows(wide, 3, out)
		if !slices.Equal(bits, rm[3*in:]) || !sameBits(wide, widenAllBF16(rm[3*in:])) {
			t.Fatalf("segments %v: rows [3, %d) read back differ from the row-major bits", segs, out)
		}
		for _, tr := range []bool{false, true} {
			pc, kcur, jc, ncur := 1, 30, 5, 20 // op(B) = W: depth over W's rows; Wᵀ: columns
			if tr {
				pc, kcur, jc, ncur = 257, 40, 3, 33
			}
			dst := make([]float32, (ncur+nr-1)/nr*nr*kcur)
			for i := range dst {
				dst[i] = float32(math.NaN())
			}
			w.packB(dst, tr, pc, kcur, jc, ncur)
			for p := 0; p < kcur; p++ {
				for j := 0; j < (ncur+nr-1)/nr*nr; j++ {
					want := float32(0) // padding
					if j < ncur && tr {
						want = widenBF16(rm[(jc+j)*in+pc+p])
					} else if j < ncur {
						want = widenBF16(rm[(pc+p)*in+jc+j])
					}
					if got := dst[(j/nr)*nr*kcur+p*nr+j%nr]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("segments %v trans %v: packed (%d, %d) = %v, want %v", segs, tr, p, j, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkLinearTBF16 compares linearT over bfloat16 weights (widened a block of rows at a
// time) with linearT over float32 weights and with the strip kernels (gemvStrips, passes of
// 4 rows) at the Qwen2.5-0.5B projection and head shapes, at decoding batches the transposed
// product takes; MB/s counts the weight bytes read.
func BenchmarkLinearTBF16(b *testing.B) {
	for _, s := range []struct{ in, out int }{{896, 4864}, {4864, 896}, {896, 151936}} {
		for _, n := range []int{16, 32, 64, 128} {
			rng := rand.New(rand.NewPCG(1, 2))
			x, W, _ := gemvOperands(rng, n, s.in, s.out)
			W16, _ := toBF16(W)
			hw := packedBF16(W16, s.in, s.out)
			y := make([]float32, n*s.out)
			name := fmt.Sprintf("%dx%d/n=%d", s.in, s.out, n)
			b.Run("f32/"+name, func(b *testing.B) {
				benchCPU(b, int64(4*s.in*s.out), func() { linearT(BlockedGEMM{}, x, n, s.in, weight{f: W}, nil, s.out, y) })
			})
			b.Run("bf16/"+name, func(b *testing.B) {
				benchCPU(b, int64(2*s.in*s.out), func() { linearT(BlockedGEMM{}, x, n, s.in, weight{h: hw}, nil, s.out, y) })
			})
			b.Run("strips/"+name, func(b *testing.B) {
				benchCPU(b, int64(2*s.in*s.out), func() { gemvStrips(x, n, s.in, hw, nil, s.out, y) })
			})
		}
	}
}
