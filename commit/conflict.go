package commit

// ConflictState is where a conflict left the folder, which decides what to do about it.
type ConflictState int

const (
	// Kept: the folder stays committed by the other writer; this writer's output is not in it.
	Kept ConflictState = iota
	// Uncommitted: the folder is not committed: this writer's commit did not happen, or was
	// withdrawn (Withdrawn says which).
	Uncommitted
	// Unsure: a check or a withdrawal failed, so the folder may be committed over a file its
	// manifest does not list (readers refuse such a folder).
	Unsure
	// OtherWorker: the folder is committed by a worker of the same folder that ran another
	// config, checkpoint or input (every worker of a folder must run the same).
	OtherWorker
	// ForeignParts: some of the folder's parts were written by a worker with another config,
	// checkpoint or input; the folder is not committed.
	ForeignParts
)

// ConflictError is a write refused or undone because another writer committed the folder with
// other content. It carries the facts only; what to do about it depends on State, and the
// command line says it (cmd/drmas), not the library. It matches ErrConflict, and ErrWithdrawn
// when Withdrawn.
type ConflictError struct {
	Dir   string // the folder
	File  string // the file(s) this writer wrote, comma-separated ("" when the commit itself conflicted)
	State ConflictState
	// Withdrawn: this writer's upload replaced a file of the other writer's commit, so that
	// commit was withdrawn (the folder is uncommitted again).
	Withdrawn bool
	What      string // what happened, naming the folder
	Err       error  // the error that made the conflict (a replaced file, a failed store call), or nil
}

func (e *ConflictError) Error() string {
	s := e.What
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Withdrawn {
		return s + ": " + errWithdrawn.Error()
	}
	return s + ": " + ErrConflict.Error()
}

func (e *ConflictError) Unwrap() []error {
	errs := []error{ErrConflict}
	if e.Withdrawn {
		errs = append(errs, ErrWithdrawn)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}
