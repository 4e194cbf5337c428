package estimators

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// TestStdNotFused: the two-pass std rounds every product before adding it, so the bits are
// the same on every CPU and build (GOAMD64=v3 and arm64 fuse x*y+z into an FMA unless the
// product is converted explicitly). `make test` also runs it with GOAMD64=v3.
func TestStdNotFused(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const groups, g = 2000, 8
	n := groups * g
	cols := &Columns{Group: make([]int32, n), Traj: make([]int32, n), Agent: make([]int32, n), Score: make([]float64, n), NumAgents: 1}
	for i := range n {
		cols.Group[i] = int32(i / g)
		cols.Traj[i] = int32(i % g)
		cols.Score[i] = rng.Float64()*1.1 - 0.1
	}
	spec, err := ParseSpec("grpo_step")
	if err != nil {
		t.Fatal(err)
	}
	var out Result
	if err := Compute(context.Background(), spec, cols, &out); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for k := range groups {
		sc := cols.Score[k*g : (k+1)*g]
		var sum float64
		for _, x := range sc {
			sum += x
		}
		mu := sum / g
		var m2 float64
		for _, x := range sc {
			d := x - mu
			m2 += float64(d * d) // a rounded product: never fused into an FMA
		}
		want := math.Sqrt(m2 / (g - 1))
		if got := out.BaselineStd[k*g]; got != want {
			if bad++; bad <= 3 {
				t.Errorf("group %d: pooled std %v (bits %x), want %v (bits %x)", k, got, math.Float64bits(got), want, math.Float64bits(want))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d groups: the std differs in its last bits (a fused multiply-add?)", bad, groups)
	}
}
