package kernels

import (
	"fmt"
	"math"

	"github.com/drmas-dev/drmas/internal/invariants"
)

// checkInvariants runs at the end of a successful computeMany in builds with the invariants
// tag: every result must equal the map-based Reference on the same columns (advantages
// within 1e-6 relative, statistics within 1e-9 relative, group sizes exact; compact
// statistics against the rows PairRow names), and every advantage must be finite.
func checkInvariants(specs []Spec, cols *Columns, outs []*Result) error {
	for i, sp := range specs {
		ref, err := Reference(sp, cols)
		if err != nil {
			return fmt.Errorf("kernels: %w: the fast path accepted columns the reference refuses: %v", invariants.ErrViolated, err)
		}
		o := outs[i]
		bad := func(what string, row int, got, want any) error {
			return fmt.Errorf("kernels: %w: %s %s at row %d: fast path %v, reference %v", invariants.ErrViolated, sp, what, row, got, want)
		}
		for r, a := range o.Advantage {
			if math.IsNaN(float64(a)) || math.IsInf(float64(a), 0) {
				return bad("advantage not finite", r, a, ref.Advantage[r])
			}
			if !closeRel(float64(a), float64(ref.Advantage[r]), 1e-6) {
				return bad("advantage", r, a, ref.Advantage[r])
			}
		}
		rowOf := func(j int) int { return j }
		if o.compact(sp) {
			rowOf = func(j int) int { return int(o.PairRow[j]) }
		}
		for j := range o.BaselineMean {
			r := rowOf(j)
			if !closeRel(o.BaselineMean[j], ref.BaselineMean[r], 1e-9) {
				return bad("baseline mean", r, o.BaselineMean[j], ref.BaselineMean[r])
			}
			if !closeRel(o.BaselineStd[j], ref.BaselineStd[r], 1e-9) {
				return bad("baseline std", r, o.BaselineStd[j], ref.BaselineStd[r])
			}
			if o.GroupSize[j] != ref.GroupSize[r] {
				return bad("group size", r, o.GroupSize[j], ref.GroupSize[r])
			}
		}
	}
	return nil
}

// closeRel says whether a and b agree within rel relative to the larger magnitude (absolute
// below 1).
func closeRel(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
