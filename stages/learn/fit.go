package learn

import (
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
)

// microBatchFor is the micro-batch model id trains with: micro_batch, or on the CPU engine for a
// Hugging Face model (or a LoRA adapter over one) whose step at micro_batch would not fit the
// memory this process may use, the largest smaller one that does (at least 1). The rows then
// run in accumulation chunks of that size: the same gradients, bit for bit, as that
// micro_batch in the config.
func microBatchFor(cfg *configs.Config, id string, m model.Trainable, eng Engine, micro int, logf func(string, ...any)) int {
	if eng != CPU {
		return micro
	}
	if _, ok := hfmodel.TrainableStep(cfg, m, 1); !ok {
		return micro
	}
	step := func(n int) int64 { s, _ := hfmodel.TrainableStep(cfg, m, n); return s.Total() }
	fit := hfmodel.MicroBatchFit(micro, step)
	if fit < micro && logf != nil {
		logf("learner %s: a micro-batch of %d sequences needs about %s, more than this process may use: training in accumulation chunks of %d (%s each)",
			id, micro, configs.Bytes(float64(step(micro))), fit, configs.Bytes(float64(step(fit))))
	}
	return fit
}
