package main

import (
	"errors"
	"fmt"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/rollout"
)

// advise returns err's message followed by what to do about it. The libraries' typed errors
// carry the facts (which folder, which step, where the conflict left it); what a user does
// about them is said here, once. A stage's typed error decides before a commit's: a stage's
// error that wraps a commit conflict knows more about the remedy than the commit does.
func advise(err error) string {
	if a := advice(err); a != "" {
		return err.Error() + ": " + a
	}
	return err.Error()
}

// advice is what to do about err, or "" when no error in its chain has advice.
func advice(err error) string {
	var le *learn.ConflictError
	if errors.As(err, &le) {
		return learnAdvice(le)
	}
	var se *stages.StaleAdvantagesError
	if errors.As(err, &se) {
		return fmt.Sprintf("delete %s/ and %s/, then run `drmas run-stage normalize --iter %d --estimator %s` again", se.Dir, se.Diagnostics, se.Iter, se.Estimator)
	}
	var oe *rollout.OrderError
	if errors.As(err, &oe) {
		return rolloutAdvice(oe)
	}
	var te *stages.TakenError
	if errors.As(err, &te) {
		if te.Stage == "import" {
			return "import into another --iter or --run"
		}
		return fmt.Sprintf("%s under another --run, or delete %s", te.Stage, te.Dir)
	}
	var ce *commit.ConflictError
	if errors.As(err, &ce) {
		return commitAdvice(ce)
	}
	return ""
}

func learnAdvice(e *learn.ConflictError) string {
	switch e.Remedy {
	case learn.RollOutAgain:
		first := ""
		if e.Step < int64(e.Iter) {
			first = "run " + stages.ChainBefore(e.Step, int64(e.Iter)) + " first, then "
		}
		return fmt.Sprintf("%sdelete %s/ and roll iteration %d out again, or train under another --run", first, e.Dir, e.Iter)
	case learn.RelearnOrAnotherRun:
		return fmt.Sprintf("train the new rollout under another --run, or delete %s/ and checkpoint step %d (and what later iterations made from it) and run learn again", e.Dir, e.Step)
	case learn.OneLearn:
		return fmt.Sprintf("run one learn of iteration %d, with the settings you want", e.Iter)
	case learn.OtherEstimator:
		return "compare estimators with `drmas ablate`, or train under another --run"
	}
	return "train under another --run"
}

func rolloutAdvice(e *rollout.OrderError) string {
	n := int64(e.Iter)
	fix := fmt.Sprintf("pass --step %d if it is still kept", n)
	if e.Latest && e.Step < n {
		fix = fmt.Sprintf("run %s first (`drmas run --iters %d` does)", stages.ChainBefore(e.Step, n), n)
	}
	return fix + ", or roll out under another --run"
}

func commitAdvice(e *commit.ConflictError) string {
	switch e.State {
	case commit.Kept:
		return fmt.Sprintf("to redo %s with this command's settings, delete it first", e.Dir)
	case commit.Uncommitted:
		return "rerun the stage with the settings you want"
	case commit.Unsure:
		return fmt.Sprintf("if readers refuse %s, delete it and rerun", e.Dir)
	case commit.OtherWorker:
		return fmt.Sprintf("rerun with that config, or delete %s to redo it with this one", e.Dir)
	case commit.ForeignParts:
		return "rerun those shards with this config"
	}
	return ""
}
