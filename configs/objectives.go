package configs

import (
	"maps"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// The values of the learner's objective options (docs/objectives.md). An empty value is the
// first, the default, which keeps the learner's behaviour and digests as before the option.

// The values of the learner's enumerated options; the first is the default.
var (
	LRSchedules    = []string{"constant", "cosine"}
	LossAggs       = []string{"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"}
	RatioLevels    = []string{"token", "sequence"}
	AgentBalances  = []string{"none", "inverse_count"}
	KLTypes        = []string{"k3", "k1", "k2", "abs"}
	KLRefs         = []string{"step0", "base"}
	RolloutISs     = []string{"none", "token", "sequence"}
	RolloutISModes = []string{"truncate", "mask"}
	// ActivationCheckpointings: auto turns checkpointing on for a step that would not fit
	// the memory this process may use without it.
	ActivationCheckpointings = []string{"auto", "on", "off"}
)

// Checkpointing is learn.activation_checkpointing, auto when empty.
func (l Learn) Checkpointing() string {
	if l.ActivationCheckpointing == "" {
		return ActivationCheckpointings[0]
	}
	return l.ActivationCheckpointing
}

// oneOf reports whether v is empty (the default) or one of values.
func oneOf(v string, values []string) bool {
	return v == "" || slices.Contains(values, v)
}

// Canonical returns l with each objective option at its default blanked, so that a digest of
// it (omitempty) is the digest of a config from before the option: replays and resumes of
// older runs with the options off stay byte-identical.
// A key that its option leaves unused (seq_clip_* with token ratios) is blanked too.
func (l Learn) Canonical() Learn {
	blank := func(v *string, values []string) {
		if *v == values[0] {
			*v = ""
		}
	}
	blank(&l.LRSchedule, LRSchedules)
	blank(&l.LossAgg, LossAggs)
	blank(&l.RatioLevel, RatioLevels)
	blank(&l.AgentBalance, AgentBalances)
	blank(&l.KLType, KLTypes)
	blank(&l.KLRef, KLRefs)
	blank(&l.RolloutIS, RolloutISs)
	l.ActivationCheckpointing = "" // the same bits whatever its value
	if l.LossAgg != "seq-mean-token-sum-norm" {
		l.LossNormLen = 0
	}
	if l.RatioLevel == "" {
		l.SeqClipLow, l.SeqClipHigh = 0, 0
	}
	if l.RolloutIS == "" {
		l.RolloutISCap, l.RolloutISMode = 0, ""
	}
	if l.KLCoef == 0 {
		l.KLType, l.KLRef = "", ""
	}
	return l
}

// validateObjective checks the policy loss's options (need as in Validate); models are the
// config's.
func validateObjective(l Learn, models map[string]Model, need func(fail bool, key string, v any, want string)) {
	enum := func(key, v string, values []string) {
		need(!oneOf(v, values), "learn."+key, excerpt.Quote(v), strings.Join(values, ", "))
	}
	enum("loss_agg", l.LossAgg, LossAggs)
	enum("ratio_level", l.RatioLevel, RatioLevels)
	enum("agent_balance", l.AgentBalance, AgentBalances)
	enum("kl_type", l.KLType, KLTypes)
	enum("kl_ref", l.KLRef, KLRefs)
	enum("rollout_is", l.RolloutIS, RolloutISs)
	enum("rollout_is_mode", l.RolloutISMode, RolloutISModes)
	enum("activation_checkpointing", l.ActivationCheckpointing, ActivationCheckpointings)
	need(l.LossNormLen < 0, "learn.loss_norm_len", l.LossNormLen, "≥ 0 (0: rollout.max_tokens)")
	need(l.ClipC != 0 && l.ClipC <= 1, "learn.clip_c", l.ClipC, "0 (off) or > 1 (verl uses 3)")
	need(l.SeqClipLow < 0 || l.SeqClipLow >= 1, "learn.seq_clip_low", l.SeqClipLow, "in [0, 1)")
	need(l.SeqClipHigh < 0, "learn.seq_clip_high", l.SeqClipHigh, "≥ 0")
	need(l.EntropyCoef < 0, "learn.entropy_coef", l.EntropyCoef, "≥ 0")
	checkKLRef(l, models, need)
	need(l.RolloutIS != "" && l.RolloutIS != RolloutISs[0] && l.RolloutISCap <= 1, "learn.rollout_is_cap", l.RolloutISCap, "> 1 with rollout_is on")
}

// checkKLRef requires kl_ref base to have a base to turn to: every model trained here must be
// a LoRA adapter (a full fine-tune's reference is its frozen step 0).
func checkKLRef(l Learn, models map[string]Model, need func(fail bool, key string, v any, want string)) {
	if l.KLRef != "base" || l.KLCoef == 0 {
		return
	}
	for _, n := range slices.Sorted(maps.Keys(models)) {
		m := models[n]
		need(!m.External() && m.LoRA == nil, "learn.kl_ref", "base", "step0: model "+n+" trains every weight, so its reference is step 0 (base is the base with the adapter off, for LoRA models)")
	}
}

// ObjectiveTag names the learn section's objective options when any is off the default
// config's: "o" and 8 hex digits of their digest; "" at the defaults. Replays that learn the
// same rows under other options write runs named apart by it.
func (l Learn) ObjectiveTag() string {
	o := l.objectiveOptions()
	if o == Default().Learn.objectiveOptions() {
		return ""
	}
	return "o" + Digest(o)[:8]
}

// objectiveOptions is the canonical form of l's objective options alone.
func (l Learn) objectiveOptions() Learn {
	c := l.Canonical()
	return Learn{LRSchedule: c.LRSchedule, LRWarmupSteps: c.LRWarmupSteps, MinLRRatio: c.MinLRRatio, LossAgg: c.LossAgg,
		LossNormLen: c.LossNormLen, ClipC: c.ClipC, RatioLevel: c.RatioLevel, SeqClipLow: c.SeqClipLow, SeqClipHigh: c.SeqClipHigh,
		EntropyCoef: c.EntropyCoef, AgentBalance: c.AgentBalance, KLType: c.KLType, KLRef: c.KLRef, RolloutIS: c.RolloutIS,
		RolloutISCap: c.RolloutISCap, RolloutISMode: c.RolloutISMode}
}
