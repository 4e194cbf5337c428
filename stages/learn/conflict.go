package learn

// Remedy says what can be done about a ConflictError; cmd/drmas words it.
type Remedy int

const (
	// AnotherRun: the run's checkpoint chain or learn folder belongs to other work (another
	// iteration, other inputs, another estimator): only another run can train this one.
	AnotherRun Remedy = iota
	// RollOutAgain: the iteration's rollout was sampled from another step than the one this
	// iteration samples from (Step, Iter): the earlier iterations run first (when Step < Iter),
	// then the rollout folder Dir is deleted and rolled out again; or another run.
	RollOutAgain
	// RelearnOrAnotherRun: the learn folder Dir was committed (publishing step Step) from a
	// rollout replaced since: train the new rollout under another run, or delete the folder and
	// the step (and what later iterations made from it) and learn again.
	RelearnOrAnotherRun
	// OtherEstimator: the learn folder is committed with another estimator than this one's.
	OtherEstimator
	// OneLearn: two learns of the iteration (Iter) with other settings published at the same
	// time, and neither's update is: one learn of it must run, with the settings wanted.
	OneLearn
)

// ConflictError is a learn that cannot train or publish its update because of what the run
// already holds. It carries the facts only (What); cmd/drmas says what to do (Remedy).
type ConflictError struct {
	Remedy Remedy
	Iter   int    // the iteration learned
	Step   int64  // RollOutAgain: the step its rollout was sampled from; RelearnOrAnotherRun: the step published
	Dir    string // RollOutAgain: the rollout folder; RelearnOrAnotherRun: the learn folder
	What   string
	Err    error // what it wraps (a commit conflict), or nil
}

func (e *ConflictError) Error() string {
	if e.Err != nil {
		return e.What + ": " + e.Err.Error()
	}
	return e.What
}

func (e *ConflictError) Unwrap() error { return e.Err }
