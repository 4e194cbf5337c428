package model

// Checkpointing is a Trainable whose training forward can keep, instead of every block's
// activations, only each block's input: the backward then runs each block's forward again,
// block by block from the last, with the same calls, so log-probs and every gradient are the
// same bits as without, for about one more forward of the blocks. The LLM and a LoRA over one
// implement it; off by default.
type Checkpointing interface {
	SetActivationCheckpointing(on bool)
}

// SetActivationCheckpointing turns activation checkpointing of Forward (and TrainForward,
// Score) on or off. Not safe while passes of the model run.
func (m *LLM) SetActivationCheckpointing(on bool) { m.ckpt = on }

// ActivationCheckpointing reports whether it is on.
func (m *LLM) ActivationCheckpointing() bool { return m.ckpt }

// SetActivationCheckpointing turns activation checkpointing of the adapter's training
// forwards on or off (the base's own setting applies to the base alone). Not safe while passes
// of the adapter run.
func (l *LoRA) SetActivationCheckpointing(on bool) { l.ckpt = on }

// ActivationCheckpointing reports whether it is on.
func (l *LoRA) ActivationCheckpointing() bool { return l.ckpt }

var (
	_ Checkpointing = (*LLM)(nil)
	_ Checkpointing = (*LoRA)(nil)
)
