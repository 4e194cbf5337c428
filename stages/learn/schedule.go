package learn

import (
	"math"

	"github.com/drmas-dev/drmas/configs"
)

// schedule is a model's learning rate per optimizer step (learn.lr_schedule): a linear warm-up
// from 0 over the first Warmup steps, then constant, or a half cosine from Base down to
// Base·MinRatio at step Total, as verl's (and transformers') schedules with warm-up. The step is
// the optimizer's count of steps taken (saved with its state), so a resumed run continues.
type schedule struct {
	Base     float64
	Cosine   bool
	Warmup   int64
	MinRatio float64
	Total    int64 // updates of the whole run: iterations × epochs × mini-batches
}

// scheduleOf returns the schedule of a model whose learning rate is base under cfg.
func scheduleOf(cfg *configs.Config, base float64) schedule {
	l := cfg.Learn
	return schedule{Base: base, Cosine: l.LRSchedule == "cosine", Warmup: int64(l.LRWarmupSteps), MinRatio: l.MinLRRatio,
		Total: int64(cfg.Iterations) * int64(l.Epochs) * int64(l.MiniBatches)}
}

// at is the learning rate of the step taken after k steps (k = 0: a fresh optimizer's first).
// Constant without warm-up is Base itself, bit for bit.
func (s schedule) at(k int64) float64 {
	if k < s.Warmup {
		return s.Base * float64(k) / float64(s.Warmup)
	}
	if !s.Cosine {
		return s.Base
	}
	progress := math.Min(1, float64(k-s.Warmup)/float64(max(1, s.Total-s.Warmup)))
	return s.Base * (s.MinRatio + (1-s.MinRatio)*0.5*(1+math.Cos(math.Pi*progress)))
}
