package learn

import (
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/model"
)

// stepPlan is how a model's training steps run: micro-batches of micro sequences, with or
// without activation checkpointing.
type stepPlan struct {
	micro int
	ckpt  bool
}

// planSteps is the plan model id trains with on the CPU engine for a Hugging Face model (or a
// LoRA adapter over one), and sets the model's checkpointing to it. learn.activation_checkpointing
// on or off is that; auto is off when a step at micro_batch fits the memory this process may use
// without, else on: the same gradients, bit for bit, as the config asks for, at the cost of
// recomputing the blocks. If a step still does not fit, the largest smaller micro-batch that
// does (at least 1): the rows then run in accumulation chunks of that size, the same gradients,
// bit for bit, as that micro_batch in the config. The GPU engine of an LLM on a device that
// reports its memory plans the micro-batch against it the same way (deviceLLM.plan); another
// engine or model keeps micro_batch.
func planSteps(cfg *configs.Config, id string, m model.Trainable, eng Engine, micro int, logf func(string, ...any)) stepPlan {
	if d, ok := eng.(deviceLLM); ok {
		return d.plan(cfg, id, micro, logf)
	}
	if eng != CPU {
		return stepPlan{micro: micro}
	}
	if _, ok := hfmodel.TrainableStep(cfg, m, 1, false); !ok {
		return stepPlan{micro: micro}
	}
	step := func(ckpt bool) func(int) int64 {
		return func(n int) int64 { s, _ := hfmodel.TrainableStep(cfg, m, n, ckpt); return s.Total() }
	}
	p := stepPlan{micro: micro, ckpt: cfg.Learn.Checkpointing() == "on"}
	if cfg.Learn.Checkpointing() == "auto" && hfmodel.MicroBatchFit(micro, step(false)) < micro {
		p.ckpt = true
		if logf != nil {
			logf("learner %s: a micro-batch of %d sequences needs about %s, more than this process may use: activation checkpointing on (%s)",
				id, micro, configs.Bytes(float64(step(false)(micro))), configs.Bytes(float64(step(true)(micro))))
		}
	}
	p.micro = hfmodel.MicroBatchFit(micro, step(p.ckpt))
	if p.micro < micro && logf != nil {
		logf("learner %s: a micro-batch of %d sequences needs about %s, more than this process may use: training in accumulation chunks of %d (%s each)",
			id, micro, configs.Bytes(float64(step(p.ckpt)(micro))), p.micro, configs.Bytes(float64(step(p.ckpt)(p.micro))))
	}
	if c, ok := m.(model.Checkpointing); ok {
		c.SetActivationCheckpointing(p.ckpt)
	}
	return p
}
