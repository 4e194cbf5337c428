package estimators

import (
	"slices"
	"strings"
	"testing"
)

// TestEstimatorTable: every entry parses to its own Spec, names are unique, every formula has
// an entry, the error list and --help name every entry, and the Compute-versus-Reference tests
// (allSpecNames) cover every entry.
func TestEstimatorTable(t *testing.T) {
	seen := map[string]bool{}
	covered := map[Estimator]bool{}
	var tested []string
	for _, n := range allSpecNames {
		s, err := ParseSpec(n)
		if err != nil {
			t.Fatal(err)
		}
		tested = append(tested, s.Name())
	}
	help := EstimatorHelp()
	for _, e := range Estimators {
		if seen[e.Name] {
			t.Errorf("%s: listed twice", e.Name)
		}
		seen[e.Name] = true
		covered[e.Spec.Estimator] = true
		got, err := ParseSpec(e.Name)
		if err != nil || got != e.Spec {
			t.Errorf("ParseSpec(%q) = %+v, %v; want the entry's %+v", e.Name, got, err, e.Spec)
		}
		switch want := e.Name; {
		case e.Alias != "":
			want = e.Alias
			fallthrough
		default:
			if n := e.Spec.Name(); n != want {
				t.Errorf("%s: Spec.Name() = %q, want %q", e.Name, n, want)
			}
		}
		if _, err := ParseSpec(e.Name + "_nostd"); (err == nil) != e.Suffixes {
			t.Errorf("%s_nostd: %v, but the entry says suffixes %v", e.Name, err, e.Suffixes)
		}
		if e.Help == "" || e.Reads == "" || e.Kernel == "" || e.Reference == "" {
			t.Errorf("%s: an empty field: %+v", e.Name, e)
		}
		if !strings.Contains(help, "  "+e.Name+" ") || !strings.Contains(help, e.Help) {
			t.Errorf("--help does not list %s with its help line:\n%s", e.Name, help)
		}
		if !strings.Contains(specNames, e.Name) {
			t.Errorf("the unknown-estimator error does not list %s: %s", e.Name, specNames)
		}
		if !slices.Contains(tested, e.Spec.Name()) {
			t.Errorf("%s (%s) is not among allSpecNames: the reference checks do not cover it", e.Name, e.Spec.Name())
		}
	}
	for est := GRPO; est <= RLOO; est++ {
		if !covered[est] {
			t.Errorf("estimator %v has no entry", est)
		}
	}
}

// TestResolve: the one resolver gives canonical specs, applies the configured ε to names that do
// not spell one out, and keeps an explicit one.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		eps  float64
		want string
	}{
		{"drmas", 0, "drmas"},
		{"drmas", 1e-8, "drmas_eps1e-08"},
		{"drmas_eps1e-6", 1e-8, "drmas"},
		{"drgrpo", 1e-8, "grpo_nostd"},
		{"rloo_agent", 1e-8, "rloo_agent"},
	} {
		s, err := Resolve(tc.name, tc.eps)
		if err != nil || s.Name() != tc.want || s != s.Canonical() {
			t.Errorf("Resolve(%q, %g) = %+v (%s), %v; want canonical %s", tc.name, tc.eps, s, s.Name(), err, tc.want)
		}
	}
	if _, err := Resolve("drmass", 0); err == nil || !strings.Contains(err.Error(), specNames) {
		t.Errorf("Resolve of a typo: %v, want the list of names", err)
	}
}
