package stages

import "github.com/drmas-dev/drmas/commit"

// StaleAdvantagesError is committed advantages (Dir, with their diagnostics in Diagnostics) of
// iteration Iter's estimator Estimator that were computed from another rollout than the one
// now committed: the rollout was replaced since, so they describe other rows. It carries the
// facts (What names the folders); cmd/drmas says what to do. It matches commit.ErrConflict.
type StaleAdvantagesError struct {
	Dir, Diagnostics string
	Iter             int
	Estimator        string
	What             string
}

func (e *StaleAdvantagesError) Error() string { return e.What + ": " + commit.ErrConflict.Error() }

func (e *StaleAdvantagesError) Unwrap() error { return commit.ErrConflict }

// TakenError is a folder (Dir) that a stage (Stage: "evaluate", "import") finds committed with
// other content than it would write (What says how): it carries the facts; cmd/drmas says
// what to do. It matches commit.ErrConflict.
type TakenError struct {
	Stage string
	Dir   string
	What  string
}

func (e *TakenError) Error() string { return e.What + ": " + commit.ErrConflict.Error() }

func (e *TakenError) Unwrap() error { return commit.ErrConflict }
