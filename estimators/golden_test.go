package estimators

import (
	"context"
	"math"
	"strings"
	"testing"
)

// goldenCols is the hand-worked example used by every golden test.
//
//	row  group traj agent score
//	 0     7    0    0    1
//	 1     7    0    1    1
//	 2     7    1    0    0      trajectory 1 has no agent-1 row
//	 3     7    2    0    1
//	 4     7    2    1    0
//	 5     3    3    0    0.5    group 3: a single row (singleton everywhere)
//	 6     1    4    0    0.25   group 1: all scores equal (σ = 0)
//	 7     1    4    1    0.25   … but agent 1 has a single row there
//	 8     1    5    0    0.25
//
// Group codes 7, 3, 1 are decreasing (only contiguity is required). NumAgents is 3: agent 2 never
// appears.
func goldenCols() *Columns {
	return &Columns{
		Group:     []int32{7, 7, 7, 7, 7, 3, 1, 1, 1},
		Traj:      []int32{0, 0, 1, 2, 2, 3, 4, 4, 5},
		Agent:     []int32{0, 1, 0, 0, 1, 0, 0, 1, 0},
		Score:     []float64{1, 1, 0, 1, 0, 0.5, 0.25, 0.25, 0.25},
		NumAgents: 3,
	}
}

const eps = 1e-6

type golden struct {
	adv    []float64
	mu, sd []float64
	size   []int32
}

func checkGolden(t *testing.T, name string, want golden) {
	t.Helper()
	spec, err := ParseSpec(name)
	if err != nil {
		t.Fatal(err)
	}
	cols := goldenCols()
	var fast Result
	if err := Compute(context.Background(), spec, cols, &fast); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ref, err := Reference(spec, cols)
	if err != nil {
		t.Fatalf("%s reference: %v", name, err)
	}
	for _, got := range []struct {
		who string
		r   Result
	}{{"Compute", fast}, {"Reference", ref}} {
		for i := range cols.Score {
			if g, w := got.r.Advantage[i], float32(want.adv[i]); g != w {
				t.Errorf("%s %s row %d: advantage %v, want %v", name, got.who, i, g, w)
			}
			if !close64(got.r.BaselineMean[i], want.mu[i], 1e-15) || !close64(got.r.BaselineStd[i], want.sd[i], 1e-15) {
				t.Errorf("%s %s row %d: baseline (%v, %v), want (%v, %v)", name, got.who, i,
					got.r.BaselineMean[i], got.r.BaselineStd[i], want.mu[i], want.sd[i])
			}
			if got.r.GroupSize[i] != want.size[i] {
				t.Errorf("%s %s row %d: group size %d, want %d", name, got.who, i, got.r.GroupSize[i], want.size[i])
			}
		}
	}
}

// close64 reports whether a and b agree within tol relative; equal values, infinities
// included (an inflation ratio beyond float64 is +Inf in both implementations), agree.
func close64(a, b, tol float64) bool {
	return a == b || math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestGoldenGRPO(t *testing.T) {
	// Group 7: R̄0 = (1+1)/2 = 1, R̄1 = 0/1 = 0, R̄2 = (1+0)/2 = 0.5.
	//   μ = (1+0+0.5)/3 = 0.5; deviations 0.5, −0.5, 0; Σd² = 0.5; σ² = 0.5/(3−1) = 0.25; σ = 0.5.
	//   trajectory 0 rows: 0.5/(0.5+ε); trajectory 1: −0.5/(0.5+ε); trajectory 2: 0.
	// Group 3: one trajectory ⇒ μ = 0, σ = 1: 0.5/(1+ε).
	// Group 1: R̄4 = (0.25+0.25)/2 = 0.25, R̄5 = 0.25 ⇒ μ = 0.25, σ = 0 ⇒ A = 0/(0+ε) = 0.
	a := 0.5 / (0.5 + eps)
	checkGolden(t, "grpo", golden{
		adv:  []float64{a, a, -a, 0, 0, 0.5 / (1 + eps), 0, 0, 0},
		mu:   []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0, 0.25, 0.25, 0.25},
		sd:   []float64{0.5, 0.5, 0.5, 0.5, 0.5, 1, 0, 0, 0},
		size: []int32{3, 3, 3, 3, 3, 1, 2, 2, 2},
	})
	// Dr.GRPO: A = R̄ − μ: 1−0.5, 1−0.5, 0−0.5, 0.5−0.5, 0.5−0.5; group 3: 0.5−0; group 1: 0.
	nostd := golden{
		adv:  []float64{0.5, 0.5, -0.5, 0, 0, 0.5, 0, 0, 0},
		mu:   []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0, 0.25, 0.25, 0.25},
		sd:   []float64{0.5, 0.5, 0.5, 0.5, 0.5, 1, 0, 0, 0},
		size: []int32{3, 3, 3, 3, 3, 1, 2, 2, 2},
	}
	checkGolden(t, "grpo_nostd", nostd)
	checkGolden(t, "drgrpo", nostd)
}

func TestGoldenDrMAS(t *testing.T) {
	// Group 7, agent 0 (rows 0, 2, 3: scores 1, 0, 1): μ₀ = 2/3; deviations 1/3, −2/3, 1/3;
	//   Σd² = 1/9+4/9+1/9 = 2/3; σ₀² = (2/3)/2 = 1/3; σ₀ = √(1/3) ≈ 0.57735.
	//   A = (1/3)/(√(1/3)+ε) for rows 0 and 3, (−2/3)/(√(1/3)+ε) for row 2.
	// Group 7, agent 1 (rows 1, 4: scores 1, 0; absent from trajectory 1): μ₁ = 0.5;
	//   Σd² = 0.25+0.25 = 0.5; σ₁² = 0.5/1; σ₁ = √0.5 ≈ 0.70711. A = ±0.5/(√0.5+ε).
	// Group 3, agent 0: one row ⇒ μ = 0, σ = 1: A = 0.5/(1+ε).
	// Group 1, agent 0 (rows 6, 8: 0.25, 0.25) ⇒ μ = 0.25, σ = 0 ⇒ A = 0.
	// Group 1, agent 1 (row 7 only) ⇒ μ = 0, σ = 1 ⇒ A = 0.25/(1+ε) (the singleton rule, not 0).
	s0, s1 := math.Sqrt(1.0/3), math.Sqrt(0.5)
	checkGolden(t, "drmas", golden{
		adv: []float64{(1.0 / 3) / (s0 + eps), 0.5 / (s1 + eps), (-2.0 / 3) / (s0 + eps), (1.0 / 3) / (s0 + eps),
			-0.5 / (s1 + eps), 0.5 / (1 + eps), 0, 0.25 / (1 + eps), 0},
		mu:   []float64{2.0 / 3, 0.5, 2.0 / 3, 2.0 / 3, 0.5, 0, 0.25, 0, 0.25},
		sd:   []float64{s0, s1, s0, s0, s1, 1, 0, 1, 0},
		size: []int32{3, 2, 3, 3, 2, 1, 2, 1, 2},
	})
	// Without σ: A = score − μ_k: 1−2/3, 1−0.5, 0−2/3, 1−2/3, 0−0.5, 0.5−0, 0, 0.25−0, 0.
	checkGolden(t, "drmas_nostd", golden{
		adv:  []float64{1.0 / 3, 0.5, -2.0 / 3, 1.0 / 3, -0.5, 0.5, 0, 0.25, 0},
		mu:   []float64{2.0 / 3, 0.5, 2.0 / 3, 2.0 / 3, 0.5, 0, 0.25, 0, 0.25},
		sd:   []float64{s0, s1, s0, s0, s1, 1, 0, 1, 0},
		size: []int32{3, 2, 3, 3, 2, 1, 2, 1, 2},
	})
	// A non-default ε: σ₀ + 0.5 in the denominators.
	checkGolden(t, "drmas_eps0.5", golden{
		adv: []float64{(1.0 / 3) / (s0 + 0.5), 0.5 / (s1 + 0.5), (-2.0 / 3) / (s0 + 0.5), (1.0 / 3) / (s0 + 0.5),
			-0.5 / (s1 + 0.5), 0.5 / 1.5, 0, 0.25 / 1.5, 0},
		mu:   []float64{2.0 / 3, 0.5, 2.0 / 3, 2.0 / 3, 0.5, 0, 0.25, 0, 0.25},
		sd:   []float64{s0, s1, s0, s0, s1, 1, 0, 1, 0},
		size: []int32{3, 2, 3, 3, 2, 1, 2, 1, 2},
	})
}

func TestGoldenGRPOStep(t *testing.T) {
	// Group 7, all rows (1, 1, 0, 1, 0): μ = 3/5 = 0.6; deviations 0.4, 0.4, −0.6, 0.4, −0.6;
	//   Σd² = 3·0.16 + 2·0.36 = 1.2; σ² = 1.2/4 = 0.3; σ = √0.3 ≈ 0.54772.
	// Group 3: one row ⇒ 0.5/(1+ε). Group 1: three equal rows ⇒ μ = 0.25, σ = 0, A = 0.
	s := math.Sqrt(0.3)
	p, m := 0.4/(s+eps), -0.6/(s+eps)
	checkGolden(t, "grpo_step", golden{
		adv:  []float64{p, p, m, p, m, 0.5 / (1 + eps), 0, 0, 0},
		mu:   []float64{0.6, 0.6, 0.6, 0.6, 0.6, 0, 0.25, 0.25, 0.25},
		sd:   []float64{s, s, s, s, s, 1, 0, 0, 0},
		size: []int32{5, 5, 5, 5, 5, 1, 3, 3, 3},
	})
	checkGolden(t, "grpo_step_nostd", golden{
		adv:  []float64{0.4, 0.4, -0.6, 0.4, -0.6, 0.5, 0, 0, 0},
		mu:   []float64{0.6, 0.6, 0.6, 0.6, 0.6, 0, 0.25, 0.25, 0.25},
		sd:   []float64{s, s, s, s, s, 1, 0, 0, 0},
		size: []int32{5, 5, 5, 5, 5, 1, 3, 3, 3},
	})
}

func TestGoldenRLOO(t *testing.T) {
	// Per uid. Group 7: n = 5, Σ = 3. Score 1: others' mean (3−1)/4 = 0.5 ⇒ A = 0.5;
	//   score 0: 3/4 = 0.75 ⇒ A = −0.75.
	// Group 3: a group of one ⇒ A = 0 (baseline reported as the score, 0.5).
	// Group 1: every other score is 0.25 ⇒ baseline 0.25, A = 0.
	checkGolden(t, "rloo", golden{
		adv:  []float64{0.5, 0.5, -0.75, 0.5, -0.75, 0, 0, 0, 0},
		mu:   []float64{0.5, 0.5, 0.75, 0.5, 0.75, 0.5, 0.25, 0.25, 0.25},
		sd:   []float64{1, 1, 1, 1, 1, 1, 1, 1, 1},
		size: []int32{5, 5, 5, 5, 5, 1, 3, 3, 3},
	})
	// Per (uid, agent). Group 7 agent 0 (1, 0, 1; Σ = 2, n = 3): row 0: (2−1)/2 = 0.5 ⇒ 0.5;
	//   row 2: 2/2 = 1 ⇒ −1; row 3: 0.5 ⇒ 0.5.
	// Group 7 agent 1 (1, 0): row 1: baseline 0 ⇒ 1; row 4: baseline 1 ⇒ −1.
	// Group 3 agent 0 and group 1 agent 1: groups of one ⇒ 0 (baseline = score).
	// Group 1 agent 0 (0.25, 0.25): baseline 0.25 ⇒ 0.
	checkGolden(t, "rloo_agent", golden{
		adv:  []float64{0.5, 1, -1, 0.5, -1, 0, 0, 0, 0},
		mu:   []float64{0.5, 0, 1, 0.5, 1, 0.5, 0.25, 0.25, 0.25},
		sd:   []float64{1, 1, 1, 1, 1, 1, 1, 1, 1},
		size: []int32{3, 2, 3, 3, 2, 1, 2, 1, 2},
	})
}

func TestGoldenDiagnose(t *testing.T) {
	// Per group, pooled: group 7 μ = 0.6, σ = √0.3 (see TestGoldenGRPOStep); group 3 μ = 0, σ = 1
	// (one row); group 1 μ = 0.25, σ = 0 (left out of the inflation statistics).
	//
	// Agent 0: group 7 μ₀ = 2/3, σ₀ = √(1/3):
	//   inflation = (1/3 + (2/3 − 0.6)²)/0.3 = (1/3 + 1/225)/0.3 = (76/225)/0.3 = 76/67.5 ≈ 1.12593.
	//   group 3: one row ⇒ μ₀ = 0, σ₀ = 1; inflation (1 + 0)/1 = 1.
	//   group 1: μ₀ = 0.25, σ₀ = 0 (σ₀ = 0 share 1/3); σ = 0 ⇒ skipped.
	// Agent 1: group 7 μ₁ = 0.5, σ₁ = √0.5: inflation (0.5 + 0.1²)/0.3 = 0.51/0.3 = 1.7.
	//   group 1: one row ⇒ μ₁ = 0, σ₁ = 1; σ = 0 ⇒ skipped.
	// Agent 2: absent.
	infl0 := 76 / 67.5
	want := []AgentDiagnostics{
		{Agent: 0, Groups: 3, Rows: 6, SingletonGroups: 1,
			MeanMuK: (2.0/3 + 0 + 0.25) / 3, MeanSigmaK: (math.Sqrt(1.0/3) + 1 + 0) / 3,
			MeanMu: (0.6 + 0 + 0.25) / 3, MeanSigma: (math.Sqrt(0.3) + 1 + 0) / 3,
			ZeroSigmaKShare: 1.0 / 3, InflationMean: (infl0 + 1) / 2, InflationMax: infl0,
			InflationGroups: 2, ZeroSigmaGroups: 1},
		{Agent: 1, Groups: 2, Rows: 3, SingletonGroups: 1,
			MeanMuK: (0.5 + 0) / 2, MeanSigmaK: (math.Sqrt(0.5) + 1) / 2,
			MeanMu: (0.6 + 0.25) / 2, MeanSigma: (math.Sqrt(0.3) + 0) / 2,
			InflationMean: 1.7, InflationMax: 1.7, InflationGroups: 1, ZeroSigmaGroups: 1},
		{Agent: 2},
	}
	fast, err := Diagnose(goldenCols())
	if err != nil {
		t.Fatal(err)
	}
	ref, err := DiagnoseReference(goldenCols())
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range [][]AgentDiagnostics{fast, ref} {
		if len(got) != len(want) {
			t.Fatalf("got %d agents, want %d", len(got), len(want))
		}
		for k := range want {
			if msg := diffDiag(got[k], want[k], 1e-12); msg != "" {
				t.Errorf("agent %d: %s\n got %+v\nwant %+v", k, msg, got[k], want[k])
			}
		}
	}
}

// diffDiag describes the first difference between two diagnostics ("" if none).
func diffDiag(a, b AgentDiagnostics, tol float64) string {
	if a.Agent != b.Agent || a.Groups != b.Groups || a.Rows != b.Rows || a.SingletonGroups != b.SingletonGroups ||
		a.InflationGroups != b.InflationGroups || a.ZeroSigmaGroups != b.ZeroSigmaGroups {
		return "counts differ"
	}
	fa := []float64{a.MeanMuK, a.MeanSigmaK, a.MeanMu, a.MeanSigma, a.ZeroSigmaKShare, a.InflationMean, a.InflationMax}
	fb := []float64{b.MeanMuK, b.MeanSigmaK, b.MeanMu, b.MeanSigma, b.ZeroSigmaKShare, b.InflationMean, b.InflationMax}
	names := []string{"MeanMuK", "MeanSigmaK", "MeanMu", "MeanSigma", "ZeroSigmaKShare", "InflationMean", "InflationMax"}
	for i := range fa {
		if !close64(fa[i], fb[i], tol) {
			return names[i] + " differs"
		}
	}
	return ""
}

func TestSpecNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"grpo", Spec{Estimator: GRPO, NormStd: true, Eps: DefaultEps}},
		{"grpo_nostd", Spec{Estimator: GRPO, Eps: DefaultEps}},
		{"drmas", Spec{Estimator: DrMAS, NormStd: true, Eps: DefaultEps}},
		{"drmas_nostd", Spec{Estimator: DrMAS, Eps: DefaultEps}},
		{"drmas_eps1e-08", Spec{Estimator: DrMAS, NormStd: true, Eps: 1e-8}},
		{"grpo_step", Spec{Estimator: GRPOStep, NormStd: true, Eps: DefaultEps}},
		{"grpo_step_nostd", Spec{Estimator: GRPOStep, Eps: DefaultEps}},
		{"rloo", Spec{Estimator: RLOO, Eps: DefaultEps}},
		{"rloo_agent", Spec{Estimator: RLOO, PerAgent: true, Eps: DefaultEps}},
	} {
		got, err := ParseSpec(tc.name)
		if err != nil || got != tc.spec {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", tc.name, got, err, tc.spec)
		}
		if n := tc.spec.Name(); n != tc.name {
			t.Errorf("%+v.Name() = %q, want %q", tc.spec, n, tc.name)
		}
	}
	// Aliases and redundant spellings parse to canonical specs with canonical names.
	for alias, canon := range map[string]string{"drgrpo": "grpo_nostd", "drmas_eps1e-6": "drmas", "drmas_eps0.000001": "drmas"} {
		s, err := ParseSpec(alias)
		if err != nil || s.Name() != canon {
			t.Errorf("ParseSpec(%q).Name() = %q, %v; want %q", alias, s.Name(), err, canon)
		}
	}
	// Settings without effect do not change the name, and Name∘Parse is the canonical form.
	for _, s := range []Spec{{Estimator: DrMAS}, {Estimator: DrMAS, NormStd: true}, {Estimator: RLOO, NormStd: true, Eps: 3},
		{Estimator: GRPO, Eps: 0.25}, {Estimator: GRPOStep, NormStd: true, Eps: 0.125}} {
		p, err := ParseSpec(s.Name())
		if err != nil || p != s.Canonical() {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", s.Name(), p, err, s.Canonical())
		}
	}
	for _, bad := range []string{"", "ppo", "drmas_", "drmas_std", "drmas_nostd_eps1e-3", "drmas_eps0", "drmas_eps-1",
		"drmas_epsNaN", "rloo_nostd", "DRMAS", "grpo_agent", "rloo_agent_nostd"} {
		if s, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) = %+v, want an error", bad, s)
		}
	}
	// A typo of a name lists the estimators; a bad suffix says which suffixes there are.
	for name, want := range map[string]string{
		"drmass":      `unknown estimator "drmass" (want grpo, drmas or grpo_step, each optionally with _nostd or _eps<float>; drgrpo (= grpo_nostd); rloo; rloo_agent)`,
		"rloo_eps0.1": `unknown estimator "rloo_eps0.1" (want grpo, drmas or grpo_step`,
		"grpox_nostd": `unknown estimator "grpox_nostd" (want grpo, drmas`,
		"ppo":         `unknown estimator "ppo" (want grpo, drmas`,
		"drmas_std":   `estimator "drmas_std": unknown suffix "_std" (want _nostd or _eps<float>)`,
	} {
		if _, err := ParseSpec(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q): %v, want an error with %q", name, err, want)
		}
	}
	// ParseSpecEps: the given ε for names that do not spell one out, the name's own otherwise
	// (even the default); eps ≤ 0 leaves DefaultEps.
	for _, tc := range []struct {
		name string
		eps  float64
		want float64
	}{
		{"drmas", 1e-8, 1e-8}, {"grpo_step", 1e-8, 1e-8}, {"drmas_eps1e-6", 1e-8, 1e-6},
		{"drmas_eps0.5", 1e-8, 0.5}, {"drmas", 0, DefaultEps}, {"drmas_nostd", 1e-8, 1e-8},
	} {
		s, err := ParseSpecEps(tc.name, tc.eps)
		if err != nil || s.Eps != tc.want {
			t.Errorf("ParseSpecEps(%q, %g).Eps = %g, %v; want %g", tc.name, tc.eps, s.Eps, err, tc.want)
		}
	}
	if _, err := ParseSpecEps("drmas_eps-1", 1e-8); err == nil {
		t.Error("ParseSpecEps accepted drmas_eps-1")
	}
	for _, bad := range []Spec{{}, {Estimator: 9}, {Estimator: DrMAS, PerAgent: true}, {Estimator: GRPO, Eps: -1},
		{Estimator: GRPO, Eps: math.NaN()}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v.Validate() = nil, want an error", bad)
		}
		if err := Compute(context.Background(), bad, goldenCols(), &Result{}); err == nil {
			t.Errorf("Compute(%+v) = nil, want an error", bad)
		}
	}
}
