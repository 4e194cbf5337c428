// Package invariants says whether this build checks the expensive internal invariants.
//
// Build (or test) with `-tags invariants` and the packages that have such checks run them:
// estimators compares every ComputeMany result with the map-based Reference on the same
// columns, and the learner checks that the first mini-batch's recomputed log-probs equal the
// scored ones bit for bit. A violated invariant is a bug in drmas, not bad input: it is
// returned as an error wrapping ErrViolated that names what differed. Without the tag,
// Enabled is a false constant and the checks compile away. `make test` runs the packages
// that have checks once more with the tag.
package invariants

import "errors"

// ErrViolated is wrapped by every invariant failure.
var ErrViolated = errors.New("internal invariant violated (a drmas bug: please report it)")
