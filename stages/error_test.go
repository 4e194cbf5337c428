package stages_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/storage/filestore"
)

func TestFail(t *testing.T) {
	ctx := context.Background()
	if err := stages.Fail(ctx, "rollout iter 1", nil); err != nil {
		t.Fatalf("Fail(nil) = %v", err)
	}
	base := errors.New("boom")
	once := stages.Fail(ctx, "rollout iter 1", fmt.Errorf("part 0: %w", base))
	if got, want := once.Error(), "rollout iter 1: part 0: boom"; got != want || !errors.Is(once, base) {
		t.Errorf("Fail = %q, want %q wrapping the cause", got, want)
	}
	// A stage error passed through another stage's Run is not named twice.
	if twice := stages.Fail(ctx, "learn iter 1", fmt.Errorf("x: %w", once)); twice.Error() != "x: "+once.Error() {
		t.Errorf("Fail of a stage error = %q, want it unchanged", twice)
	}

	// context.Canceled reads as an interruption only when ctx is cancelled.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	cause := fmt.Errorf("upload metrics.parquet: %w", context.Canceled)
	got := stages.Fail(cctx, "learn iter 3", cause)
	if want := "learn iter 3: interrupted (what was committed is kept): run the same command again to resume"; got.Error() != want || !errors.Is(got, context.Canceled) {
		t.Errorf("interrupted: %q, want %q matching context.Canceled", got, want)
	}
	if got := stages.Fail(ctx, "learn iter 3", cause); strings.Contains(got.Error(), "interrupted") {
		t.Errorf("a cancellation that is not this run's reads as an interruption: %q", got)
	}

	// A refused connection (a real dial to a closed port) says which server to check.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, derr := net.Dial("tcp", addr)
	if derr == nil {
		t.Skip("a closed port accepted a connection")
	}
	got = stages.Fail(ctx, "normalize iter 0", fmt.Errorf("put k: %w", derr))
	if want := "check that the server at " + addr + " is up and reachable, then run the same command again"; !strings.Contains(got.Error(), want) {
		t.Errorf("unreachable: %q, want it to say %q", got, want)
	}

	// A folder store that refuses a write says which folder to check (the temporary file of a
	// Put, as the folder store names it).
	perm := &fs.PathError{Op: "open", Path: "/data/runs/t/iter=000000/rollout/" + filestore.TempPrefix + "1", Err: syscall.EACCES}
	got = stages.Fail(ctx, "rollout iter 0", fmt.Errorf("put k: %w", perm))
	if want := "check that the user running drmas may read and write /data/runs/t/iter=000000/rollout, then"; !strings.Contains(got.Error(), want) {
		t.Errorf("permission: %q, want it to say %q", got, want)
	}
	// Errors a stage explains itself get no hint.
	if got := stages.Fail(ctx, "rollout iter 0", base).Error(); got != "rollout iter 0: boom" {
		t.Errorf("plain error: %q", got)
	}
}

// TestFailPermissionHintNamesWhatToCheck: a file that cannot be read (a committed part, an
// import's input file) is named itself, with read access to check, not its folder with "read
// and write" (the folder is fine; the file's mode is not); creating a folder or a file names
// the folder to write.
func TestFailPermissionHintNamesWhatToCheck(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		pe   *fs.PathError
		want string
	}{
		{&fs.PathError{Op: "open", Path: "/data/runs/t/iter=000000/rollout/part-00001-of-00002.parquet", Err: syscall.EACCES},
			"check that the user running drmas may read /data/runs/t/iter=000000/rollout/part-00001-of-00002.parquet, then"},
		{&fs.PathError{Op: "open", Path: "data/traj.jsonl", Err: syscall.EACCES},
			"check that the user running drmas may read data/traj.jsonl, then"},
		{&fs.PathError{Op: "mkdir", Path: "/data/runs/t/iter=000000", Err: syscall.EACCES},
			"check that the user running drmas may read and write /data/runs/t, then"},
		{&fs.PathError{Op: "remove", Path: "/data/runs/t/iter=000000/rollout/_receipts/p.json", Err: syscall.EPERM},
			"check that the user running drmas may read and write /data/runs/t/iter=000000/rollout/_receipts, then"},
	} {
		if got := stages.Fail(ctx, "normalize iter 0", fmt.Errorf("get k: %w", c.pe)).Error(); !strings.Contains(got, c.want) {
			t.Errorf("%s %s: %q\nwant it to say %q", c.pe.Op, c.pe.Path, got, c.want)
		}
	}
}
