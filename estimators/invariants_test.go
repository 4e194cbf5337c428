package estimators

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

// TestRLOOCancellation: with scores of very different size the fast path's leave-one-out mean
// (Σ − x)/(n−1) and Reference's sum of the other rows round differently (1e16 + 1 is 1e16 in
// float64). Both are within rlooSlack of the exact values, and the invariant check (run by
// every Compute in the invariants build) accepts the fast path's result.
func TestRLOOCancellation(t *testing.T) {
	cols := &Columns{Group: []int32{0, 0, 0}, Traj: []int32{0, 1, 2}, Agent: []int32{0, 0, 0},
		Score: []float64{1e16, 1, -1e16}, NumAgents: 1}
	// Exact: row 0's others sum to 1 − 1e16, baseline −4999999999999999.5, A = 1.5e16 − 0.5;
	// row 1's to 0, A = 1; row 2's to 1e16 + 1, A = −1.5e16 − 0.5.
	exact := []float64{1.5e16 - 0.5, 1, -1.5e16 - 0.5}
	for _, name := range []string{"rloo", "rloo_agent"} {
		sp, _ := ParseSpec(name)
		var out Result
		if err := Compute(context.Background(), sp, cols, &out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ref, err := Reference(sp, cols)
		if err != nil {
			t.Fatal(err)
		}
		slack := rlooSlack(sp, cols)
		for i, want := range exact {
			for who, a := range map[string]float32{"Compute": out.Advantage[i], "Reference": ref.Advantage[i]} {
				if d := math.Abs(float64(a) - want); d > slack[i]+1e-6*math.Abs(want) {
					t.Errorf("%s %s row %d: advantage %v, exact %v: off by %v, slack %v", name, who, i, a, want, d, slack[i])
				}
			}
		}
		if out.Advantage[1] == ref.Advantage[1] {
			t.Errorf("%s: the fast path and Reference agree on row 1 (%v): the case no longer tests cancellation", name, out.Advantage[1])
		}
		if err := checkInvariants([]Spec{sp}, cols, []*Result{&out}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
