package kernels

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/invariants"
)

// TestInvariantCheckCatchesCorruption runs the check of the invariants build on correct
// results (it must pass) and on results corrupted one field at a time (it must name each).
func TestInvariantCheckCatchesCorruption(t *testing.T) {
	cols := randomColumns(rand.New(rand.NewPCG(11, 12)), 40)
	for _, name := range []string{"drmas", "grpo", "rloo"} {
		sp, err := ParseSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, sparse := range []int{0, 7} {
			compute := func() *Result {
				out := &Result{SparseStats: sparse}
				if err := ComputeMany(context.Background(), []Spec{sp}, cols, []*Result{out}); err != nil {
					t.Fatal(err)
				}
				return out
			}
			if err := checkInvariants([]Spec{sp}, cols, []*Result{compute()}); err != nil {
				t.Fatalf("%s sparse %d: correct result refused: %v", name, sparse, err)
			}
			for _, c := range []struct {
				what string
				mut  func(*Result)
			}{
				{"advantage at row", func(r *Result) { r.Advantage[17] += 1e-3 }},
				{"advantage not finite", func(r *Result) { r.Advantage[3] = float32(math.NaN()) }},
				{"baseline mean", func(r *Result) { r.BaselineMean[len(r.BaselineMean)-1] += 1e-6 }},
				{"baseline std", func(r *Result) { r.BaselineStd[0] = r.BaselineStd[0]*1.01 + 1e-3 }},
				{"group size", func(r *Result) { r.GroupSize[1]++ }},
			} {
				out := compute()
				c.mut(out)
				err := checkInvariants([]Spec{sp}, cols, []*Result{out})
				if !errors.Is(err, invariants.ErrViolated) || !strings.Contains(err.Error(), c.what) {
					t.Errorf("%s sparse %d, corrupted %s: %v", name, sparse, c.what, err)
				}
			}
		}
	}
}
