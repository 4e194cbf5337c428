package estimators

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// oneAgent builds columns of one agent from groups of scores, one trajectory a row.
func oneAgent(groups ...[]float64) *Columns {
	c := &Columns{NumAgents: 1}
	for g, xs := range groups {
		for _, x := range xs {
			c.Group = append(c.Group, int32(g))
			c.Traj = append(c.Traj, int32(len(c.Traj)))
			c.Agent = append(c.Agent, 0)
			c.Score = append(c.Score, x)
		}
	}
	return c
}

// TestOverflowIsAnError: finite scores so large that a statistic (float64) or an advantage
// (float32) is not finite are an error naming the first such row, its group and agent, from
// Compute, ComputeMany and Reference alike — not a column of NaN, ±Inf or silent zeros.
func TestOverflowIsAnError(t *testing.T) {
	ctx := context.Background()
	normal := []float64{1, 0}
	for _, tc := range []struct {
		name  string
		cols  *Columns
		specs []string
		want  string // after "estimators: <spec>: "
	}{
		// Σ(x−μ)² = 2e400 overflows: σ = +Inf (the advantages used to be written as 0).
		{"std", oneAgent(normal, []float64{1e200, -1e200, 0}), []string{"drmas", "grpo", "grpo_step", "drmas_nostd"},
			"row 2 (group 1, agent 0): baseline std is not finite"},
		// Σx = 2.5e308 overflows: μ = +Inf (the advantages used to be NaN).
		{"mean", oneAgent(normal, []float64{1.5e308, 1e308}), []string{"drmas", "grpo", "grpo_step_nostd"},
			"row 2 (group 1, agent 0): baseline mean is not finite"},
		// rloo row 2: baseline (−1e200 + 0)/2 = −5e199, A = 1.5e200: no float32.
		{"rloo", oneAgent(normal, []float64{1e200, -1e200, 0}), []string{"rloo", "rloo_agent"},
			"row 2 (group 1, agent 0): advantage is not finite"},
		// rloo row 2: baseline 1e308, A = 5e307 (the advantages used to be −Inf).
		{"rloo sum", oneAgent(normal, []float64{1.5e308, 1e308}), []string{"rloo"},
			"row 2 (group 1, agent 0): advantage is not finite"},
		// μ = 0, σ = √2e39: finite, but A = ±1e39 is beyond float32's 3.4e38.
		{"float32", oneAgent(normal, []float64{1e39, -1e39}), []string{"grpo_step_nostd", "drmas_nostd"},
			"row 2 (group 1, agent 0): advantage is not finite"},
		// A singleton gets μ = 0, σ = 1: A = 1e39/(1 + 1e-6).
		{"singleton", oneAgent(normal, []float64{2}, []float64{1e39}), []string{"drmas", "grpo", "grpo_step"},
			"row 3 (group 2, agent 0): advantage is not finite"},
		// Two bad groups: the first is named.
		{"first", oneAgent(normal, []float64{1e39, -1e39}, []float64{1e200, -1e200}), []string{"grpo_step_nostd"},
			"row 2 (group 1, agent 0): advantage is not finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range tc.specs {
				sp, err := ParseSpec(name)
				if err != nil {
					t.Fatal(err)
				}
				want := "estimators: " + name + ": " + tc.want
				err = Compute(ctx, sp, tc.cols, &Result{})
				if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "scale them down") {
					t.Errorf("%s: Compute error %v, want %q… scale them down", name, err, want)
				}
				var oe *OverflowError
				if !errors.As(err, &oe) {
					t.Errorf("%s: Compute error %#v, want an *OverflowError", name, err)
				}
				if _, refErr := Reference(sp, tc.cols); refErr == nil || err == nil || refErr.Error() != err.Error() {
					t.Errorf("%s: Reference error %v, Compute error %v", name, refErr, err)
				}
				// A fine spec first does not hide it.
				fine := Spec{Estimator: GRPOStep, NormStd: true}
				if manyErr := ComputeMany(ctx, []Spec{fine, sp}, tc.cols, []*Result{{}, {}}); manyErr == nil {
					t.Errorf("%s: ComputeMany accepted it", name)
				}
			}
		})
	}
}

// TestOverflowDiagnostics: Diagnose (and the diagnostics of the stage's fused pass) refuse
// statistics that are not finite, as DiagnoseReference does.
func TestOverflowDiagnostics(t *testing.T) {
	cols := oneAgent([]float64{1, 0}, []float64{1e200, -1e200, 0})
	want := "estimators: diagnostics: row 2 (group 1, agent 0): group std is not finite"
	_, err := Diagnose(cols)
	_, refErr := DiagnoseReference(cols)
	if err == nil || !strings.HasPrefix(err.Error(), want) || refErr == nil || refErr.Error() != err.Error() {
		t.Fatalf("Diagnose error %v, DiagnoseReference error %v, want %q…", err, refErr, want)
	}
	// Typed, so that a caller holding the keys can name the row's uid and agent.
	var oe *OverflowError
	if !errors.As(err, &oe) || *oe != (OverflowError{Estimator: "diagnostics", Row: 2, Group: 1, Agent: 0, What: "group std"}) {
		t.Fatalf("Diagnose error %#v, want an *OverflowError for row 2", err)
	}
	// grpo itself is fine here (both trajectories average to 0: μ = σ = 0, A = 0); the
	// diagnostics the stage writes with it are not (σ of the group's rows overflows).
	cols = &Columns{Group: []int32{0, 0, 0, 0}, Traj: []int32{0, 0, 1, 1}, Agent: []int32{0, 1, 0, 1},
		Score: []float64{1e200, -1e200, 2e200, -2e200}, NumAgents: 2}
	sp := Spec{Estimator: GRPO, NormStd: true}
	var out Result
	if err := Compute(context.Background(), sp, cols, &out); err != nil {
		t.Fatalf("grpo over trajectories averaging 0: %v", err)
	}
	_, err = ComputeWithDiagnostics(context.Background(), []Spec{sp}, cols, []*Result{&out}, nil)
	want = "estimators: diagnostics: row 0 (group 0, agent 0): group std is not finite"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("ComputeWithDiagnostics error %v, want %q…", err, want)
	}
}

// TestHugeScoresThatFit: groups with scores above the quick bound but whose statistics and
// advantages fit are computed, not refused; rloo's baseline there sums the other rows, so a
// total that overflows does not matter.
func TestHugeScoresThatFit(t *testing.T) {
	ctx := context.Background()
	cols := oneAgent([]float64{1e308, 1e308}, []float64{1e35, 3e35})
	for _, tc := range []struct {
		name    string
		adv, mu []float64
	}{
		// rloo: each baseline is the other score; the total 2e308 would overflow.
		// Group 1: baselines 3e35 and 1e35, A = ∓2e35.
		{"rloo", []float64{0, 0, -2e35, 2e35}, []float64{1e308, 1e308, 3e35, 1e35}},
		// drmas: group 0 all equal (μ = 1e308, σ = 0, A = 0); group 1 μ = 2e35,
		// σ = √((1e35)² + (1e35)²) = √2·1e35, A = ∓1/√2 (ε negligible).
		{"drmas", []float64{0, 0, -1 / math.Sqrt2, 1 / math.Sqrt2}, []float64{1e308, 1e308, 2e35, 2e35}},
	} {
		sp, _ := ParseSpec(tc.name)
		var out Result
		if err := Compute(ctx, sp, cols, &out); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range tc.adv {
			if !close64(float64(out.Advantage[i]), tc.adv[i], 1e-6) || !close64(out.BaselineMean[i], tc.mu[i], 1e-12) {
				t.Errorf("%s row %d: advantage %v, baseline %v; want %v, %v", tc.name, i, out.Advantage[i], out.BaselineMean[i], tc.adv[i], tc.mu[i])
			}
		}
		if _, err := Reference(sp, cols); err != nil {
			t.Errorf("%s: Reference: %v", tc.name, err)
		}
	}
}

// TestOverflowAfterInvalidRows: invalid rows are reported before an overflow in an earlier
// group, by Compute as by Reference.
func TestOverflowAfterInvalidRows(t *testing.T) {
	cols := oneAgent([]float64{1e200, -1e200}, []float64{1}, []float64{2})
	cols.Group[3] = 0 // group 0 resumes
	sp := Spec{Estimator: DrMAS, NormStd: true}
	err := Compute(context.Background(), sp, cols, &Result{})
	_, refErr := Reference(sp, cols)
	var ve *ValidationError
	if !errors.As(err, &ve) || refErr == nil || err.Error() != refErr.Error() {
		t.Fatalf("Compute error %v, Reference error %v, want the same *ValidationError", err, refErr)
	}
}

// TestOverflowMatchesReference: on groups whose scores cluster around the sizes where sums,
// squares or float32 advantages overflow (and tiny ones, with a tiny ε), Compute, ComputeMany
// and Reference accept and refuse the same inputs with the same errors, accepted results agree
// (rloo within rlooSlack) and have finite advantages; Diagnose agrees with DiagnoseReference.
func TestOverflowMatchesReference(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(77, 78))
	exps := []float64{0, 16, 30, 31, 35, 37, 38, 38.5, 39, 150, 154, 155, 200, 300, 307, 308, -160, -170, -300}
	specs := allSpecs(t)
	tiny, err := ParseSpec("drmas_eps1e-100") // the smallest ε allowed (MinEps)
	if err != nil {
		t.Fatal(err)
	}
	specs = append(specs, tiny)
	refused, manyOK := 0, 0
	for iter := range 2000 {
		cols := randomColumns(r, 1+r.IntN(6))
		// Half the groups get scores ±(0.5…1.8)·10^e for one e of exps (a fifth of their rows
		// another e, a quarter keep their score).
		var ge float64
		for i := range cols.Score {
			if i == 0 || cols.Group[i] != cols.Group[i-1] {
				ge = -1
				if r.IntN(2) == 0 {
					ge = exps[r.IntN(len(exps))]
				}
			}
			if ge < 0 || r.IntN(4) == 0 {
				continue
			}
			e := ge + r.Float64()*0.3
			if r.IntN(5) == 0 {
				e = exps[r.IntN(len(exps))]
			}
			x := math.Min((0.5+r.Float64()*1.3)*math.Pow(10, e), math.MaxFloat64)
			if r.IntN(2) == 0 {
				x = -x
			}
			cols.Score[i] = x
		}
		outs := make([]*Result, len(specs))
		for i := range outs {
			outs[i] = new(Result)
		}
		manyErr := ComputeMany(ctx, specs, cols, outs)
		if manyErr == nil {
			manyOK++
		}
		anyErr := false
		for i, sp := range specs {
			var one Result
			err := Compute(ctx, sp, cols, &one)
			ref, refErr := Reference(sp, cols)
			if (err == nil) != (refErr == nil) || (err != nil && err.Error() != refErr.Error()) {
				t.Fatalf("iteration %d %s: Compute error %v, Reference error %v", iter, sp, err, refErr)
			}
			if err != nil {
				anyErr = true
				refused++
				continue
			}
			for j, a := range one.Advantage {
				if math.IsNaN(float64(a)) || math.IsInf(float64(a), 0) {
					t.Fatalf("iteration %d %s: advantage %v at row %d accepted", iter, sp, a, j)
				}
			}
			if d := diffResult(one, ref, rlooSlack(sp, cols)); d != "" {
				t.Fatalf("iteration %d %s: Compute vs Reference: %s", iter, sp, d)
			}
			if manyErr == nil {
				if d := diffResult(*outs[i], one, nil); d != "" {
					t.Fatalf("iteration %d %s: ComputeMany vs Compute: %s", iter, sp, d)
				}
			}
		}
		if anyErr != (manyErr != nil) {
			t.Fatalf("iteration %d: ComputeMany error %v, a spec failed alone: %v", iter, manyErr, anyErr)
		}
		_, err := Diagnose(cols)
		_, refErr := DiagnoseReference(cols)
		if (err == nil) != (refErr == nil) || (err != nil && err.Error() != refErr.Error()) {
			t.Fatalf("iteration %d: Diagnose error %v, DiagnoseReference error %v", iter, err, refErr)
		}
	}
	if n := 2000 * len(specs); refused < n/10 || refused > n*9/10 {
		t.Fatalf("%d of %d computations refused: the generator no longer straddles the limits", refused, n)
	}
	if manyOK < 100 {
		t.Fatalf("ComputeMany succeeded in %d of 2000 iterations: its results were hardly compared with Compute's", manyOK)
	}
}

// TestTinyEpsRefused: scores that differ by less than about 1e-154 have σ = 0 in float64, so
// their advantages are (score − μ)/ε: an ε below MinEps turned 1e-170 apart into ±5e29 (or an
// overflow), where the true (score − μ)/(σ + ε) is ±0.7. Such an ε is refused; from MinEps up
// the advantages are what the formula gives.
func TestTinyEpsRefused(t *testing.T) {
	for _, name := range []string{"drmas_eps1e-200", "grpo_eps1e-101", "grpo_step_eps0", "drmas_eps5e-324"} {
		if _, err := ParseSpec(name); err == nil || !strings.Contains(err.Error(), "≥ 1e-100") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (Spec{Estimator: DrMAS, NormStd: true, Eps: 1e-200}).Validate(); err == nil {
		t.Error("Validate accepted ε = 1e-200")
	}
	cols := oneAgent([]float64{1, 0}, []float64{1e-170, 2e-170})
	for _, name := range []string{"drmas_eps1e-100", "grpo_eps1e-100", "grpo_step_eps1e-100"} {
		sp, err := ParseSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		var res Result
		if err := Compute(context.Background(), sp, cols, &res); err != nil {
			t.Fatal(err)
		}
		// Group 1: |score − μ| = 5e-171, σ + ε ≥ 1e-100: |A| ≤ 5e-71, 0 in float32.
		if res.Advantage[2] != 0 || res.Advantage[3] != 0 {
			t.Errorf("%s: advantages %v of the 1e-170-apart group, want 0", name, res.Advantage[2:])
		}
	}
}
