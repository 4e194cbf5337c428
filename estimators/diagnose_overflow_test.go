package estimators

import (
	"math"
	"testing"
)

// TestDiagnoseInflationFinite: the inflation of a group is finite whenever its scores are:
// computed as (σ_k/σ)² + ((μ_k − μ)/σ)² where (σ_k² + (μ_k − μ)²)/σ² overflows, and left out
// (counted with the σ = 0 groups) where even that is not a float64. An infinite inflation used
// to fail normalize with "json: unsupported value: +Inf".
func TestDiagnoseInflationFinite(t *testing.T) {
	big := 1e160
	hi := big * (1 + 0x1p-52) * (1 + 0x1p-52)
	for _, c := range []struct {
		scores []float64
		zeroSd int64 // groups left out, per agent
	}{
		// σ² underflows and 1/σ² (σ_k = 1 by rule) overflows: numerically σ = 0.
		{[]float64{0, 1.4e-155}, 1},
		// μ² overflows beside a finite σ: the inflation is (μ/σ)² + (1/σ)², about 4e30.
		{[]float64{big, hi}, 0},
	} {
		cols := &Columns{Group: []int32{0, 0}, Traj: []int32{0, 1}, Agent: []int32{0, 1}, Score: c.scores, NumAgents: 2}
		ds, err := Diagnose(cols)
		if err != nil {
			t.Fatalf("scores %v: %v", c.scores, err)
		}
		mu := (c.scores[0] + c.scores[1]) / 2
		sd := math.Abs(c.scores[1]-c.scores[0]) / math.Sqrt2 // sample std of two
		for _, d := range ds {
			if math.IsInf(d.InflationMean, 0) || math.IsNaN(d.InflationMean) || math.IsInf(d.InflationMax, 0) {
				t.Errorf("scores %v agent %d: inflation mean %v, max %v", c.scores, d.Agent, d.InflationMean, d.InflationMax)
			}
			if d.ZeroSigmaGroups != c.zeroSd || d.InflationGroups != 1-c.zeroSd {
				t.Errorf("scores %v agent %d: %d zero-σ groups and %d inflation groups, want %d and %d", c.scores, d.Agent, d.ZeroSigmaGroups, d.InflationGroups, c.zeroSd, 1-c.zeroSd)
			}
			if c.zeroSd == 0 {
				want := (1/sd)*(1/sd) + (mu/sd)*(mu/sd) // singleton: μ_k = 0, σ_k = 1
				if math.Abs(d.InflationMean-want) > 1e-12*want {
					t.Errorf("scores %v agent %d: inflation %v, want %v", c.scores, d.Agent, d.InflationMean, want)
				}
			}
		}
	}
}
