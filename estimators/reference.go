package estimators

import "math"

// refStats is the textbook statistic of docs/design.md, "Estimators" over xs, in the given order: one element
// gives μ = 0, σ = 1; all-equal elements give μ = that value, σ = 0; otherwise the mean and the
// unbiased (n−1) sample std by the two-pass formula.
func refStats(xs []float64) (mu, sd float64) {
	if len(xs) == 1 {
		return 0, 1
	}
	equal := true
	for _, x := range xs {
		if x != xs[0] {
			equal = false
		}
	}
	if equal {
		return xs[0], 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	mu = sum / float64(len(xs))
	ss := 0.0
	for _, x := range xs {
		ss += float64((x - mu) * (x - mu)) // rounded before the sum, as Compute does: never fused
	}
	return mu, math.Sqrt(ss / float64(len(xs)-1))
}

type refKey struct{ group, sub int32 }

// Reference computes the advantage column of spec straight from the formulas, with maps and
// per-group slices; it is the oracle Compute is tested against, not meant to be fast. It
// validates like Compute (same errors for the same input, checked in the same order: the spec,
// the column lengths, trajectory codes for grpo, the rows, then the first row whose statistics
// or advantage overflow).
func Reference(spec Spec, cols *Columns) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	if spec.UsesTraj() && cols.Traj == nil && len(cols.Score) > 0 && cols.shapeOK() {
		return Result{}, errNoTraj
	}
	if err := cols.Validate(); err != nil {
		return Result{}, err
	}
	n := len(cols.Score)
	out := Result{
		Advantage:    make([]float32, n),
		BaselineMean: make([]float64, n),
		BaselineStd:  make([]float64, n),
		GroupSize:    make([]int32, n),
	}
	eps := spec.eps()
	advantage := func(x, mu, sd float64) float32 {
		if spec.NormStd {
			return float32((x - mu) / (sd + eps))
		}
		return float32(x - mu)
	}

	if spec.Estimator == GRPO {
		// Trajectories of each group in order of first appearance; rows of each trajectory.
		trajRows := map[refKey][]int{}
		trajsOf := map[int32][]refKey{}
		for i := range n {
			k := refKey{cols.Group[i], cols.Traj[i]}
			if _, ok := trajRows[k]; !ok {
				trajsOf[k.group] = append(trajsOf[k.group], k)
			}
			trajRows[k] = append(trajRows[k], i)
		}
		for _, trajs := range trajsOf {
			rbar := make([]float64, len(trajs))
			for j, t := range trajs {
				var xs []float64
				for _, i := range trajRows[t] {
					xs = append(xs, cols.Score[i])
				}
				rbar[j] = meanOf(xs)
			}
			mu, sd := refStats(rbar)
			for j, t := range trajs {
				for _, i := range trajRows[t] {
					out.Advantage[i] = advantage(rbar[j], mu, sd)
					out.BaselineMean[i], out.BaselineStd[i], out.GroupSize[i] = mu, sd, int32(len(trajs))
				}
			}
		}
		return refFinite(spec, cols, out)
	}

	perAgent := spec.Estimator == DrMAS || (spec.Estimator == RLOO && spec.PerAgent)
	rows := map[refKey][]int{}
	for i := range n {
		k := refKey{cols.Group[i], -1}
		if perAgent {
			k.sub = cols.Agent[i]
		}
		rows[k] = append(rows[k], i)
	}
	for _, idx := range rows {
		size := int32(len(idx))
		if spec.Estimator == RLOO {
			for _, i := range idx {
				x := cols.Score[i]
				b := x // a group of one: advantage 0
				if size > 1 {
					others := 0.0
					for _, j := range idx {
						if j != i {
							others += cols.Score[j]
						}
					}
					b = others / float64(size-1)
				}
				out.Advantage[i] = float32(x - b)
				out.BaselineMean[i], out.BaselineStd[i], out.GroupSize[i] = b, 1, size
			}
			continue
		}
		xs := make([]float64, len(idx))
		for j, i := range idx {
			xs[j] = cols.Score[i]
		}
		mu, sd := refStats(xs)
		for _, i := range idx {
			out.Advantage[i] = advantage(cols.Score[i], mu, sd)
			out.BaselineMean[i], out.BaselineStd[i], out.GroupSize[i] = mu, sd, size
		}
	}
	return refFinite(spec, cols, out)
}

// refFinite returns out, or the error for its first row whose statistics or advantage are not
// finite.
func refFinite(spec Spec, cols *Columns, out Result) (Result, error) {
	for i := range out.Advantage {
		if err := rowFinite(spec, i, cols.Group[i], cols.Agent[i], out.BaselineMean[i], out.BaselineStd[i], out.Advantage[i]); err != nil {
			return Result{}, err
		}
	}
	return out, nil
}

// meanOf is the plain mean; all-equal values give that value exactly.
func meanOf(xs []float64) float64 {
	equal, sum := true, 0.0
	for _, x := range xs {
		sum += x
		equal = equal && x == xs[0]
	}
	if equal {
		return xs[0]
	}
	return sum / float64(len(xs))
}
