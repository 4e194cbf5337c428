package estimators

import "context"

import "math"

// AgentDiagnostics are the gradient-norm diagnostics of Dr. MAS (Lemma 4.2) for one agent,
// aggregated over the groups (uids) in which the agent has at least one row.
//
// For each such group: μ_k, σ_k are the statistics of the agent's rows in the group and μ, σ
// those of all rows of the group pooled, all with the rules of docs/design.md, "Estimators" (one element gives
// μ = 0, σ = 1; all-equal elements give σ = 0). The inflation of the group is
// (σ_k² + (μ_k − μ)²)/σ²: how much larger the agent's gradient norm is under the global baseline
// (μ, σ) than under its own (μ_k, σ_k). When σ = 0 the group has two or more rows, all with
// the same score, and the ratio has no meaning (0/0, or (1 + μ²)/0 for an agent with a single
// row in the group, whose μ_k = 0, σ_k = 1 by rule): such a group is left out of the inflation
// statistics and counted in ZeroSigmaGroups. Its advantages are 0 under every estimator except
// where a singleton rule applies: under drmas the row of an agent with a single row in the
// group, under grpo the rows of a group with a single trajectory (A = score/(1 + ε), or the
// score itself without σ). A group whose σ is so small next to σ_k and |μ_k − μ| (scores
// that differ by less than about 1e-154) that the ratio is above maxInflation (MaxFloat64/2³¹,
// so that a sum over groups stays finite) is counted so too: numerically σ = 0.
//
// An agent with no rows has Groups == 0 and every other field 0.
type AgentDiagnostics struct {
	Agent           int32
	Groups          int64 // groups in which the agent has ≥ 1 row
	Rows            int64 // the agent's rows
	SingletonGroups int64 // groups where the agent has exactly one row (μ_k = 0, σ_k = 1 by rule)

	// Means over the Groups groups.
	MeanMuK, MeanSigmaK float64
	MeanMu, MeanSigma   float64

	// Share of the Groups groups in which σ_k = 0 (the agent's scores all equal, ≥ 2 rows): no
	// learning signal for the agent under drmas.
	ZeroSigmaKShare float64

	// Inflation over the InflationGroups groups with σ > 0 (Groups − ZeroSigmaGroups).
	InflationMean, InflationMax float64
	InflationGroups             int64
	ZeroSigmaGroups             int64
}

// diagAcc accumulates one agent's diagnostics in group order.
type diagAcc struct {
	d                            AgentDiagnostics
	sumMuK, sumSdK, sumMu, sumSd float64
	sumInfl                      float64
	zeroSdK                      int64
}

// maxInflation is the largest inflation counted: a sum (and a mean) of fewer than 2³¹ of them
// is finite. A group with a larger one has σ numerically 0 beside the agent's statistics.
const maxInflation = math.MaxFloat64 / (1 << 31)

func (a *diagAcc) add(rows int, muK, sdK, mu, sd float64) {
	a.d.Groups++
	a.d.Rows += int64(rows)
	if rows == 1 {
		a.d.SingletonGroups++
	}
	a.sumMuK += muK
	a.sumSdK += sdK
	a.sumMu += mu
	a.sumSd += sd
	if sdK == 0 {
		a.zeroSdK++
	}
	if sd == 0 {
		a.d.ZeroSigmaGroups++
		return
	}
	// Each product rounded before the sum (an explicit conversion): no build fuses it into a
	// multiply-add, so the bits are the same for GOAMD64=v1 and v3.
	infl := (float64(sdK*sdK) + float64((muK-mu)*(muK-mu))) / (sd * sd)
	if math.IsInf(infl, 0) {
		// A square overflowed (μ near 1e160 beside μ_k = 0 by rule) or σ² underflowed: the
		// same ratio in terms that do not, where it is finite.
		r, q := sdK/sd, (muK-mu)/sd
		infl = float64(r*r) + float64(q*q)
	}
	if !(infl <= maxInflation) {
		// σ so small next to the agent's statistics (scores that differ by less than
		// about 1e-154) that the ratio is not a float64, or so large that its sum over
		// fewer than 2³¹ groups could overflow: numerically σ = 0.
		a.d.ZeroSigmaGroups++
		return
	}
	a.sumInfl += infl
	a.d.InflationMax = math.Max(a.d.InflationMax, infl)
	a.d.InflationGroups++
}

func (a *diagAcc) result(agent int32) AgentDiagnostics {
	d := a.d
	d.Agent = agent
	if d.Groups > 0 {
		g := float64(d.Groups)
		d.MeanMuK, d.MeanSigmaK, d.MeanMu, d.MeanSigma = a.sumMuK/g, a.sumSdK/g, a.sumMu/g, a.sumSd/g
		d.ZeroSigmaKShare = float64(a.zeroSdK) / g
	}
	if d.InflationGroups > 0 {
		d.InflationMean = a.sumInfl / float64(d.InflationGroups)
	}
	return d
}

// Diagnose computes the per-agent diagnostics of cols, indexed by agent code
// (len = NumAgents), in one pass over the contiguous groups (same kernel as Compute). Groups are
// aggregated in row order. Invalid input returns a *ValidationError; scores so large that a
// group's or an agent's μ or σ is not finite return an *OverflowError naming the first such row.
func Diagnose(cols *Columns) ([]AgentDiagnostics, error) {
	if cols.NumAgents < 0 {
		return nil, invalid(cols)
	}
	return ComputeWithDiagnostics(context.Background(), nil, cols, nil, make([]AgentDiagnostics, 0, cols.NumAgents))
}

// DiagnoseReference is the map-based oracle of Diagnose: it groups rows by uid and by
// (uid, agent) with maps, computes the statistics with the textbook formulas and aggregates
// the groups in order of first appearance. Like Diagnose, it returns an error naming the first
// row whose group or agent statistics are not finite.
func DiagnoseReference(cols *Columns) ([]AgentDiagnostics, error) {
	if err := cols.Validate(); err != nil {
		return nil, err
	}
	var order []int32
	pooled := map[int32][]float64{}
	rowsOf := map[int32][]int{}
	byAgent := map[refKey][]float64{}
	for i, x := range cols.Score {
		g := cols.Group[i]
		if _, ok := pooled[g]; !ok {
			order = append(order, g)
		}
		pooled[g] = append(pooled[g], x)
		rowsOf[g] = append(rowsOf[g], i)
		k := refKey{g, cols.Agent[i]}
		byAgent[k] = append(byAgent[k], x)
	}
	acc := make([]diagAcc, cols.NumAgents)
	for _, g := range order {
		mu, sd := refStats(pooled[g])
		muK := make([]float64, cols.NumAgents)
		sdK := make([]float64, cols.NumAgents)
		for k := range acc {
			xs, ok := byAgent[refKey{g, int32(k)}]
			if !ok {
				continue
			}
			muK[k], sdK[k] = refStats(xs)
			acc[k].add(len(xs), muK[k], sdK[k], mu, sd)
		}
		for _, i := range rowsOf[g] {
			k := cols.Agent[i]
			if err := diagFinite(i, g, k, mu, sd, muK[k], sdK[k]); err != nil {
				return nil, err
			}
		}
	}
	out := make([]AgentDiagnostics, cols.NumAgents)
	for k := range out {
		out[k] = acc[k].result(int32(k))
	}
	return out, nil
}
