package estimators

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/drmas-dev/drmas/internal/invariants"
)

// Result is one advantage column with the statistics used, row-aligned with the input.
//
//   - Advantage: the row's advantage (computed in float64, rounded once to float32).
//   - BaselineMean, BaselineStd: the μ and σ the row was normalized with, after the singleton
//     rule (a statistic over one element reports μ = 0, σ = 1). For grpo they are the statistics
//     of the trajectory means, for drmas those of the (uid, agent) rows, for grpo_step those of
//     the uid's rows. With NormStd false σ is still reported, though not divided by.
//     For rloo, BaselineMean is the leave-one-out mean that was subtracted (for a group of one it
//     is the score itself, so that Advantage = score − BaselineMean always holds and is 0) and
//     BaselineStd is 1.
//   - GroupSize: the number of elements the statistic was computed over: trajectories of the
//     uid for grpo, rows of the (uid, agent) for drmas and rloo_agent, rows of the uid for
//     grpo_step and rloo.
//
// A Result may be reused across calls: slices with enough capacity are resliced, not
// reallocated, and it keeps scratch space for the kernel. A Result must not be used by two
// calls at the same time.
type Result struct {
	Advantage    []float32
	BaselineMean []float64
	BaselineStd  []float64
	GroupSize    []int32

	// SparseStats, when > 0 (set by the caller), makes ComputeMany store the statistics of a
	// spec whose statistics are constant per (group, agent) pair (Spec.PerPair) compactly: one
	// entry per pair and block of SparseStats rows (blocks start at row 0, SparseStats,
	// 2×SparseStats, …), in the order of the pairs' first rows in the block. BaselineMean,
	// BaselineStd and GroupSize then hold one entry per (pair, block), not per row, and
	// PairRow[j] is the row that entry j describes (its pair's first row in the block).
	// Advantage is always one value per row; a spec that is not PerPair (rloo) ignores
	// SparseStats. For writers that store statistics once per pair and block: the per-row
	// statistics would be 20 bytes a row of memory touched for a few bytes a pair.
	SparseStats int
	PairRow     []int32

	ws *workspace
}

// resize sizes r for n rows: per-row statistics, or none yet when they are compact.
func (r *Result) resize(n int, compact bool) {
	r.Advantage = grow(r.Advantage, n)
	if compact {
		r.BaselineMean, r.BaselineStd, r.GroupSize = r.BaselineMean[:0], r.BaselineStd[:0], r.GroupSize[:0]
		r.PairRow = r.PairRow[:0]
		return
	}
	r.BaselineMean = grow(r.BaselineMean, n)
	r.BaselineStd = grow(r.BaselineStd, n)
	r.GroupSize = grow(r.GroupSize, n)
	r.PairRow = r.PairRow[:0]
}

// compact reports whether ComputeMany stores r's statistics of sp compactly (see SparseStats).
func (r *Result) compact(sp Spec) bool { return r.SparseStats > 0 && sp.PerPair() }

func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// ctxEvery is how many rows are processed between two looks at ctx.
const ctxEvery = 1 << 16

// safeScore bounds the scores of a group whose statistics and advantages need no finiteness
// check. With every |score| ≤ 1e30 and fewer than 2³¹ rows, sums stay below 1e40 and sums of
// squared deviations below 1e71, finite in float64; and every advantage is finite in float32
// (|A| < 3.4e38): |score − μ| ≤ 2e30 without σ, an rloo advantage n/(n−1)·|score − mean| ≤
// 4e30, and a σ-normalized one at most √(n−1) (|score| for a singleton) — given ε ≥ MinEps,
// so that (score − μ)/ε cannot overflow where (score − μ)² underflows.
const safeScore = 1e30

// linearTraj is how many trajectories of a group are searched linearly before the dense
// code → slot table is used.
const linearTraj = 32

// workspace is the per-call scratch: per-agent and per-trajectory accumulators of the current
// group, and the group codes seen (for the contiguity check).
type workspace struct {
	// per agent code
	aCnt           []int32
	aSum, aM2      []float64
	aMu, aSd       []float64
	aFirst         []float64 // first score of the agent in the group
	aDev           []float64 // Σ|score − aFirst|: > 0 iff some score differs (branch-free test)
	touched        []int32   // agents present in the current group, in order of appearance
	aSeen          []bool    // agents whose statistics a compact write has written in the block
	seenList       []int32   // the agents set in aSeen
	pooledN        int
	pooledMu       float64
	pooledSd       float64
	pooledSum      float64
	trajN          int
	trajMu, trajSd float64
	safe           bool // every |score| of the group is ≤ safeScore (see checkFinite)
	// per trajectory slot of the current group (order of first appearance)
	tCode   []int32
	tCnt    []int32
	tSum    []float64
	tFirst  []float64
	tDev    []float64
	rowSlot []int32 // slot of each row of the current group
	dense   []int32 // traj code → slot+1 (0 = absent), used for groups with many trajectories

	runCodes []int32
	bits     []uint64
	sorted   []int32
}

func (w *workspace) prepare(numAgents int) {
	w.aCnt = grow(w.aCnt, numAgents)
	w.aSum = grow(w.aSum, numAgents)
	w.aM2 = grow(w.aM2, numAgents)
	w.aMu = grow(w.aMu, numAgents)
	w.aSd = grow(w.aSd, numAgents)
	w.aFirst = grow(w.aFirst, numAgents)
	w.aDev = grow(w.aDev, numAgents)
	w.aSeen = grow(w.aSeen, numAgents)
	clear(w.aSeen)
	clear(w.aDev)
	clear(w.aCnt)
	clear(w.aSum)
	clear(w.aM2)
	w.touched = w.touched[:0]
}

type needs struct{ agent, traj bool }

// finish turns a count, a sum and a sum of squared deviations into (μ, σ) with the rules of
// docs/design.md, "Estimators": one element gives μ = 0, σ = 1. When every value is equal (varies false) μ is
// that value (first) and σ = 0 exactly, so that rounding in sum/n cannot leave a residue
// ~1e-17 in σ (which matters for σ = 0 tests, not for the advantage).
func finish(n int, sum, m2 float64, varies bool, first float64) (float64, float64) {
	switch {
	case n == 1:
		return 0, 1
	case !varies:
		return first, 0
	}
	return sum / float64(n), math.Sqrt(m2 / float64(n-1))
}

// group computes the statistics of rows [s, e) of one group. It returns false when a row is
// invalid (agent code out of range, non-finite score, negative trajectory code); the caller then
// reports the problem through Columns.Validate.
func (w *workspace) group(c *Columns, s, e int, nd needs) bool {
	for _, k := range w.touched {
		w.aCnt[k], w.aSum[k], w.aM2[k], w.aDev[k] = 0, 0, 0, 0
	}
	w.touched = w.touched[:0]
	sc := c.Score[s:e]
	ag := c.Agent[s:e]
	ag = ag[:len(sc)]
	na := uint32(len(w.aCnt))
	x0 := sc[0]

	// Pass 1: sums, in row order. chk stays 0 unless a score is NaN or ±Inf (x*0 is NaN then).
	// Whether values vary is tracked as Σ|x − first| (x − y == 0 iff x == y for finite floats,
	// subnormals included), not with a branch that random scores would mispredict.
	var sum, chk, dev float64
	if nd.agent {
		aCnt, aSum, aFirst, aDev := w.aCnt, w.aSum, w.aFirst, w.aDev
		for i, x := range sc {
			a := ag[i]
			if uint32(a) >= na {
				return false
			}
			chk += x * 0
			sum += x
			if aCnt[a] == 0 {
				w.touched = append(w.touched, a)
				aFirst[a] = x
			}
			aCnt[a]++
			aSum[a] += x
			aDev[a] += math.Abs(x - aFirst[a])
		}
		for _, k := range w.touched {
			dev += aDev[k] + math.Abs(aFirst[k]-x0)
		}
	} else {
		for i, x := range sc {
			if uint32(ag[i]) >= na {
				return false
			}
			chk += x * 0
			sum += x
			dev += math.Abs(x - x0)
		}
	}
	if chk != 0 {
		return false
	}
	// |x0| + Σ|x − x0| bounds every |score| of the group: one comparison for the group, and a
	// scan only when the bound is too large.
	w.safe = math.Abs(x0)+dev <= safeScore
	if !w.safe {
		m := 0.0
		for _, x := range sc {
			m = max(m, math.Abs(x))
		}
		w.safe = m <= safeScore
	}
	var tr []int32 // nil when the columns have no trajectories (only grpo reads them)
	if len(c.Traj) > 0 {
		tr = c.Traj[s:e]
		tr = tr[:len(sc)]
		var tor int32
		for _, t := range tr {
			tor |= t
		}
		if tor < 0 {
			return false
		}
	}
	n := len(sc)
	mu := sum / float64(n)

	// Pass 2: squared deviations, in row order.
	var m2 float64
	if nd.agent {
		for _, k := range w.touched {
			w.aMu[k] = w.aSum[k] / float64(w.aCnt[k])
		}
		aMu, aM2 := w.aMu, w.aM2
		for i, x := range sc {
			d := x - mu
			m2 += float64(d * d)
			a := ag[i]
			da := x - aMu[a]
			aM2[a] += float64(da * da)
		}
		for _, k := range w.touched {
			w.aMu[k], w.aSd[k] = finish(int(w.aCnt[k]), w.aSum[k], w.aM2[k], w.aDev[k] != 0, w.aFirst[k])
		}
	} else {
		for _, x := range sc {
			d := x - mu
			m2 += float64(d * d)
		}
	}
	w.pooledN, w.pooledSum = n, sum
	w.pooledMu, w.pooledSd = finish(n, sum, m2, dev != 0, x0)

	if nd.traj {
		w.trajStats(sc, tr, int32(min(len(c.Score)+1<<16, math.MaxInt32)))
	}
	return true
}

// trajStats assigns each row of the group a trajectory slot and computes the statistics of the
// trajectory means. Rows of a trajectory are usually adjacent: the last slot is tried first,
// then a linear search over the group's trajectories; a group with more than linearTraj
// trajectories switches to a dense code → slot table for codes up to denseLimit (larger codes,
// which dense coding should never produce, keep the linear search).
func (w *workspace) trajStats(sc []float64, tr []int32, denseLimit int32) {
	w.tCode, w.tCnt, w.tSum = w.tCode[:0], w.tCnt[:0], w.tSum[:0]
	w.tFirst, w.tDev = w.tFirst[:0], w.tDev[:0]
	w.rowSlot = grow(w.rowSlot, len(sc))
	rs := w.rowSlot[:len(sc)]
	useDense := false
	last, slot := int32(-1), int32(-1)
	for i, x := range sc {
		t := tr[i]
		if t != last {
			slot = -1
			if useDense && t <= denseLimit {
				if int(t) < len(w.dense) {
					slot = w.dense[t] - 1
				}
			} else {
				for j, u := range w.tCode {
					if u == t {
						slot = int32(j)
						break
					}
				}
			}
			if slot < 0 {
				slot = int32(len(w.tCode))
				w.tCode = append(w.tCode, t)
				w.tCnt = append(w.tCnt, 0)
				w.tSum = append(w.tSum, 0)
				w.tFirst = append(w.tFirst, x)
				w.tDev = append(w.tDev, 0)
				if useDense {
					w.setDense(t, slot, denseLimit)
				} else if len(w.tCode) > linearTraj {
					useDense = true
					for j, u := range w.tCode {
						w.setDense(u, int32(j), denseLimit)
					}
				}
			}
			last = t
		}
		rs[i] = slot
		w.tCnt[slot]++
		w.tSum[slot] += x
		w.tDev[slot] += math.Abs(x - w.tFirst[slot])
	}
	if useDense {
		for _, u := range w.tCode {
			if int(u) < len(w.dense) {
				w.dense[u] = 0
			}
		}
	}
	// Trajectory means, then their statistics in slot order.
	nt := len(w.tCode)
	// R̄ of a trajectory whose rows all have the same score is that score exactly.
	var sum float64
	varies := false
	for j := range nt {
		m := w.tSum[j] / float64(w.tCnt[j])
		if w.tDev[j] == 0 {
			m = w.tFirst[j]
		}
		w.tSum[j] = m // tSum now holds R̄ of the slot
		sum += m
		if m != w.tSum[0] {
			varies = true
		}
	}
	mu := sum / float64(nt)
	var m2 float64
	for _, m := range w.tSum[:nt] {
		d := m - mu
		m2 += float64(d * d)
	}
	w.trajN = nt
	w.trajMu, w.trajSd = finish(nt, sum, m2, varies, w.tSum[0])
}

// setDense records slot for trajectory code t if t <= limit.
func (w *workspace) setDense(t, slot, limit int32) {
	if t > limit {
		return
	}
	if int(t) >= len(w.dense) {
		n := min(max(2*len(w.dense), int(t)+1, 1024), int(limit)+1)
		d := make([]int32, n)
		copy(d, w.dense)
		w.dense = d
	}
	w.dense[t] = slot + 1
}

// write fills rows [s, e) of out for spec from the current group statistics.
func (w *workspace) write(sp Spec, c *Columns, s, e int, out *Result) {
	sc := c.Score[s:e]
	n := len(sc)
	adv := out.Advantage[s:e]
	adv = adv[:n]
	if out.compact(sp) {
		w.writeAdvantages(sp, c, s, e, adv)
		w.appendPairStats(sp, c.Agent[s:e], s, out)
		return
	}
	bm := out.BaselineMean[s:e]
	bm = bm[:n]
	bs := out.BaselineStd[s:e]
	bs = bs[:n]
	gs := out.GroupSize[s:e]
	gs = gs[:n]
	switch sp.Estimator {
	case DrMAS:
		ag := c.Agent[s:e]
		ag = ag[:n]
		aMu, aSd, aCnt := w.aMu, w.aSd, w.aCnt
		w.writeAdvantages(sp, c, s, e, adv)
		for i, k := range ag {
			bm[i], bs[i], gs[i] = aMu[k], aSd[k], aCnt[k]
		}
	case GRPOStep, GRPO:
		w.writeAdvantages(sp, c, s, e, adv)
		mu, sd, gn := w.groupStats(sp)
		fill(bm, mu)
		fill(bs, sd)
		fill(gs, gn)
	case RLOO:
		if !w.safe {
			w.writeRLOOExact(sp, c, s, e, adv, bm, gs)
		} else if sp.PerAgent {
			ag := c.Agent[s:e]
			ag = ag[:n]
			aSum, aCnt := w.aSum, w.aCnt
			for i, x := range sc {
				k := ag[i]
				b := rlooBaseline(x, aSum[k], aCnt[k])
				adv[i] = float32(x - b)
				bm[i], gs[i] = b, aCnt[k]
			}
		} else {
			sum, gn := w.pooledSum, int32(w.pooledN)
			for i, x := range sc {
				b := rlooBaseline(x, sum, gn)
				adv[i] = float32(x - b)
				bm[i] = b
			}
			fill(gs, gn)
		}
		fill(bs, 1)
	}
}

// writeRLOOExact is the rloo write of a group with huge scores (not w.safe): each baseline sums
// the other rows in row order, as Reference does, so that overflow (or its absence) is the
// same as in Reference: the sum of all rows can overflow where the others' sum does not, and
// the float32 advantage is finite or not by a rounding. O(n²) in the group's size, for groups
// with a |score| above safeScore only.
func (w *workspace) writeRLOOExact(sp Spec, c *Columns, s, e int, adv []float32, bm []float64, gs []int32) {
	sc := c.Score[s:e]
	ag := c.Agent[s:e]
	for i, x := range sc {
		b, n := 0.0, int32(0)
		for j, y := range sc {
			if !sp.PerAgent || ag[j] == ag[i] {
				n++
				if j != i {
					b += y
				}
			}
		}
		if n == 1 {
			b = x
		} else {
			b /= float64(n - 1)
		}
		adv[i] = float32(x - b)
		bm[i], gs[i] = b, n
	}
}

// checkFinite returns the error for the first row of the group (rows [s, e)) whose statistics
// or advantage of some spec, in spec order, are not finite, then for the first row whose
// diagnostic statistics are not (when diag). computeMany calls it for groups that are not
// w.safe: the others cannot overflow.
func (w *workspace) checkFinite(specs []Spec, c *Columns, s, e int, outs []*Result, diag bool) error {
	for i, sp := range specs {
		adv := outs[i].Advantage
		for r := s; r < e; r++ {
			var mu, sd float64
			switch sp.Estimator {
			case DrMAS:
				k := c.Agent[r]
				mu, sd = w.aMu[k], w.aSd[k]
			case GRPO:
				mu, sd = w.trajMu, w.trajSd
			case GRPOStep:
				mu, sd = w.pooledMu, w.pooledSd
			case RLOO:
				mu, sd = outs[i].BaselineMean[r], 1
			}
			if err := rowFinite(sp, r, c.Group[r], c.Agent[r], mu, sd, adv[r]); err != nil {
				return err
			}
		}
	}
	if diag {
		for r := s; r < e; r++ {
			k := c.Agent[r]
			if err := diagFinite(r, c.Group[r], k, w.pooledMu, w.pooledSd, w.aMu[k], w.aSd[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// OverflowError is the error for the first row whose statistics or advantage are not finite
// although its scores are: the scores are too large for float64 statistics or a float32
// advantage. Row, Group and Agent index the Columns (row index, group and agent codes), so that
// a caller holding the keys can name the row's uid and agent.
type OverflowError struct {
	Estimator string // the spec's name, or "diagnostics"
	Row       int
	Group     int32
	Agent     int32
	What      string // e.g. "baseline std", "advantage", "group mean"
}

func (e *OverflowError) Error() string {
	return fmt.Sprintf("estimators: %s: row %d (group %d, agent %d): %s is not finite; the scores are too large, scale them down",
		e.Estimator, e.Row, e.Group, e.Agent, e.What)
}

// rowFinite returns the *OverflowError for a row whose baseline mean, baseline std or advantage
// under sp is not finite (nil if all are): the scores are too large for float64 statistics or a
// float32 advantage. Compute and Reference report the first such row.
func rowFinite(sp Spec, row int, group, agent int32, mu, sd float64, adv float32) error {
	what := ""
	switch {
	case !finite(mu):
		what = "baseline mean"
	case !finite(sd):
		what = "baseline std"
	case !finite(float64(adv)):
		what = "advantage"
	default:
		return nil
	}
	return &OverflowError{Estimator: sp.Name(), Row: row, Group: group, Agent: agent, What: what}
}

// diagFinite is rowFinite for a row's diagnostic statistics: those of its group (μ, σ), then
// those of its agent in the group (μ_k, σ_k).
func diagFinite(row int, group, agent int32, mu, sd, muK, sdK float64) error {
	what := ""
	switch {
	case !finite(mu):
		what = "group mean"
	case !finite(sd):
		what = "group std"
	case !finite(muK):
		what = "agent mean"
	case !finite(sdK):
		what = "agent std"
	default:
		return nil
	}
	return &OverflowError{Estimator: "diagnostics", Row: row, Group: group, Agent: agent, What: what}
}

// groupStats returns the group-level baseline of a grpo or grpo_step spec: (μ, σ, n) over
// trajectory means or over the pooled rows.
func (w *workspace) groupStats(sp Spec) (float64, float64, int32) {
	if sp.Estimator == GRPO {
		return w.trajMu, w.trajSd, int32(w.trajN)
	}
	return w.pooledMu, w.pooledSd, int32(w.pooledN)
}

// writeAdvantages fills adv (rows [s, e)) for a PerPair spec (drmas, grpo, grpo_step).
func (w *workspace) writeAdvantages(sp Spec, c *Columns, s, e int, adv []float32) {
	sc := c.Score[s:e]
	adv = adv[:len(sc)]
	eps := sp.eps()
	switch sp.Estimator {
	case DrMAS:
		ag := c.Agent[s:e]
		ag = ag[:len(sc)]
		aMu, aSd := w.aMu, w.aSd
		if sp.NormStd {
			for i, x := range sc {
				k := ag[i]
				adv[i] = float32((x - aMu[k]) / (aSd[k] + eps))
			}
		} else {
			for i, x := range sc {
				adv[i] = float32(x - aMu[ag[i]])
			}
		}
	case GRPOStep:
		mu, sd := w.pooledMu, w.pooledSd
		if sp.NormStd {
			den := sd + eps
			for i, x := range sc {
				adv[i] = float32((x - mu) / den)
			}
		} else {
			for i, x := range sc {
				adv[i] = float32(x - mu)
			}
		}
	case GRPO:
		mu, sd := w.trajMu, w.trajSd
		rs := w.rowSlot[:len(sc)]
		rbar := w.tSum
		den := sd + eps
		for i := range adv {
			r := rbar[rs[i]]
			if sp.NormStd {
				adv[i] = float32((r - mu) / den)
			} else {
				adv[i] = float32(r - mu)
			}
		}
	}
}

// appendPairStats appends to out's compact statistics one entry per (agent, block) first seen
// in the group's rows ag (rows s, s+1, … of the column; blocks start at multiples of
// out.SparseStats): the agent's statistics for drmas, the group's for grpo and grpo_step.
func (w *workspace) appendPairStats(sp Spec, ag []int32, s int, out *Result) {
	block := out.SparseStats
	perAgent := sp.Estimator == DrMAS
	mu, sd, gn := w.groupStats(sp)
	aMu, aSd, aCnt := w.aMu, w.aSd, w.aCnt
	seen, list := w.aSeen, w.seenList[:0]
	next := (s/block + 1) * block // the next block's first row
	for i, k := range ag {
		if s+i == next {
			for _, k := range list {
				seen[k] = false
			}
			list = list[:0]
			next += block
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		list = append(list, k)
		if perAgent {
			mu, sd, gn = aMu[k], aSd[k], aCnt[k]
		}
		out.PairRow = append(out.PairRow, int32(s+i))
		out.BaselineMean = append(out.BaselineMean, mu)
		out.BaselineStd = append(out.BaselineStd, sd)
		out.GroupSize = append(out.GroupSize, gn)
	}
	for _, k := range list {
		seen[k] = false
	}
	w.seenList = list
}

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// rlooBaseline is the mean of the other n−1 elements of a group whose sum is sum; for a group of
// one it is x itself (so the advantage is 0).
func rlooBaseline(x, sum float64, n int32) float64 {
	if n == 1 {
		return x
	}
	return (sum - x) / float64(n-1)
}

// Compute fills out with the advantage column of spec over cols. See ComputeMany.
func Compute(ctx context.Context, spec Spec, cols *Columns, out *Result) error {
	specs := [1]Spec{spec}
	outs := [1]*Result{out}
	return ComputeMany(ctx, specs[:], cols, outs[:])
}

// ComputeMany fills outs[i] with the advantage column of specs[i], in one pass over the data:
// each group's rows are read while in cache and the per-agent, pooled and trajectory statistics
// are computed once for all specs that need them. outs must be non-nil and distinct; their
// slices are resized to the row count (reusing capacity). The input is validated as it is read;
// an invalid input returns a *ValidationError (see Columns.Validate). Scores so large that a
// statistic or an advantage of some spec is not finite return an *OverflowError naming the
// first such row (checked per group: groups whose |scores| are all ≤ 1e30 cannot overflow). ctx is
// checked on entry and every 64 Ki rows; a cancelled ctx returns ctx.Err().
func ComputeMany(ctx context.Context, specs []Spec, cols *Columns, outs []*Result) error {
	return computeMany(ctx, specs, cols, outs, nil)
}

// ComputeWithDiagnostics is ComputeMany that also returns the per-agent diagnostics of cols,
// equal to Diagnose(cols), computed in the same pass over the data (each group's statistics
// are computed once for both). It is meant for the normalize stage, which needs both; the
// diagnostics are appended to diags[:0] (reusing its capacity).
func ComputeWithDiagnostics(ctx context.Context, specs []Spec, cols *Columns, outs []*Result, diags []AgentDiagnostics) ([]AgentDiagnostics, error) {
	if cols.NumAgents < 0 {
		return nil, invalid(cols)
	}
	acc := make([]diagAcc, cols.NumAgents)
	if err := computeMany(ctx, specs, cols, outs, acc); err != nil {
		return nil, err
	}
	diags = diags[:0]
	for k := range acc {
		diags = append(diags, acc[k].result(int32(k)))
	}
	return diags, nil
}

// computeMany is ComputeMany; with a non-nil acc (len NumAgents) it also accumulates each
// group's per-agent diagnostics, as Diagnose does.
func computeMany(ctx context.Context, specs []Spec, cols *Columns, outs []*Result, acc []diagAcc) error {
	if len(specs) != len(outs) {
		return fmt.Errorf("estimators: %d specs but %d results", len(specs), len(outs))
	}
	if len(specs) == 0 && acc == nil {
		return nil
	}
	var nd needs
	nd.agent = acc != nil
	for i, sp := range specs {
		if err := sp.Validate(); err != nil {
			return err
		}
		if outs[i] == nil {
			return fmt.Errorf("estimators: result %d is nil", i)
		}
		for j := range i {
			if outs[j] == outs[i] {
				return fmt.Errorf("estimators: results %d and %d are the same Result", j, i)
			}
		}
		nd.agent = nd.agent || sp.Estimator == DrMAS || (sp.Estimator == RLOO && sp.PerAgent)
		nd.traj = nd.traj || sp.Estimator == GRPO
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := len(cols.Score)
	if !cols.shapeOK() {
		return invalid(cols)
	}
	if nd.traj && cols.Traj == nil && n > 0 {
		return errNoTraj
	}
	for i, o := range outs {
		o.resize(n, o.compact(specs[i]))
	}
	var w *workspace
	if len(outs) > 0 {
		if outs[0].ws == nil {
			outs[0].ws = new(workspace)
		}
		w = outs[0].ws
	} else {
		w = new(workspace)
	}
	w.prepare(cols.NumAgents)
	grp := cols.Group
	runCodes := w.runCodes[:0]
	maxCode := int32(0)
	nextCtx := ctxEvery
	for s := 0; s < n; {
		g := grp[s]
		e := s + 1
		for e < n && grp[e] == g {
			e++
		}
		if g < 0 || !w.group(cols, s, e, nd) {
			w.runCodes = runCodes
			return invalid(cols)
		}
		runCodes = append(runCodes, g)
		maxCode = max(maxCode, g)
		if acc != nil {
			for _, k := range w.touched {
				acc[k].add(int(w.aCnt[k]), w.aMu[k], w.aSd[k], w.pooledMu, w.pooledSd)
			}
		}
		for i, sp := range specs {
			w.write(sp, cols, s, e, outs[i])
		}
		if !w.safe {
			if err := w.checkFinite(specs, cols, s, e, outs, acc != nil); err != nil {
				w.runCodes = runCodes
				if verr := cols.Validate(); verr != nil {
					return verr // rows not read yet may be invalid: that is reported first
				}
				return err
			}
		}
		if e >= nextCtx {
			if err := ctx.Err(); err != nil {
				w.runCodes = runCodes
				return err
			}
			nextCtx = e + ctxEvery
		}
		s = e
	}
	w.runCodes = runCodes
	if !checkRunCodes(runCodes, maxCode, n, &w.bits, &w.sorted) {
		return invalid(cols)
	}
	if invariants.Enabled {
		return checkInvariants(specs, cols, outs)
	}
	return nil
}

// errNoTraj is the error of a grpo spec on Columns without trajectory codes.
var errNoTraj = errors.New("estimators: grpo needs trajectory codes, but Columns.Traj is nil")

// invalid returns the detailed validation error of a Columns the fast path found invalid.
func invalid(c *Columns) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return errors.New("estimators: internal error: fast path rejected columns that Validate accepts")
}
