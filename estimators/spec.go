package estimators

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// DefaultEps is ε of docs/design.md, "Estimators", added to σ before dividing.
const DefaultEps = 1e-6

// MinEps is the smallest ε a Spec may have. Scores that differ by less than about 1e-154 have
// σ = 0 in float64 (their squared deviations underflow), so their advantages are
// (score − μ)/ε; that is their true value (score − μ)/(σ + ε) to within rounding only where ε
// is far above σ, as every ε ≥ MinEps is. It also keeps (score − μ)/ε from overflowing there.
const MinEps = 1e-100

// WhyMinEps says why an ε below MinEps is refused, for the errors that refuse one.
const WhyMinEps = "scores closer than about 1e-154 have σ = 0 in float64, and a smaller ε would turn their tiny differences into huge advantages"

// Estimator selects the advantage formula. The zero value is invalid, so an unset Spec is an
// error rather than a silent default.
type Estimator uint8

const (
	// GRPO: trajectory level. R̄ᵢ = mean score of trajectory i's rows; μ, σ over {R̄ᵢ} of the
	// uid group; every row of trajectory i gets (R̄ᵢ − μ)/(σ + ε).
	GRPO Estimator = iota + 1
	// DrMAS: per (uid, agent): all rows of agent k in the uid pooled (every step of every
	// trajectory); A = (score − μ_k)/(σ_k + ε).
	DrMAS
	// GRPOStep: per uid, all rows pooled regardless of agent; A = (score − μ)/(σ + ε).
	GRPOStep
	// RLOO: leave-one-out, per uid (or per (uid, agent) with Spec.PerAgent):
	// A = score − mean of the other rows of the group; a group of one gets 0.
	RLOO
)

var estimatorNames = [...]string{GRPO: "grpo", DrMAS: "drmas", GRPOStep: "grpo_step", RLOO: "rloo"}

func (e Estimator) String() string {
	if e.valid() {
		return estimatorNames[e]
	}
	return fmt.Sprintf("Estimator(%d)", uint8(e))
}

func (e Estimator) valid() bool { return e >= GRPO && e <= RLOO }

// Spec is one estimator with its settings.
//
//   - NormStd: divide by (σ + Eps). false gives the Dr.GRPO form A = score − μ. Ignored by RLOO.
//   - PerAgent: RLOO only; leave-one-out within (uid, agent) instead of uid.
//   - Eps: ε; 0 means DefaultEps. Only used when NormStd.
type Spec struct {
	Estimator Estimator
	NormStd   bool
	PerAgent  bool
	Eps       float64
}

func (s Spec) eps() float64 {
	if s.Eps == 0 {
		return DefaultEps
	}
	return s.Eps
}

// Validate reports a Spec that cannot be computed.
func (s Spec) Validate() error {
	if !s.Estimator.valid() {
		return fmt.Errorf("estimators: invalid estimator %v", s.Estimator)
	}
	if s.PerAgent && s.Estimator != RLOO {
		return fmt.Errorf("estimators: PerAgent is only meaningful for rloo (drmas is the per-agent form of %s)", s.Estimator)
	}
	if math.IsNaN(s.Eps) || math.IsInf(s.Eps, 0) || s.Eps < 0 || s.Eps > 0 && s.Eps < MinEps {
		return fmt.Errorf("estimators: eps must be 0 (meaning %g) or a finite number ≥ %g, got %g", DefaultEps, MinEps, s.Eps)
	}
	return nil
}

// Canonical returns the Spec with settings that have no effect reset: NormStd false for RLOO,
// Eps = DefaultEps when 0 or unused. Two specs compute the same column iff their canonical
// forms are equal, and ParseSpec(s.Name()) == s.Canonical().
func (s Spec) Canonical() Spec {
	if s.Estimator == RLOO {
		s.NormStd = false
	}
	if !s.NormStd || s.Eps == 0 {
		s.Eps = DefaultEps
	}
	return s
}

// Name is the canonical name of the Spec, used as the folder est=<name>. See ParseSpec for the
// scheme. Name of an invalid Spec is still a readable string but does not parse.
func (s Spec) Name() string {
	c := s.Canonical()
	var b strings.Builder
	b.WriteString(c.Estimator.String())
	switch {
	case c.Estimator == RLOO:
		if c.PerAgent {
			b.WriteString("_agent")
		}
		return b.String()
	case c.PerAgent:
		b.WriteString("_agent") // invalid; kept visible
	}
	if !c.NormStd {
		b.WriteString("_nostd")
	} else if c.Eps != DefaultEps {
		b.WriteString("_eps")
		b.WriteString(strconv.FormatFloat(c.Eps, 'g', -1, 64))
	}
	return b.String()
}

func (s Spec) String() string { return s.Name() }

// PerPair reports whether the BaselineMean, BaselineStd and GroupSize the spec writes are the
// same on every row of a (group, agent) pair, as they are for every estimator but rloo (whose
// baseline leaves the row's own score out). Writers may store them once per pair.
func (s Spec) PerPair() bool { return s.Estimator != RLOO }

// UsesTraj reports whether the estimator reads Columns.Traj (only grpo, whose statistics are
// over trajectory means); for the others any Traj of the right length gives the same result.
func (s Spec) UsesTraj() bool { return s.Estimator == GRPO }

// ParseSpec parses an estimator name. The scheme (lowercase, '_'-separated) is
//
//	grpo | drmas | grpo_step     [_nostd | _eps<float>]
//	rloo | rloo_agent
//
// with the alias drgrpo = grpo_nostd (the Dr.GRPO paper's name). "_nostd" turns off the division
// by σ (A = score − μ); "_eps<float>" sets a non-default ε (e.g. drmas_eps1e-08), which is why
// it cannot be combined with _nostd. Names returned by Spec.Name are canonical: the alias and
// redundant spellings (e.g. _eps1e-6) are accepted here but never produced.
func ParseSpec(name string) (Spec, error) {
	s, _, err := parseSpec(name)
	return s, err
}

// ParseSpecEps is ParseSpec with a configured ε: a name that does not spell ε out (no
// _eps<float> suffix) gets eps instead of DefaultEps when eps > 0. An explicit _eps<float> always
// wins, even when it equals DefaultEps.
func ParseSpecEps(name string, eps float64) (Spec, error) {
	s, explicit, err := parseSpec(name)
	if err == nil && !explicit && eps > 0 {
		s.Eps = eps
	}
	return s, err
}

// parseSpec is ParseSpec; explicit reports whether the name spelled ε out (_eps<float>).
func parseSpec(name string) (s Spec, explicit bool, err error) {
	if e, ok := lookupName(name); ok && !e.Suffixes {
		return e.Spec, false, nil
	}
	e, rest, ok := lookupPrefix(name)
	if !ok || rest != "" && rest[0] != '_' { // "drmass" is a typo of a name, not a suffix
		return Spec{}, false, fmt.Errorf("unknown estimator %s (want %s)", excerpt.Quote(name), specNames)
	}
	s.Estimator = e.Spec.Estimator
	s.NormStd, s.Eps = true, DefaultEps
	switch {
	case rest == "":
	case rest == "_nostd":
		s.NormStd = false
	case strings.HasPrefix(rest, "_eps"):
		v, err := strconv.ParseFloat(rest[len("_eps"):], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < MinEps {
			return Spec{}, false, fmt.Errorf("estimator %q: eps must be a finite number ≥ %g (%s)", name, MinEps, WhyMinEps)
		}
		s.Eps, explicit = v, true
	default:
		return Spec{}, false, fmt.Errorf("estimator %q: unknown suffix %q (want _nostd or _eps<float>)", name, rest)
	}
	return s, explicit, nil
}
