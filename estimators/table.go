package estimators

import (
	"fmt"
	"strconv"
	"strings"
)

// EstimatorEntry is everything drmas knows about one estimator name. Estimators lists them all;
// parsing (ParseSpec), the error that lists the names, the --help text (EstimatorHelp) and the
// tests that hold the fast kernel to the reference all read that table.
type EstimatorEntry struct {
	// Name is the name as written, before any suffix.
	Name string
	// Spec is what the name computes, with the default ε.
	Spec Spec
	// Suffixes says whether the name takes _nostd (no division by σ) or _eps<float> (another ε).
	Suffixes bool
	// Alias, when set, is the canonical name this one stands for (Spec.Name); an alias has no
	// help line of its own and is listed with the name it stands for.
	Alias string
	// Reads lists the columns the estimator reads besides score (all need the uid groups).
	Reads string
	// Kernel names the fast path in Compute; Reference names its oracle.
	Kernel, Reference string
	// Help is the one line --help shows.
	Help string
}

// Estimators is the estimator table. Adding an estimator: give its formula a constant in
// Estimator (spec.go) with its fast path in Compute and its transcription in Reference, then an
// entry here; every name the table accepts is checked against Reference by the tests.
var Estimators = []EstimatorEntry{
	{Name: "grpo", Spec: Spec{Estimator: GRPO, NormStd: true, Eps: DefaultEps}, Suffixes: true,
		Reads: "uid, sample (a trajectory is a (uid, sample) run)", Kernel: "Compute: trajectory means, then groupStats", Reference: "Reference: map over (uid, trajectory)",
		Help: "trajectory-level GRPO: one baseline per prompt group"},
	{Name: "drmas", Spec: Spec{Estimator: DrMAS, NormStd: true, Eps: DefaultEps}, Suffixes: true,
		Reads: "uid, agent", Kernel: "Compute: per-(uid, agent) μ_k, σ_k, then writeAdvantages", Reference: "Reference: map over (uid, agent)",
		Help: "per (prompt group × agent) mean and std — the Dr. MAS method"},
	{Name: "grpo_step", Spec: Spec{Estimator: GRPOStep, NormStd: true, Eps: DefaultEps}, Suffixes: true,
		Reads: "uid", Kernel: "Compute: groupStats over all rows", Reference: "Reference: map over uid",
		Help: "per prompt group, all rows pooled"},
	{Name: "drgrpo", Spec: Spec{Estimator: GRPO, Eps: DefaultEps}, Alias: "grpo_nostd",
		Reads: "uid, sample", Kernel: "as grpo", Reference: "as grpo",
		Help: "grpo without std division (also grpo_nostd, drmas_nostd, grpo_step_nostd)"},
	{Name: "rloo", Spec: Spec{Estimator: RLOO, Eps: DefaultEps},
		Reads: "uid", Kernel: "Compute: (Σ − x)/(n − 1) per uid", Reference: "Reference: sum of the others",
		Help: "leave-one-out baseline per group"},
	{Name: "rloo_agent", Spec: Spec{Estimator: RLOO, PerAgent: true, Eps: DefaultEps},
		Reads: "uid, agent", Kernel: "Compute: (Σ − x)/(n − 1) per (uid, agent)", Reference: "Reference: sum of the others",
		Help: "leave-one-out baseline per (group × agent)"},
}

// lookupName returns the entry a name without suffix spells exactly.
func lookupName(name string) (EstimatorEntry, bool) {
	for _, e := range Estimators {
		if e.Name == name {
			return e, true
		}
	}
	return EstimatorEntry{}, false
}

// lookupPrefix returns the longest entry that takes suffixes and begins name, and the rest.
func lookupPrefix(name string) (e EstimatorEntry, rest string, ok bool) {
	for _, c := range Estimators {
		if c.Suffixes && strings.HasPrefix(name, c.Name) && len(c.Name) > len(e.Name) {
			e, ok = c, true
		}
	}
	return e, name[len(e.Name):], ok
}

// specNames lists the names parseSpec accepts, for its errors, from the table: e.g. "grpo,
// drmas or grpo_step, each optionally with _nostd or _eps<float>; drgrpo (= grpo_nostd); rloo;
// rloo_agent". Those errors name the estimator the user wrote and no package: the caller says
// where it was given (a flag, a config key).
var specNames = func() string {
	var suffixed, rest []string
	for _, e := range Estimators {
		switch {
		case e.Suffixes:
			suffixed = append(suffixed, e.Name)
		case e.Alias != "":
			rest = append(rest, fmt.Sprintf("%s (= %s)", e.Name, e.Alias))
		default:
			rest = append(rest, e.Name)
		}
	}
	list := strings.Join(suffixed[:len(suffixed)-1], ", ") + " or " + suffixed[len(suffixed)-1]
	return list + ", each optionally with _nostd or _eps<float>; " + strings.Join(rest, "; ")
}()

// EstimatorHelp is the estimator list of --help, one line per table entry (aliases on the line
// of the name they stand for), and the ε suffix.
func EstimatorHelp() string {
	var b strings.Builder
	var eps []string
	for _, e := range Estimators {
		fmt.Fprintf(&b, "  %-12s %s\n", e.Name, e.Help)
		if e.Suffixes {
			eps = append(eps, e.Name+"_eps<x>")
		}
	}
	short := func(x float64) string { return strings.Replace(strconv.FormatFloat(x, 'g', -1, 64), "e-0", "e-", 1) }
	fmt.Fprintf(&b, "  %s  set ε, x ≥ %s (default %s or normalize.eps)", strings.Join(eps, ", "), short(MinEps), short(DefaultEps))
	return b.String()
}

// Resolve is the one way drmas turns a configured or requested estimator name into what it
// computes: ParseSpecEps with the configured ε (normalize.eps), in canonical form (Spec.Name is
// the folder est=<name>).
func Resolve(name string, eps float64) (Spec, error) {
	s, err := ParseSpecEps(name, eps)
	if err != nil {
		return Spec{}, err
	}
	return s.Canonical(), nil
}
