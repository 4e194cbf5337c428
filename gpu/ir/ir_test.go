package ir

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func build(t *testing.T, b *Builder) *Kernel {
	t.Helper()
	k, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func launch(t *testing.T, k *Kernel, threads int, args ...Arg) (*Interp, error) {
	t.Helper()
	in := NewInterp([]*Kernel{k})
	return in, in.Launch(k.Name, [3]int{1, 1, 1}, [3]int{threads, 1, 1}, args...)
}

// TestOps checks the interpreter's instructions against Go, per thread.
func TestOps(t *testing.T) {
	b := NewKernel("ops")
	out := b.Ptr("out")
	tid := b.Special(TidX)
	x := b.Sub(b.CvtF(tid), b.F(3.5)) // -3.5 .. 4.5
	i := b.Sub(tid, b.I(4))           // -4 .. 4
	res := []Reg{
		b.Add(x, b.F(1)), b.Mul(x, x), b.Div(b.F(1), x), b.Sqrt(b.Abs(x)), b.Min(x, b.F(0)), b.Max(x, b.F(0)),
		b.Fma(x, x, b.F(-1)), b.Neg(x), b.Ex2(x), b.Lg2(b.Abs(x)),
		b.CvtF(b.Div(i, b.I(3))), b.CvtF(b.Rem(i, b.I(3))), b.CvtF(b.Shr(i, b.I(1))), b.CvtF(b.Shl(i, b.I(2))),
		b.CvtF(b.And(tid, b.I(5))), b.CvtF(b.Or(tid, b.I(8))), b.CvtF(b.CvtI(x)),
		b.Selp(b.And(b.Setp(GT, i, b.I(0)), b.Not(b.Setp(EQ, i, b.I(2)))), b.F(1), b.F(0)),
		b.Selp(b.Or(b.Setp(LE, x, b.F(-2)), b.Setp(NE, x, x)), b.F(1), b.F(0)),
	}
	for j, r := range res {
		b.St(out, b.Add(b.Mul(tid, b.I(len(res))), b.I(j)), r)
	}
	k := build(t, b)
	in := NewInterp([]*Kernel{k})
	p, err := in.Alloc(9 * len(res))
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Launch("ops", [3]int{1, 1, 1}, [3]int{9, 1, 1}, ArgP(p)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 9*len(res))
	if err := in.ReadF32(got, p); err != nil {
		t.Fatal(err)
	}
	b2f := func(c bool) float32 {
		if c {
			return 1
		}
		return 0
	}
	for th := 0; th < 9; th++ {
		x := float32(th) - 3.5
		i := int32(th - 4)
		want := []float32{x + 1, x * x, 1 / x, float32(math.Sqrt(math.Abs(float64(x)))), min(x, 0), max(x, 0),
			x*x - 1, -x, float32(math.Exp2(float64(x))), float32(math.Log2(math.Abs(float64(x)))),
			float32(i / 3), float32(i % 3), float32(i >> 1), float32(i << 2),
			float32(th & 5), float32(th | 8), float32(int32(x)),
			b2f(i > 0 && i != 2), b2f(x <= -2)}
		for j, w := range want {
			if g := got[th*len(res)+j]; g != w {
				t.Errorf("thread %d op %d: %v, want %v", th, j, g, w)
			}
		}
	}
}

func TestDetectsMissingBarrier(t *testing.T) {
	b := NewKernel("race")
	sh := b.Shared("s", 32)
	tid := b.Special(TidX)
	b.StS(sh, tid, b.CvtF(tid))
	b.LdS(sh, b.Rem(b.Add(tid, b.I(1)), b.I(32)))
	if _, err := launch(t, build(t, b), 32); err == nil || !strings.Contains(err.Error(), "since the last barrier") {
		t.Fatalf("read-after-write race not found: %v", err)
	}
	// With the barrier it runs.
	b = NewKernel("ok")
	sh = b.Shared("s", 32)
	tid = b.Special(TidX)
	b.StS(sh, tid, b.CvtF(tid))
	b.Barrier()
	b.LdS(sh, b.Rem(b.Add(tid, b.I(1)), b.I(32)))
	if _, err := launch(t, build(t, b), 32); err != nil {
		t.Fatal(err)
	}
	// Write after another thread's read.
	b = NewKernel("war")
	sh = b.Shared("s", 32)
	tid = b.Special(TidX)
	b.If(b.Setp(EQ, tid, b.I(0)), func() { b.StS(sh, b.I(0), b.F(3)) })
	b.Barrier()
	b.LdS(sh, b.I(0))
	b.If(b.Setp(EQ, tid, b.I(5)), func() { b.StS(sh, b.I(0), b.F(1)) })
	if _, err := launch(t, build(t, b), 32); err == nil || !strings.Contains(err.Error(), "after another thread read") {
		t.Fatalf("write-after-read race not found: %v", err)
	}
}

// TestDetectsUninitialisedSharedRead: a GPU's shared memory holds whatever the SM's last
// block left there, so reading a word no thread of this block wrote is an error, in the
// second block too (the first block's writes do not count).
func TestDetectsUninitialisedSharedRead(t *testing.T) {
	b := NewKernel("uninit")
	out := b.Ptr("out")
	sh := b.Shared("s", 64)
	tid := b.Special(TidX)
	b.If(b.Setp(EQ, b.Special(CtaidX), b.I(0)), func() { b.StS(sh, b.Add(tid, b.I(32)), b.F(1)) })
	b.StS(sh, tid, b.F(2))
	b.Barrier()
	v := b.LdS(sh, b.Add(tid, b.I(32))) // written in block 0 only
	b.St(out, b.Add(b.Mul(b.Special(CtaidX), b.I(32)), tid), v)
	in := NewInterp([]*Kernel{build(t, b)})
	p, err := in.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Launch("uninit", [3]int{1, 1, 1}, [3]int{32, 1, 1}, ArgP(p)); err != nil {
		t.Fatalf("every word read was written: %v", err)
	}
	err = in.Launch("uninit", [3]int{2, 1, 1}, [3]int{32, 1, 1}, ArgP(p))
	if err == nil || !strings.Contains(err.Error(), "before any thread of the block wrote it") || !strings.Contains(err.Error(), "block [1 0 0]") {
		t.Fatalf("read of unwritten shared memory in block 1 not found: %v", err)
	}
}

func TestDetectsDivergentBarrier(t *testing.T) {
	b := NewKernel("div")
	tid := b.Special(TidX)
	b.If(b.Setp(LT, tid, b.I(3)), func() { b.Barrier() })
	if _, err := launch(t, build(t, b), 8); err == nil || !strings.Contains(err.Error(), "part of the block") {
		t.Fatalf("divergent barrier not found: %v", err)
	}
}

func TestDetectsGlobalErrors(t *testing.T) {
	b := NewKernel("oob")
	p := b.Ptr("p")
	b.St(p, b.Special(TidX), b.F(1))
	k := build(t, b)
	in := NewInterp([]*Kernel{k})
	buf, err := in.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Launch("oob", [3]int{1, 1, 1}, [3]int{5, 1, 1}, ArgP(buf)); err == nil || !strings.Contains(err.Error(), "out of bounds") {
		t.Fatalf("out-of-bounds store not found: %v", err)
	}
	b = NewKernel("ww")
	p = b.Ptr("p")
	b.St(p, b.I(0), b.F(1))
	k = build(t, b)
	in = NewInterp([]*Kernel{k})
	if buf, err = in.Alloc(1); err != nil {
		t.Fatal(err)
	}
	if err := in.Launch("ww", [3]int{1, 1, 1}, [3]int{2, 1, 1}, ArgP(buf)); err == nil || !strings.Contains(err.Error(), "races") {
		t.Fatalf("write/write race not found: %v", err)
	}
	// A thread reading a global word another thread of its block wrote: a race without a
	// barrier between (the interpreter's lockstep would read the new value), fine with one.
	for _, barrier := range []bool{false, true} {
		b = NewKernel("raw")
		p = b.Ptr("p")
		tid := b.Special(TidX)
		b.If(b.Setp(EQ, tid, b.I(0)), func() { b.St(p, b.I(0), b.F(7)) })
		if barrier {
			b.Barrier()
		}
		b.If(b.Setp(EQ, tid, b.I(100)), func() { b.St(p, b.I(1), b.Ld(F32, p, b.I(0))) })
		raw := NewInterp([]*Kernel{build(t, b)})
		rb, err := raw.Alloc(2)
		if err != nil {
			t.Fatal(err)
		}
		err = raw.Launch("raw", [3]int{1, 1, 1}, [3]int{128, 1, 1}, ArgP(rb))
		if barrier && err != nil {
			t.Fatalf("load after a barrier: %v", err)
		}
		if !barrier && (err == nil || !strings.Contains(err.Error(), "since the last barrier")) {
			t.Fatalf("global read-after-write race in a block not found: %v", err)
		}
	}
	if err := in.Launch("ww", [3]int{1, 1, 1}, [3]int{1, 1, 1}, ArgI(3)); err == nil {
		t.Fatal("wrong argument kind accepted")
	}
	for _, grid := range [][3]int{{1, 65536, 1}, {1, 1, 65536}} {
		if err := in.Launch("ww", grid, [3]int{1, 1, 1}, ArgP(buf)); err == nil || !strings.Contains(err.Error(), "limits") {
			t.Fatalf("grid %v (above a GPU's grid limits) launched: %v", grid, err)
		}
	}
	if err := in.Launch("nope", [3]int{1, 1, 1}, [3]int{1, 1, 1}); err == nil {
		t.Fatal("unknown kernel launched")
	}
	if err := in.Free(buf); err != nil {
		t.Fatal(err)
	}
	if err := in.Free(buf); err == nil {
		t.Fatal("double free accepted")
	}
}

// TestDetectsWriteAfterRead: a store to a global word another thread read in the same launch
// is a race on a GPU (blocks run in any order, threads between barriers too), though the
// interpreter's fixed order would always give the reader the old value. The same thread
// updating a word in place, and a store after a barrier in the reader's block, are fine.
func TestDetectsWriteAfterRead(t *testing.T) {
	cases := []struct {
		name        string
		grid, block int
		barrier     bool
		reader      int // the global thread that reads word 0 (-1: every thread)
		writer      int // the global thread that then writes it
		want        string
	}{
		{"other block", 2, 4, false, 1, 5, "another block read in the same launch"},
		{"other block after a barrier", 2, 4, true, 1, 5, "another block read in the same launch"},
		{"earlier block, then one of a later block's own", 3, 2, false, -1, 5, "another block read in the same launch"},
		{"same block, no barrier", 1, 8, false, 2, 6, "another thread read since the last barrier"},
		{"several readers, one writes", 1, 8, false, -1, 3, "another thread read since the last barrier"},
		{"same block, barrier between", 1, 8, true, 2, 6, ""},
		{"several readers, barrier between", 1, 8, true, -1, 3, ""},
		{"in place", 2, 4, false, 5, 5, ""},
	}
	for _, c := range cases {
		b := NewKernel("war")
		p := b.Ptr("p")
		gid := b.Add(b.Mul(b.Special(CtaidX), b.Special(NtidX)), b.Special(TidX))
		read := b.Setp(EQ, gid, b.I(c.reader))
		if c.reader < 0 {
			read = b.Setp(GE, gid, b.I(0))
		}
		b.If(read, func() { b.St(p, b.Add(gid, b.I(1)), b.Ld(F32, p, b.I(0))) })
		if c.barrier {
			b.Barrier()
		}
		b.If(b.Setp(EQ, gid, b.I(c.writer)), func() { b.St(p, b.I(0), b.F(7)) })
		in := NewInterp([]*Kernel{build(t, b)})
		buf, err := in.Alloc(1 + c.grid*c.block)
		if err != nil {
			t.Fatal(err)
		}
		err = in.Launch("war", [3]int{c.grid, 1, 1}, [3]int{c.block, 1, 1}, ArgP(buf))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestBuilderTypeErrors(t *testing.T) {
	b := NewKernel("bad")
	b.Add(b.I(1), b.F(1))
	if _, err := b.Build(); err == nil {
		t.Fatal("mixed-type add accepted")
	}
	b = NewKernel("bad2")
	b.If(b.I(1), func() {})
	if _, err := b.Build(); err == nil {
		t.Fatal("if on an s32 accepted")
	}
}

func TestEmitDeterministicAndLoops(t *testing.T) {
	b := NewKernel("loop")
	p := b.Ptr("p")
	n := b.IParam("n")
	s := b.Var(b.F(0))
	b.For(b.I(0), n, b.I(1), func(i Reg) { b.Set(s, b.Add(s, b.CvtF(i))) })
	b.IfElse(b.Setp(GT, s, b.F(10)), func() { b.St(p, b.I(0), s) }, func() { b.St(p, b.I(0), b.Neg(s)) })
	k := build(t, b)
	a, c := EmitPTX([]*Kernel{k}), EmitPTX([]*Kernel{k})
	if a != c || !strings.Contains(a, ".entry loop(") || !strings.Contains(a, "bra $L_loop_loop") {
		t.Fatalf("PTX:\n%s", a)
	}
	in := NewInterp([]*Kernel{k})
	buf, err := in.Alloc(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    int
		want float32
	}{{5, 10 * -1}, {6, 15}} {
		if err := in.Launch("loop", [3]int{1, 1, 1}, [3]int{1, 1, 1}, ArgP(buf), ArgI(tc.n)); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 1)
		if err := in.ReadF32(got, buf); err != nil {
			t.Fatal(err)
		}
		if got[0] != tc.want {
			t.Errorf("n=%d: %v, want %v", tc.n, got[0], tc.want)
		}
	}
}

// exactFma is a·b + c rounded once to float32, by exact arithmetic.
func exactFma(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(400).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(400).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(400).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// TestFmaSingleRounding: OpFma is fma.rn.f32, one rounding of the exact a·b + c. The first
// case is one where float32(math.FMA(a, b, c)) rounds twice (to float64, onto a float32 tie,
// then to even) and lands one unit in the last place off; the rest are random, with the
// product and the addend of close magnitudes and opposite signs (cancellation), subnormal
// results and overflow.
func TestFmaSingleRounding(t *testing.T) {
	type abc struct{ a, b, c float32 }
	cases := []abc{
		{1 - 0x1p-23, (1 + 0x1p-23) * 0x1p-24, 1 + 0x1p-23},
		{-(1 - 0x1p-23), (1 + 0x1p-23) * 0x1p-24, -(1 + 0x1p-23)},
		{0x1p-70, 0x1p-70, 0x1p-149}, {3e38, 2, -1e38}, {3e38, 2, -3e38}, {0, -1, 0},
	}
	r := rand.New(rand.NewPCG(1, 2))
	bits := func() float32 {
		for {
			f := math.Float32frombits(r.Uint32())
			if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
				return f
			}
		}
	}
	for range 20000 {
		a, b := bits(), bits()
		c := -a * b * float32(1+r.NormFloat64()*1e-6)
		if r.IntN(2) == 0 {
			c = bits()
		}
		cases = append(cases, abc{a, b, c})
	}
	bld := NewKernel("fma")
	pa, pb, pc, out := bld.Ptr("a"), bld.Ptr("b"), bld.Ptr("c"), bld.Ptr("out")
	i := bld.Add(bld.Mul(bld.Special(CtaidX), bld.Special(NtidX)), bld.Special(TidX))
	n := bld.IParam("n")
	bld.If(bld.Setp(LT, i, n), func() {
		bld.St(out, i, bld.Fma(bld.Ld(F32, pa, i), bld.Ld(F32, pb, i), bld.Ld(F32, pc, i)))
	})
	in := NewInterp([]*Kernel{build(t, bld)})
	var ps [4]Ptr
	for j := range ps {
		p, err := in.Alloc(len(cases))
		if err != nil {
			t.Fatal(err)
		}
		ps[j] = p
		v := make([]float32, len(cases))
		for k, c := range cases {
			v[k] = [4]float32{c.a, c.b, c.c, 0}[j]
		}
		if err := in.WriteF32(p, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Launch("fma", [3]int{(len(cases) + 255) / 256, 1, 1}, [3]int{256, 1, 1}, ArgP(ps[0]), ArgP(ps[1]), ArgP(ps[2]), ArgP(ps[3]), ArgI(len(cases))); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(cases))
	if err := in.ReadF32(got, ps[3]); err != nil {
		t.Fatal(err)
	}
	for k, c := range cases {
		if want := exactFma(c.a, c.b, c.c); math.Float32bits(got[k]) != math.Float32bits(want) {
			t.Fatalf("fma(%g, %g, %g) = %g (%#08x), want %g (%#08x)", c.a, c.b, c.c, got[k], math.Float32bits(got[k]), want, math.Float32bits(want))
		}
	}
}

// TestShiftAmountsClamp: shl.b32 and shr.s32 read the amount as unsigned and clamp it at 32,
// so 32, 33 and -1 shift every bit out (0, or the sign for shr); they do not wrap mod 32.
func TestShiftAmountsClamp(t *testing.T) {
	b := NewKernel("shifts")
	out := b.Ptr("out")
	amounts := []int{0, 1, 31, 32, 33, -1}
	for j, s := range amounts {
		v := b.I(-12345)
		b.St(out, b.I(2*j), b.CvtF(b.Shl(v, b.I(s))))
		b.St(out, b.I(2*j+1), b.CvtF(b.Shr(v, b.I(s))))
	}
	in := NewInterp([]*Kernel{build(t, b)})
	p, err := in.Alloc(2 * len(amounts))
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Launch("shifts", [3]int{1, 1, 1}, [3]int{1, 1, 1}, ArgP(p)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2*len(amounts))
	if err := in.ReadF32(got, p); err != nil {
		t.Fatal(err)
	}
	for j, s := range amounts {
		n := uint32(s)
		wantL, wantR := float32(int32(-12345)<<n), float32(int32(-12345)>>n)
		if got[2*j] != wantL || got[2*j+1] != wantR {
			t.Errorf("-12345 shifted by %d: shl %v shr %v, want %v %v", s, got[2*j], got[2*j+1], wantL, wantR)
		}
	}
	if got[6] != 0 || got[7] != -1 || got[10] != 0 || got[11] != -1 {
		t.Errorf("shifts by 32 and by -1 (0xffffffff) did not clear the value: %v", got)
	}
}

// TestAllocIsPoisoned: like cuMemAlloc's memory, a new buffer holds no zeros: every word is
// the Poison NaN, so code that reads what it never wrote fails its tests here too.
func TestAllocIsPoisoned(t *testing.T) {
	in := NewInterp(nil)
	p, err := in.Alloc(5)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 5)
	if err := in.ReadF32(got, p); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if math.Float32bits(v) != Poison || !math.IsNaN(float64(v)) {
			t.Fatalf("word %d of a new buffer is %#x, want the poison NaN %#x", i, math.Float32bits(v), Poison)
		}
	}
}
