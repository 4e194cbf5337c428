package rollout

// OrderError is a rollout of iteration Iter that would sample from step Step, not step Iter
// (the iterations of a run run in order). Latest: the step is the run's LATEST, not one asked
// for with --step. It carries the facts (What); cmd/drmas says what to do.
type OrderError struct {
	Iter   int
	Step   int64
	Latest bool
	What   string
}

func (e *OrderError) Error() string { return e.What }
