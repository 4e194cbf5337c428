package normalize

import (
	"strings"
	"testing"
)

// TestParseSpecs: the configured ε applies to names that do not spell ε out; a name that does
// keeps its own, even when it is the estimators default (1e-6) and the config says otherwise.
func TestParseSpecs(t *testing.T) {
	for _, tc := range []struct {
		names   []string
		eps     float64
		want    []string // canonical names
		wantEps []float64
		err     string
	}{
		{names: []string{"drmas"}, eps: 1e-8, want: []string{"drmas_eps1e-08"}, wantEps: []float64{1e-8}},
		{names: []string{"drmas_eps1e-6"}, eps: 1e-8, want: []string{"drmas"}, wantEps: []float64{1e-6}},
		{names: []string{"drmas", "drmas_eps1e-6"}, eps: 1e-8, want: []string{"drmas_eps1e-08", "drmas"}, wantEps: []float64{1e-8, 1e-6}},
		{names: []string{"grpo_eps0.001", "grpo_step"}, eps: 1e-8, want: []string{"grpo_eps0.001", "grpo_step_eps1e-08"}, wantEps: []float64{1e-3, 1e-8}},
		{names: []string{"drmas_nostd", "rloo", "drgrpo"}, eps: 1e-8, want: []string{"drmas_nostd", "rloo", "grpo_nostd"}, wantEps: []float64{1e-6, 1e-6, 1e-6}},
		{names: []string{"drmas"}, eps: 0, want: []string{"drmas"}, wantEps: []float64{1e-6}},
		{names: []string{"drmas", "drmas_eps1e-08"}, eps: 1e-8, err: "estimator drmas_eps1e-08 requested twice"},
		{names: []string{"drmas", "drmas_eps1e-6"}, eps: 1e-6, err: "estimator drmas requested twice"},
		// An alias is named as the user spelled it, not only by the canonical name.
		{names: []string{"drgrpo", "drmas", "grpo_nostd"}, eps: 1e-6, err: `estimator grpo_nostd requested twice (as "drgrpo" and "grpo_nostd")`},
		{names: nil, eps: 1e-8, err: "no estimator requested"},
	} {
		specs, err := ParseSpecs(tc.names, tc.eps)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSpecs(%q, %g): error %v, want %q", tc.names, tc.eps, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSpecs(%q, %g): %v", tc.names, tc.eps, err)
			continue
		}
		var got []string
		for _, s := range specs {
			got = append(got, s.Name())
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("ParseSpecs(%q, %g) = %q, want %q", tc.names, tc.eps, got, tc.want)
			continue
		}
		for i, s := range specs {
			if s.Eps != tc.wantEps[i] {
				t.Errorf("ParseSpecs(%q, %g)[%d].Eps = %g, want %g", tc.names, tc.eps, i, s.Eps, tc.wantEps[i])
			}
		}
	}
}
