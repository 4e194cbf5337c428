package commit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
)

// TestConflictErrorsCarryTheFacts: the conflicts of a writer that meets another writer's
// folder are *commit.ConflictError values that name the folder, the file and where the folder
// is left (cmd/drmas words the advice from them), found by errors.As through wrapping, and
// still matching ErrConflict (and ErrWithdrawn only when withdrawn).
func TestConflictErrorsCarryTheFacts(t *testing.T) {
	ctx := context.Background()
	b := bucket(t)
	dir := layout.RolloutDir("r", 0)
	it := 0
	parts := []string{"part-00000-of-00002.parquet", "part-00001-of-00002.parquet"}
	writerOf := func(config string) *commit.Manifest {
		return &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it, ConfigDigest: config}
	}
	conflict := func(what string, err error, state commit.ConflictState, file string) {
		t.Helper()
		var ce *commit.ConflictError
		wrapped := fmt.Errorf("rollout iter 0: %w", err)
		if !errors.As(wrapped, &ce) || !errors.Is(wrapped, commit.ErrConflict) || errors.Is(wrapped, commit.ErrWithdrawn) {
			t.Fatalf("%s: %v (%T), want a *commit.ConflictError matching ErrConflict, not ErrWithdrawn", what, err, err)
		}
		if ce.Dir != dir || ce.State != state || ce.File != file || ce.Withdrawn || !strings.Contains(ce.Error(), dir) {
			t.Fatalf("%s: %+v, want folder %s, state %d, file %q", what, ce, dir, state, file)
		}
	}
	// Worker B's part 1 with a receipt of config B, then worker A's part 0 (config A).
	for i, w := range []string{"B", "A"} {
		f, err := commit.PutFile(ctx, b, dir, parts[1-i], []byte("config "+w), 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := commit.PutReceipt(ctx, b, dir, commit.Receipt{File: f, Writer: commit.Writer(writerOf(w))}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := commit.Finalize(ctx, b, dir, parts, writerOf("A"), nil)
	conflict("A's Finalize over B's part", err, commit.ForeignParts, parts[1])
	// A redoes part 1; A commits; B's part and B's Finalize then conflict with A's commit.
	f, err := commit.PutFile(ctx, b, dir, parts[1], []byte("config A"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit.PutReceipt(ctx, b, dir, commit.Receipt{File: f, Writer: commit.Writer(writerOf("A"))}); err != nil {
		t.Fatal(err)
	}
	if done, _, err := commit.Finalize(ctx, b, dir, parts, writerOf("A"), nil); !done || err != nil {
		t.Fatalf("A's Finalize: %v %v", done, err)
	}
	_, err = commit.PutFile(ctx, b, dir, parts[0], []byte("config B"), 1)
	conflict("B's part over A's commit", err, commit.Kept, parts[0])
	_, _, err = commit.Finalize(ctx, b, dir, parts, writerOf("B"), nil)
	conflict("B's Finalize after A's commit", err, commit.OtherWorker, "")
}

// TestWithdrawnConflictError: a withdrawn commit's error says so in its fields and matches
// both ErrWithdrawn and ErrConflict, and the cause it wraps.
func TestWithdrawnConflictError(t *testing.T) {
	cause := errors.New("part holds other bytes")
	err := fmt.Errorf("learn iter 1: %w", &commit.ConflictError{Dir: "d", State: commit.Uncommitted, Withdrawn: true, What: "commit d: withdrawn", Err: cause})
	var ce *commit.ConflictError
	if !errors.As(err, &ce) || !ce.Withdrawn || !errors.Is(err, commit.ErrWithdrawn) || !errors.Is(err, commit.ErrConflict) || !errors.Is(err, cause) {
		t.Fatalf("%v: want a withdrawn *commit.ConflictError matching ErrWithdrawn, ErrConflict and its cause", err)
	}
	if want := "learn iter 1: commit d: withdrawn: part holds other bytes: commit withdrawn: commit conflict"; err.Error() != want {
		t.Fatalf("got %q\nwant %q", err.Error(), want)
	}
}
