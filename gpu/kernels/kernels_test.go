package kernels

import (
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/gpu/internal/gemmtest"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/model"
)

func all(t testing.TB) []*ir.Kernel {
	t.Helper()
	ks, err := All()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestPTXUpToDate: kernels.ptx is what the generator writes today.
func TestPTXUpToDate(t *testing.T) {
	want := ir.EmitPTX(all(t))
	if PTX != want {
		if os.Getenv("DRMAS_UPDATE_PTX") == "1" {
			if err := os.WriteFile("kernels.ptx", []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatal("kernels.ptx is stale: run `go run ./gpu/kernels/cmd/genptx` from the repository root")
	}
}

// TestPTXStructure checks what the driver's JIT would reject first, without a GPU: header,
// one .entry per kernel with its parameters in order and of the right type, balanced braces,
// every register used is declared within the entry's count, every branch target is a label.
func TestPTXStructure(t *testing.T) {
	src := PTX
	for _, h := range []string{".version " + ir.PTXVersion, ".target " + ir.PTXTarget, ".address_size 64"} {
		if !strings.Contains(src, h+"\n") {
			t.Errorf("missing %q", h)
		}
	}
	if strings.Count(src, "{") != strings.Count(src, "}") {
		t.Error("unbalanced braces")
	}
	entries := strings.Split(src, ".visible .entry ")[1:]
	ks := all(t)
	if len(entries) != len(ks) {
		t.Fatalf("%d entries for %d kernels", len(entries), len(ks))
	}
	paramRe := regexp.MustCompile(`\.param \.(u64|s32|f32) (\w+)`)
	declRe := regexp.MustCompile(`\.reg \.\w+ (%[a-z]+)<(\d+)>;`)
	useRe := regexp.MustCompile(`(%[a-z]+)(\d+)\b`)
	braRe := regexp.MustCompile(`bra (\$\w+);`)
	for i, e := range entries {
		k := ks[i]
		if !strings.HasPrefix(e, k.Name+"(") {
			t.Errorf("entry %d is not %s", i, k.Name)
			continue
		}
		head, body, ok := strings.Cut(e, "{")
		if !ok {
			t.Fatalf("%s: no body", k.Name)
		}
		ps := paramRe.FindAllStringSubmatch(head, -1)
		if len(ps) != len(k.Params) {
			t.Errorf("%s: %d params in PTX, %d in the kernel", k.Name, len(ps), len(k.Params))
			continue
		}
		for j, p := range k.Params {
			want := map[ir.ParamKind]string{ir.PPtr: "u64", ir.PS32: "s32", ir.PF32: "f32"}[p.Kind]
			if ps[j][1] != want || ps[j][2] != k.Name+"_"+p.Name {
				t.Errorf("%s: param %d is %s %s, want %s %s_%s", k.Name, j, ps[j][1], ps[j][2], want, k.Name, p.Name)
			}
		}
		decl := map[string]int{}
		for _, d := range declRe.FindAllStringSubmatch(body, -1) {
			n := 0
			for _, c := range d[2] {
				n = n*10 + int(c-'0')
			}
			decl[d[1]] = n
		}
		for _, u := range useRe.FindAllStringSubmatch(body, -1) {
			n := 0
			for _, c := range u[2] {
				n = n*10 + int(c-'0')
			}
			if c, ok := decl[u[1]]; !ok || n >= c {
				t.Errorf("%s: register %s%s used but not declared", k.Name, u[1], u[2])
				break
			}
		}
		for _, b := range braRe.FindAllStringSubmatch(body, -1) {
			if !strings.Contains(body, "\n"+b[1]+":\n") {
				t.Errorf("%s: branch to undefined label %s", k.Name, b[1])
			}
		}
		if !strings.Contains(body, "\tret;\n}") {
			t.Errorf("%s: does not end in ret", k.Name)
		}
	}
}

func randF(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

type dev struct {
	t  testing.TB
	in *ir.Interp
}

func (d dev) buf(v []float32) ir.Ptr {
	p, err := d.in.Alloc(len(v))
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.in.WriteF32(p, v); err != nil {
		d.t.Fatal(err)
	}
	return p
}

func (d dev) read(p ir.Ptr, n int) []float32 {
	v := make([]float32, n)
	if err := d.in.ReadF32(v, p); err != nil {
		d.t.Fatal(err)
	}
	return v
}

func TestGemmVariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	d := dev{t, ir.NewInterp(all(t))}
	for _, v := range []struct{ ta, tb bool }{{false, false}, {false, true}, {true, false}} {
		for _, sz := range [][3]int{{1, 1, 1}, {70, 65, 17}, {3, 130, 40}, {64, 64, 16}, {5, 7, 0}} {
			for _, beta := range []float32{0, 0.5} {
				m, n, k := sz[0], sz[1], sz[2]
				lo := gemmtest.For(v.ta, v.tb, m, n, k)
				lda, ldb, ldc := lo.Lda, lo.Ldb, lo.Ldc
				a, b, c := randF(r, lo.ARows*lda+1), randF(r, lo.BRows*ldb+1), randF(r, m*ldc)
				want := append([]float32(nil), c...)
				model.GonumGEMM{}.Sgemm(v.ta, v.tb, m, n, k, 1.5, a, lda, b, ldb, beta, want, ldc) // the reference: gonum's BLAS
				pa, pb, pc := d.buf(a), d.buf(b), d.buf(c)
				err := d.in.Launch(GemmName(v.ta, v.tb, false), [3]int{(n + Tile - 1) / Tile, (m + Tile - 1) / Tile, 1}, [3]int{GemmThreads, GemmThreads, 1},
					ir.ArgP(pa), ir.ArgP(pb), ir.ArgP(pc), ir.ArgI(m), ir.ArgI(n), ir.ArgI(k), ir.ArgI(lda), ir.ArgI(ldb), ir.ArgI(ldc), ir.ArgF(1.5), ir.ArgF(beta))
				if err != nil {
					t.Fatal(err)
				}
				got := d.read(pc, len(c))
				for i := range got {
					if math.Abs(float64(got[i]-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
						t.Fatalf("%s %v beta %v: c[%d] = %v, want %v", GemmName(v.ta, v.tb, false), sz, beta, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestGemmBatched: two problems of different sizes and strides in one launch, each equal to
// the plain kernel bit for bit (the batch-independence rule).
func TestGemmBatched(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	d := dev{t, ir.NewInterp(all(t))}
	a, b := randF(r, 4000), randF(r, 4000)
	c := make([]float32, 6000)
	// m, n, k, aOff, bOff, cOff, lda, ldb, ldc
	tab := []int32{70, 9, 20, 0, 0, 0, 20, 9, 9, 5, 66, 3, 1500, 2000, 1000, 3, 70, 80}
	pt, err := d.in.Alloc(len(tab))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.in.WriteI32(pt, tab); err != nil {
		t.Fatal(err)
	}
	pa, pb, pc := d.buf(a), d.buf(b), d.buf(c)
	if err := d.in.Launch(GemmName(false, false, true), [3]int{2, 2, 2}, [3]int{GemmThreads, GemmThreads, 1},
		ir.ArgP(pa), ir.ArgP(pb), ir.ArgP(pc), ir.ArgP(pt), ir.ArgF(1), ir.ArgF(0)); err != nil {
		t.Fatal(err)
	}
	got := d.read(pc, len(c))
	for e := 0; e < 2; e++ {
		x := tab[e*TabWords:]
		m, n, k := int(x[0]), int(x[1]), int(x[2])
		single := make([]float32, m*int(x[8]))
		ps := d.buf(single)
		if err := d.in.Launch(GemmName(false, false, false), [3]int{(n + 63) / 64, (m + 63) / 64, 1}, [3]int{GemmThreads, GemmThreads, 1},
			ir.ArgP(pa.Add(int(x[3]))), ir.ArgP(pb.Add(int(x[4]))), ir.ArgP(ps), ir.ArgI(m), ir.ArgI(n), ir.ArgI(k), ir.ArgI(int(x[6])), ir.ArgI(int(x[7])), ir.ArgI(int(x[8])), ir.ArgF(1), ir.ArgF(0)); err != nil {
			t.Fatal(err)
		}
		want := d.read(ps, len(single))
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				if g, w := got[int(x[5])+i*int(x[8])+j], want[i*int(x[8])+j]; math.Float32bits(g) != math.Float32bits(w) {
					t.Fatalf("batch %d (%d,%d): %v, plain kernel %v", e, i, j, g, w)
				}
			}
		}
	}
}

// TestAdamWMatchesCPU: the adamw kernel is model.AdamW.Step bit for bit (same float32
// operations in the same order; no approximate functions).
func TestAdamWMatchesCPU(t *testing.T) {
	c := model.Config{Vocab: model.VocabSize, Context: 8, Dim: 8, Layers: 1, Heads: 2, FFMult: 2}
	m, err := model.New(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	d := dev{t, ir.NewInterp(all(t))}
	r := rand.New(rand.NewPCG(5, 6))
	cfg := model.DefaultAdamWConfig()
	cfg.WeightDecay = 0.1
	opt := model.NewAdamW(m, cfg)
	g := m.NewGrads()
	type state struct{ p, g, m, v ir.Ptr }
	var st []state
	for _, p := range m.Params() {
		z := make([]float32, len(p.Data))
		st = append(st, state{d.buf(p.Data), d.buf(z), d.buf(z), d.buf(z)})
	}
	for step := 1; step <= 3; step++ {
		for i := range m.Params() {
			gr := g.Tensor(i)
			copy(gr, randF(r, len(gr)))
			if err := d.in.WriteF32(st[i].g, gr); err != nil {
				t.Fatal(err)
			}
		}
		if err := opt.Step(g); err != nil {
			t.Fatal(err)
		}
		tt := float64(step)
		bc1, bc2 := 1-math.Pow(cfg.Beta1, tt), 1-math.Pow(cfg.Beta2, tt)
		for i, p := range m.Params() {
			decay := float32(1)
			if p.Decay {
				decay = float32(1 - cfg.LR*cfg.WeightDecay)
			}
			l := len(p.Data)
			if err := d.in.Launch("adamw", [3]int{(l + RowThreads - 1) / RowThreads, 1, 1}, [3]int{RowThreads, 1, 1},
				ir.ArgP(st[i].p), ir.ArgP(st[i].g), ir.ArgP(st[i].m), ir.ArgP(st[i].v), ir.ArgF(decay), ir.ArgF(float32(cfg.Beta1)), ir.ArgF(float32(cfg.Beta2)),
				ir.ArgF(float32(cfg.LR/bc1)), ir.ArgF(float32(1/math.Sqrt(bc2))), ir.ArgF(float32(cfg.Eps)), ir.ArgI(l)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, p := range m.Params() {
		got := d.read(st[i].p, len(p.Data))
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(p.Data[j]) {
				t.Fatalf("%s[%d]: kernel %v, CPU %v", p.Name, j, got[j], p.Data[j])
			}
		}
	}
}

// TestGemmBigMatchesSmall: the TileBig GEMMs give the Tile GEMMs' results bit for bit (the
// same FMA chain per element), for every transpose, beta 0 and not, and shapes that are and
// are not multiples of either tile, so the engine may pick either by shape.
func TestGemmBigMatchesSmall(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	d := dev{t, ir.NewInterp(all(t))}
	for _, v := range []struct{ ta, tb bool }{{false, false}, {false, true}, {true, false}} {
		for _, sz := range [][3]int{{130, 129, 17}, {129, 257, 40}, {5, 200, 3}, {256, 128, 32}} {
			m, n, k := sz[0], sz[1], sz[2]
			lo := gemmtest.For(v.ta, v.tb, m, n, k)
			lda, ldb, ldc := lo.Lda, lo.Ldb, lo.Ldc
			a, b := randF(r, lo.ARows*lda), randF(r, lo.BRows*ldb)
			for _, beta := range []float32{0, 0.5} {
				c := randF(r, m*ldc)
				var outs [2][]float32
				for i, big := range []bool{false, true} {
					name, tile := GemmName(v.ta, v.tb, false), Tile
					if big {
						name, tile = GemmBigName(v.ta, v.tb), TileBig
					}
					pa, pb, pc := d.buf(a), d.buf(b), d.buf(c)
					if err := d.in.Launch(name, [3]int{(n + tile - 1) / tile, (m + tile - 1) / tile, 1}, [3]int{GemmThreads, GemmThreads, 1},
						ir.ArgP(pa), ir.ArgP(pb), ir.ArgP(pc), ir.ArgI(m), ir.ArgI(n), ir.ArgI(k), ir.ArgI(lda), ir.ArgI(ldb), ir.ArgI(ldc), ir.ArgF(1.5), ir.ArgF(beta)); err != nil {
						t.Fatal(err)
					}
					outs[i] = d.read(pc, len(c))
				}
				for i := range outs[0] {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
						t.Fatalf("%s %v beta %v: c[%d] = %v with the %d tile, %v with the %d tile",
							GemmBigName(v.ta, v.tb), sz, beta, i, outs[0][i], Tile, outs[1][i], TileBig)
					}
				}
				changed := 0
				for i := range c {
					if outs[1][i] != c[i] {
						changed++
					}
				}
				if changed < m*n/2 {
					t.Fatalf("%s %v: only %d of %d outputs written", GemmBigName(v.ta, v.tb), sz, changed, m*n)
				}
			}
		}
	}
}

// TestSumSqPart: each part is its chunk's sum of squares (checked against a float64 sum per
// chunk; the chunks are scaled differently so a wrong boundary shows), including a short last
// chunk; scale_inplace is Go's float32 multiply bit for bit.
func TestSumSqPartAndScale(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	d := dev{t, ir.NewInterp(all(t))}
	n := 2*NormChunk + 1001
	x := randF(r, n)
	for i := range x {
		x[i] *= float32(1 + 3*(i/NormChunk))
	}
	chunks := (n + NormChunk - 1) / NormChunk
	px, part := d.buf(x), d.buf(make([]float32, chunks+1))
	if err := d.in.Launch("sumsq_part", [3]int{chunks, 1, 1}, [3]int{RowThreads, 1, 1}, ir.ArgP(px), ir.ArgP(part), ir.ArgI(n)); err != nil {
		t.Fatal(err)
	}
	got := d.read(part, chunks+1)
	for c := 0; c < chunks; c++ {
		var want float64
		for _, v := range x[c*NormChunk : min(n, (c+1)*NormChunk)] {
			want += float64(v) * float64(v)
		}
		if math.Abs(float64(got[c])-want) > 1e-5*want {
			t.Errorf("part[%d] = %v, want %v", c, got[c], want)
		}
	}
	if got[chunks] != 0 {
		t.Errorf("sumsq_part wrote past its grid: part[%d] = %v", chunks, got[chunks])
	}
	const s = float32(0.37)
	if err := d.in.Launch("scale_inplace", [3]int{(n + RowThreads - 1) / RowThreads, 1, 1}, [3]int{RowThreads, 1, 1}, ir.ArgP(px), ir.ArgF(s), ir.ArgI(n)); err != nil {
		t.Fatal(err)
	}
	for i, v := range d.read(px, n) {
		if math.Float32bits(v) != math.Float32bits(x[i]*s) {
			t.Fatalf("scale_inplace[%d] = %v, want %v", i, v, x[i]*s)
		}
	}
}
