package estimators

import (
	"math"
	"testing"
)

// TestInflationMeanFiniteOverGroups: groups whose inflation is finite alone but whose sum is
// not (scores 1.5e-154 apart beside a singleton's σ_k = 1) give a finite inflation mean: such
// groups count as σ = 0, as a single non-float64 ratio does.
func TestInflationMeanFiniteOverGroups(t *testing.T) {
	var cols Columns
	cols.NumAgents = 2
	for g := range 3 {
		for i, x := range []float64{0, 1.5e-154} {
			cols.Group = append(cols.Group, int32(g))
			cols.Traj = append(cols.Traj, int32(i))
			cols.Agent = append(cols.Agent, int32(i))
			cols.Score = append(cols.Score, x)
		}
	}
	for name, diag := range map[string]func(*Columns) ([]AgentDiagnostics, error){"Diagnose": Diagnose, "DiagnoseReference": DiagnoseReference} {
		ds, err := diag(&cols)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if math.IsInf(d.InflationMean, 0) || math.IsNaN(d.InflationMean) || d.InflationGroups+d.ZeroSigmaGroups != d.Groups {
				t.Errorf("%s agent %d: inflation mean %v over %d groups (%d with σ = 0)", name, d.Agent, d.InflationMean, d.InflationGroups, d.ZeroSigmaGroups)
			}
		}
	}
}
