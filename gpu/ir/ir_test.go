package ir

import (
	"math"
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
	b.LdS(sh, b.I(0))
	b.If(b.Setp(EQ, tid, b.I(5)), func() { b.StS(sh, b.I(0), b.F(1)) })
	if _, err := launch(t, build(t, b), 32); err == nil || !strings.Contains(err.Error(), "after another thread read") {
		t.Fatalf("write-after-read race not found: %v", err)
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
	if err := in.Launch("ww", [3]int{1, 1, 1}, [3]int{1, 1, 1}, ArgI(3)); err == nil {
		t.Fatal("wrong argument kind accepted")
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
