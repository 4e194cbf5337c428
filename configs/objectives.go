package configs

import "slices"

// The values of the learner's objective options (docs/objectives.md). An empty value is the
// first, the default, which keeps the learner's behaviour and digests as before the option.

// LRSchedules are learn.lr_schedule's values.
var LRSchedules = []string{"constant", "cosine"}

// oneOf reports whether v is empty (the default) or one of values.
func oneOf(v string, values []string) bool {
	return v == "" || slices.Contains(values, v)
}

// Canonical returns l with each objective option at its default blanked, so that a digest of
// it (omitempty) is the digest of a config from before the option: replays and resumes of
// older runs with the options off stay byte-identical.
func (l Learn) Canonical() Learn {
	if l.LRSchedule == LRSchedules[0] {
		l.LRSchedule = ""
	}
	return l
}
