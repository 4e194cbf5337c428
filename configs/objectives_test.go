package configs_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/configs"
)

// TestObjectiveDefaultsDigestAsBefore: a learn section with the objective options at their
// zero values, in the canonical form digests take, encodes none of them, so its digest (and
// every manifest and replay that records it) is the one from before the options existed.
func TestObjectiveDefaultsDigestAsBefore(t *testing.T) {
	l := configs.Default().Learn
	warm := l.LRWarmupSteps
	l.LRWarmupSteps = 0 // the default warms up (a fresh AdamW's first steps are sign-like); zero is the old form
	data, err := json.Marshal(l.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"lr_schedule", "lr_warmup_steps", "min_lr_ratio", "loss_agg", "loss_norm_len", "clip_c", "ratio_level",
		"seq_clip_low", "seq_clip_high", "entropy_coef", "agent_balance", "kl_type", "kl_ref", "rollout_is", "rollout_is_cap", "rollout_is_mode",
		"activation_checkpointing"} {
		if strings.Contains(string(data), `"`+key+`"`) {
			t.Errorf("default learn section digests %s: %s", key, data)
		}
	}
	// Activation checkpointing changes memory and time, never a result: no value digests.
	for _, mode := range configs.ActivationCheckpointings {
		l.ActivationCheckpointing = mode
		if data, _ := json.Marshal(l.Canonical()); strings.Contains(string(data), "activation_checkpointing") {
			t.Errorf("learn.activation_checkpointing %s digests: %s", mode, data)
		}
	}
	if warm != 8 {
		t.Errorf("default learn.lr_warmup_steps %d, want 8", warm)
	}
	if l.LRSchedule != "constant" {
		t.Errorf("default learn.lr_schedule %q, want constant", l.LRSchedule)
	}
}

// TestObjectiveOptionsValidate: each bad value is one line naming its key.
func TestObjectiveOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		set  func(*configs.Learn)
		want string
	}{
		{func(l *configs.Learn) { l.LRSchedule = "linear" }, `learn.lr_schedule: "linear", want constant or cosine`},
		{func(l *configs.Learn) { l.ActivationCheckpointing = "yes" }, `learn.activation_checkpointing: "yes", want auto, on, off`},
		{func(l *configs.Learn) { l.LRWarmupSteps = -1 }, "learn.lr_warmup_steps: -1, want ≥ 0"},
		{func(l *configs.Learn) { l.MinLRRatio = 1.5 }, "learn.min_lr_ratio: 1.5, want in [0, 1]"},
		{func(l *configs.Learn) { l.LossAgg = "mean" }, `learn.loss_agg: "mean", want token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm`},
		{func(l *configs.Learn) { l.LossNormLen = -2 }, "learn.loss_norm_len: -2, want ≥ 0 (0: rollout.max_tokens)"},
		{func(l *configs.Learn) { l.ClipC = 0.5 }, "learn.clip_c: 0.5, want 0 (off) or > 1 (verl uses 3)"},
		{func(l *configs.Learn) { l.RatioLevel = "row" }, `learn.ratio_level: "row", want token, sequence`},
		{func(l *configs.Learn) { l.SeqClipLow = 1 }, "learn.seq_clip_low: 1, want in [0, 1)"},
		{func(l *configs.Learn) { l.SeqClipHigh = -1 }, "learn.seq_clip_high: -1, want ≥ 0"},
		{func(l *configs.Learn) { l.EntropyCoef = -0.1 }, "learn.entropy_coef: -0.1, want ≥ 0"},
		{func(l *configs.Learn) { l.AgentBalance = "count" }, `learn.agent_balance: "count", want none, inverse_count`},
		{func(l *configs.Learn) { l.KLType = "low_var_kl" }, `learn.kl_type: "low_var_kl", want k3, k1, k2, abs`},
		{func(l *configs.Learn) { l.KLRef = "init" }, `learn.kl_ref: "init", want step0, base`},
		{func(l *configs.Learn) { l.KLCoef, l.KLRef = 0.1, "base" }, "learn.kl_ref: base, want step0: model m1 trains every weight, so its reference is step 0 (base is the base with the adapter off, for LoRA models)"},
		{func(l *configs.Learn) { l.RolloutIS = "row" }, `learn.rollout_is: "row", want none, token, sequence`},
		{func(l *configs.Learn) { l.RolloutIS, l.RolloutISCap = "token", 1 }, "learn.rollout_is_cap: 1, want > 1 with rollout_is on"},
		{func(l *configs.Learn) { l.RolloutISMode = "clip" }, `learn.rollout_is_mode: "clip", want truncate, mask`},
	} {
		c := configs.Default()
		tc.set(&c.Learn)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
			continue
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if strings.Contains(line, tc.want) && line != tc.want {
				t.Errorf("error line %q is more than %q", line, tc.want)
			}
		}
	}
	c := configs.Default()
	c.Learn.LRSchedule, c.Learn.LRWarmupSteps, c.Learn.MinLRRatio = "cosine", 5, 0.1
	if err := c.Validate(); err != nil {
		t.Errorf("a valid cosine schedule: %v", err)
	}
}

// TestFilterGroupsKeys: rollout.filter_groups off digests as before (neither key in the
// canonical rollout section), and max_oversample below 1 with it on is one line.
func TestFilterGroupsKeys(t *testing.T) {
	c := configs.Default()
	data, err := json.Marshal(c.Rollout.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "filter_groups") || strings.Contains(string(data), "max_oversample") {
		t.Errorf("default rollout section digests the filter: %s", data)
	}
	c.Rollout.FilterGroups, c.Rollout.MaxOversample = true, 0
	want := "rollout.max_oversample: 0, want ≥ 1 with rollout.filter_groups (1: no extra prompts)"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}
