package checkpoints_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/storage"
)

// FuzzLatest: whatever LATEST holds, ReadLatest returns a step ≥ 0 or an error naming LATEST
// (never a step for a body that does not name one), the canonical body of a step it read
// names that step, and Load still loads a committed step: LATEST's if it names a committed
// one, else the newest before it, or the newest of all when LATEST names no step (here of
// steps 0 and 2). Run with:
// go test ./checkpoints -run '^$' -fuzz '^FuzzLatest$' -fuzztime 30s
func FuzzLatest(f *testing.F) {
	for _, s := range []string{"step=000002\n", "step=000000\n", "step=000001\n", "step=2", " step=000002 \r\n", "step=-1\n", "step=\n", "", "step=99999999999999999999\n", "\xff"} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	b := store(f)
	for _, step := range []int64{0, 2} {
		s := newSet(f, step, uint64(step)+1)
		s.Optims = nil
		if _, err := checkpoints.Publish(ctx, b, "r", s, "cfg"); err != nil {
			f.Fatal(err)
		}
	}
	key := layout.LatestKey("r")
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := storage.PutBytes(ctx, b, key, body); err != nil {
			t.Fatal(err)
		}
		step, err := checkpoints.ReadLatest(ctx, b, "r")
		if err != nil {
			if step != 0 || !strings.Contains(err.Error(), "LATEST") && !errors.Is(err, checkpoints.ErrNone) {
				t.Fatalf("ReadLatest(%q) = %d, %v", body, step, err)
			}
		} else {
			if step < 0 || !strings.Contains(string(body), "step=") {
				t.Fatalf("ReadLatest(%q) = step %d", body, step)
			}
			if err := storage.PutBytes(ctx, b, key, []byte(checkpoints.FormatStep(step)+"\n")); err != nil {
				t.Fatal(err)
			}
			if again, err := checkpoints.ReadLatest(ctx, b, "r"); err != nil || again != step {
				t.Fatalf("canonical LATEST of step %d reads as %d, %v", step, again, err)
			}
			if err := storage.PutBytes(ctx, b, key, body); err != nil {
				t.Fatal(err)
			}
		}
		set, lerr := checkpoints.Load(ctx, b, "r", false, nil)
		if lerr != nil {
			t.Fatalf("LATEST %q: Load: %v", body, lerr)
		}
		want := int64(2)
		if err == nil && step < 2 {
			want = 0 // LATEST's own step, or the newest committed one before it
		}
		if set.Step != want {
			t.Fatalf("LATEST %q: Load loaded step %d, want %d", body, set.Step, want)
		}
	})
}
