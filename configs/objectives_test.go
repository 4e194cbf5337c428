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
	for _, key := range []string{"lr_schedule", "lr_warmup_steps", "min_lr_ratio"} {
		if strings.Contains(string(data), `"`+key+`"`) {
			t.Errorf("default learn section digests %s: %s", key, data)
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
		{func(l *configs.Learn) { l.LRWarmupSteps = -1 }, "learn.lr_warmup_steps: -1, want ≥ 0"},
		{func(l *configs.Learn) { l.MinLRRatio = 1.5 }, "learn.min_lr_ratio: 1.5, want in [0, 1]"},
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
