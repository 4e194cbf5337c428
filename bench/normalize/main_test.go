package main

import (
	"strings"
	"testing"
)

// TestRunBenchRejectsBadFlags: flag values the benchmark cannot run with are errors that name
// the flag, before any dataset is generated (-reps 0 used to panic in the summary after the
// runs, -parts -1 while generating, and -parts 0 or -rows 0 committed an empty dataset that
// later runs reused).
func TestRunBenchRejectsBadFlags(t *testing.T) {
	good := options{rows: 64, parts: 2, threads: 1, reps: 1, tokens: 8}
	for _, tc := range []struct {
		edit func(*options)
		want string
	}{
		{func(o *options) { o.reps = 0 }, "-reps 0"},
		{func(o *options) { o.parts = -1 }, "-parts -1"},
		{func(o *options) { o.parts = 0 }, "-parts 0"},
		{func(o *options) { o.rows = 0 }, "-rows 0"},
		{func(o *options) { o.threads = 0 }, "-threads 0"},
		{func(o *options) { o.tokens = -3 }, "-tokens -3"},
		{func(o *options) { o.parts = 65 }, "-parts 65: must be at most -rows 64"},
	} {
		o := good
		o.dir = t.TempDir()
		tc.edit(&o)
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%+v: panic %v", o, p)
				}
			}()
			err = runBench(o)
		}()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", o, err, tc.want)
		}
	}
	if err := good.validate(); err != nil {
		t.Errorf("%+v: %v", good, err)
	}
}
