package estimators

import (
	"fmt"
	"math"

	"github.com/drmas-dev/drmas/internal/invariants"
)

// checkInvariants runs at the end of a successful computeMany in builds with the invariants
// tag: every result must equal the map-based Reference on the same columns (advantages
// within 1e-6 relative, statistics within 1e-9 relative, both plus rlooSlack for rloo; group
// sizes exact; compact statistics against the rows PairRow names), and every advantage must
// be finite.
func checkInvariants(specs []Spec, cols *Columns, outs []*Result) error {
	for i, sp := range specs {
		ref, err := Reference(sp, cols)
		if err != nil {
			return fmt.Errorf("estimators: %w: the fast path accepted columns the reference refuses: %v", invariants.ErrViolated, err)
		}
		slack := rlooSlack(sp, cols)
		o := outs[i]
		bad := func(what string, row int, got, want any) error {
			return fmt.Errorf("estimators: %w: %s %s at row %d: fast path %v, reference %v", invariants.ErrViolated, sp, what, row, got, want)
		}
		for r, a := range o.Advantage {
			if math.IsNaN(float64(a)) || math.IsInf(float64(a), 0) {
				return bad("advantage not finite", r, a, ref.Advantage[r])
			}
			if !closeRel(float64(a), float64(ref.Advantage[r]), 1e-6, slack[r]) {
				return bad("advantage", r, a, ref.Advantage[r])
			}
		}
		rowOf := func(j int) int { return j }
		if o.compact(sp) {
			rowOf = func(j int) int { return int(o.PairRow[j]) }
		}
		for j := range o.BaselineMean {
			r := rowOf(j)
			if !closeRel(o.BaselineMean[j], ref.BaselineMean[r], 1e-9, slack[r]) {
				return bad("baseline mean", r, o.BaselineMean[j], ref.BaselineMean[r])
			}
			if !closeRel(o.BaselineStd[j], ref.BaselineStd[r], 1e-9, 0) {
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
// below 1), plus an absolute slack.
func closeRel(a, b, rel, slack float64) bool {
	return math.Abs(a-b) <= rel*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))+slack
}

// rlooSlack returns, per row, the absolute difference allowed between the fast path's rloo
// baseline and advantage and Reference's, on top of the relative tolerance (0 for the other
// estimators, whose fast path does Reference's operations in Reference's order). The fast
// path takes the leave-one-out mean as (Σ − x)/(n−1), Reference sums the other rows: two sums
// of the group's scores rounded differently, each within about n·2⁻⁵³·max|score| of the exact
// value, which is far beyond the relative tolerance when scores of very different size cancel
// (1e16, 1, −1e16: row 1's advantage is 1.5 against 1). The slack is (n+4)·2⁻⁵¹·max|score|
// over the row's rloo group: about twice the two bounds together, last roundings included.
func rlooSlack(sp Spec, cols *Columns) []float64 {
	slack := make([]float64, len(cols.Score))
	if sp.Estimator != RLOO {
		return slack
	}
	key := func(i int) refKey {
		k := refKey{cols.Group[i], -1}
		if sp.PerAgent {
			k.sub = cols.Agent[i]
		}
		return k
	}
	maxAbs := map[refKey]float64{}
	size := map[refKey]int{}
	for i, x := range cols.Score {
		k := key(i)
		maxAbs[k] = math.Max(maxAbs[k], math.Abs(x))
		size[k]++
	}
	for i := range slack {
		k := key(i)
		slack[i] = float64(size[k]+4) * 0x1p-51 * maxAbs[k]
	}
	return slack
}
