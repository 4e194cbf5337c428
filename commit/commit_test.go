package commit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/filestore"
)

func bucket(t *testing.T) storage.Bucket {
	t.Helper()
	b, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func manifest(t *testing.T, ctx context.Context, b storage.Bucket, dir string, payload string) *commit.Manifest {
	t.Helper()
	f, err := commit.PutFile(ctx, b, dir, "part-00000-of-00001.parquet", []byte(payload), 3)
	if err != nil {
		t.Fatal(err)
	}
	it := 4
	return &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it, Rows: 3, Files: []commit.File{f}}
}

func TestCommitIsIdempotentAndDetectsConflicts(t *testing.T) {
	ctx := context.Background()
	b := bucket(t)
	dir := layout.RolloutDir("r", 4)
	if ok, _ := commit.IsCommitted(ctx, b, dir); ok {
		t.Fatal("committed before the manifest exists")
	}
	if _, _, err := commit.Read(ctx, b, dir); !errors.Is(err, commit.ErrNotCommitted) {
		t.Fatalf("want ErrNotCommitted, got %v", err)
	}
	m := manifest(t, ctx, b, dir, "abc")
	sha, err := commit.Commit(ctx, b, dir, m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := commit.Commit(ctx, b, dir, manifest(t, ctx, b, dir, "abc"))
	if err != nil || again != sha {
		t.Fatalf("identical recommit: %v (sha %s vs %s)", err, again, sha)
	}
	other := *m
	other.Files = []commit.File{{Name: m.Files[0].Name, Rows: 3, Bytes: 3, SHA256: commit.Digest([]byte("abd"))}}
	if _, err := commit.Commit(ctx, b, dir, &other); !errors.Is(err, commit.ErrConflict) {
		t.Fatalf("want ErrConflict, got %v", err)
	}
	got, gotSHA, err := commit.Read(ctx, b, dir)
	if err != nil || gotSHA != sha || got.Files[0].SHA256 != m.Files[0].SHA256 {
		t.Fatalf("read back %+v %s %v", got, gotSHA, err)
	}
	if err := commit.Verify(ctx, b, dir, got, true); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyAndReadFileDetectDamage(t *testing.T) {
	ctx := context.Background()
	b := bucket(t)
	dir := layout.RolloutDir("r", 1)
	m := manifest(t, ctx, b, dir, "abc")
	if _, err := commit.Commit(ctx, b, dir, m); err != nil {
		t.Fatal(err)
	}
	key := dir + "/" + m.Files[0].Name
	if err := storage.PutBytes(ctx, b, key, []byte("abd")); err != nil { // same size
		t.Fatal(err)
	}
	if err := commit.Verify(ctx, b, dir, m, false); err != nil {
		t.Fatalf("shallow verify checks sizes only: %v", err)
	}
	if err := commit.Verify(ctx, b, dir, m, true); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("deep verify missed changed bytes: %v", err)
	}
	if _, err := commit.ReadFile(ctx, b, dir, m.Files[0]); err == nil {
		t.Fatal("ReadFile returned damaged bytes")
	}
	if err := storage.PutBytes(ctx, b, key, []byte("abcd")); err != nil {
		t.Fatal(err)
	}
	if err := commit.Verify(ctx, b, dir, m, false); err == nil || !strings.Contains(err.Error(), "4 bytes, manifest says 3") {
		t.Fatalf("size change not reported: %v", err)
	}
}

func TestDecodeRejectsBadManifests(t *testing.T) {
	good := `{"kind":"rollout","schema_version":1,"run":"r","rows":1,"files":[{"name":"a","rows":1,"bytes":1,"sha256":"` + strings.Repeat("ab", 32) + `"}]}`
	if _, err := commit.Decode([]byte(good), "m"); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"unknown field": strings.Replace(good, `"rows":1,"files"`, `"rows":1,"extra":2,"files"`, 1),
		"rows mismatch": strings.Replace(good, `"rows":1,"files"`, `"rows":5,"files"`, 1),
		"bad sha":       strings.Replace(good, strings.Repeat("ab", 32), "xyz", 1),
		"bad run":       strings.Replace(good, `"run":"r"`, `"run":"../x"`, 1),
		"bad key":       strings.Replace(good, `"name":"a"`, `"name":"../a"`, 1),
		"trailing":      good + "{}",
		"trailing ]":    good + "]",
		"trailing }":    good + "}",
		"rows overflow": strings.Replace(strings.Replace(good, `"rows":1,"files"`, `"rows":-9223372036854775807,"files"`, 1),
			`"rows":1,"bytes"`, `"rows":9223372036854775807,"bytes":1,"sha256":"`+strings.Repeat("ab", 32)+`"},{"name":"b","rows":2,"bytes"`, 1),
		"manifest as a file": strings.Replace(good, `"name":"a"`, `"name":"_MANIFEST.json"`, 1),
		"receipt as a file":  strings.Replace(good, `"name":"a"`, `"name":"_receipts/a.json"`, 1),
		"not json":           "PAR1PAR1",
		"empty":              "",
	}
	for name, in := range cases {
		if _, err := commit.Decode([]byte(in), "m.json"); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "m.json") {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
}

// hookBucket runs before once, just before the first Get of key.
type hookBucket struct {
	storage.Bucket
	key    string
	before func()
}

func (h *hookBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == h.key && h.before != nil {
		h.before()
		h.before = nil
	}
	return h.Bucket.Get(ctx, key)
}

// A worker whose Finalize reads the receipts while another worker commits the folder and
// removes them reports the folder committed, not waiting for a part.
func TestFinalizeSeesAConcurrentCommit(t *testing.T) {
	ctx := context.Background()
	b := bucket(t)
	dir := layout.RolloutDir("r", 0)
	it := 0
	newManifest := func() *commit.Manifest {
		return &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it}
	}
	parts := []string{"part-00000-of-00002.parquet", "part-00001-of-00002.parquet"}
	for i, p := range parts {
		f, err := commit.PutFile(ctx, b, dir, p, []byte{byte(i)}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := commit.PutReceipt(ctx, b, dir, commit.Receipt{File: f, Writer: commit.Writer(newManifest())}); err != nil {
			t.Fatal(err)
		}
	}
	var shaA string
	hooked := &hookBucket{Bucket: b, key: path.Join(dir, commit.ReceiptsDir, parts[1]+".json"), before: func() {
		done, sha, err := commit.Finalize(ctx, b, dir, parts, newManifest(), nil)
		if err != nil || !done {
			t.Fatalf("first worker: done %v, %v", done, err)
		}
		shaA = sha
	}}
	done, sha, err := commit.Finalize(ctx, hooked, dir, parts, newManifest(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if shaA == "" {
		t.Fatal("the other worker's Finalize did not run")
	}
	if !done || sha != shaA {
		t.Fatalf("Finalize racing a commit: done %v, sha %q; want true, %q", done, sha, shaA)
	}
	// Without a commit, a missing part still means not done.
	dir2 := layout.RolloutDir("r", 1)
	f, err := commit.PutFile(ctx, b, dir2, parts[0], []byte{0}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit.PutReceipt(ctx, b, dir2, commit.Receipt{File: f, Writer: commit.Writer(newManifest())}); err != nil {
		t.Fatal(err)
	}
	if done, _, err := commit.Finalize(ctx, b, dir2, parts, newManifest(), nil); done || err != nil {
		t.Fatalf("Finalize with a part missing: done %v, %v", done, err)
	}
	if ok, _ := commit.IsCommitted(ctx, b, dir2); ok {
		t.Fatal("a folder with a missing part was committed")
	}
}

// deleteFails fails every Delete of a key under prefix.
type deleteFails struct {
	storage.Bucket
	prefix string
}

func (d *deleteFails) Delete(ctx context.Context, key string) error {
	if strings.HasPrefix(key, d.prefix) {
		return fmt.Errorf("delete %s: %w", key, fs.ErrPermission)
	}
	return d.Bucket.Delete(ctx, key)
}

// A receipt that cannot be removed after the commit does not undo it: Finalize reports the
// folder committed, with a warning (ErrReceiptsLeft) and not a failure, and so does a later
// Finalize that finds the folder committed and the receipts still there.
func TestFinalizeCommitsWhenReceiptsStay(t *testing.T) {
	ctx := context.Background()
	b := bucket(t)
	dir := layout.RolloutDir("r", 0)
	it := 0
	m := &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it}
	parts := []string{"part-00000-of-00001.parquet"}
	f, err := commit.PutFile(ctx, b, dir, parts[0], []byte{1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit.PutReceipt(ctx, b, dir, commit.Receipt{File: f, Writer: commit.Writer(m)}); err != nil {
		t.Fatal(err)
	}
	ro := &deleteFails{Bucket: b, prefix: path.Join(dir, commit.ReceiptsDir) + "/"}
	for attempt := range 2 {
		done, sha, err := commit.Finalize(ctx, ro, dir, parts, m, nil)
		if !done || sha == "" || !errors.Is(err, commit.ErrReceiptsLeft) || !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("attempt %d: Finalize = %v, %q, %v; want committed, with an error matching ErrReceiptsLeft and the store's", attempt, done, sha, err)
		}
		if _, got, rerr := commit.Read(ctx, b, dir); rerr != nil || got != sha {
			t.Fatalf("attempt %d: committed manifest %q, %v; want %q", attempt, got, rerr, sha)
		}
	}
	if err := commit.CleanReceipts(ctx, ro, dir); !errors.Is(err, commit.ErrReceiptsLeft) {
		t.Fatalf("CleanReceipts = %v, want an error matching ErrReceiptsLeft", err)
	}
	// Once the store lets them go, the next Finalize removes them.
	if done, _, err := commit.Finalize(ctx, b, dir, parts, m, nil); !done || err != nil {
		t.Fatalf("Finalize = %v, %v", done, err)
	}
	if _, ok, err := commit.ReadReceipt(ctx, b, dir, parts[0]); ok || err != nil {
		t.Fatalf("receipt still there (%v, %v)", ok, err)
	}
}

// TestCleanReceiptsRemovesTheOthers: one receipt that cannot be removed does not keep the
// others: CleanReceipts removes every receipt it can, and reports the one left behind.
func TestCleanReceiptsRemovesTheOthers(t *testing.T) {
	ctx := context.Background()
	b := bucket(t)
	dir := layout.RolloutDir("r", 0)
	it := 0
	m := &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it}
	parts := []string{"part-00000-of-00003.parquet", "part-00001-of-00003.parquet", "part-00002-of-00003.parquet"}
	for _, p := range parts {
		f, err := commit.PutFile(ctx, b, dir, p, []byte(p), 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := commit.PutReceipt(ctx, b, dir, commit.Receipt{File: f, Writer: commit.Writer(m)}); err != nil {
			t.Fatal(err)
		}
	}
	stuck := path.Join(dir, commit.ReceiptsDir, parts[0]) // the first one listed
	done, _, err := commit.Finalize(ctx, &deleteFails{Bucket: b, prefix: stuck}, dir, parts, m, nil)
	if !done || !errors.Is(err, commit.ErrReceiptsLeft) {
		t.Fatalf("Finalize = %v, %v; want committed with a warning", done, err)
	}
	for i, p := range parts {
		if _, ok, err := commit.ReadReceipt(ctx, b, dir, p); err != nil || ok != (i == 0) {
			t.Errorf("receipt of %s: present %v (%v); want only the undeletable one left", p, ok, err)
		}
	}
}

// TestAnotherWritersCommitIsNotOverwritten: a worker of another config (a pod retried after
// its ConfigMap changed, a second learn with another estimator) that reaches a folder another
// writer committed first neither overwrites its files nor reports the folder as its own.
func TestAnotherWritersCommitIsNotOverwritten(t *testing.T) {
	ctx := context.Background()
	b := bucket(t)
	dir := layout.RolloutDir("r", 0)
	it := 0
	parts := []string{"part-00000-of-00001.parquet"}
	writerOf := func(config string) *commit.Manifest {
		return &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it, ConfigDigest: config}
	}
	f, err := commit.PutFile(ctx, b, dir, parts[0], []byte("config A"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit.PutReceipt(ctx, b, dir, commit.Receipt{File: f, Writer: commit.Writer(writerOf("A"))}); err != nil {
		t.Fatal(err)
	}
	if done, _, err := commit.Finalize(ctx, b, dir, parts, writerOf("A"), nil); !done || err != nil {
		t.Fatalf("writer A: done %v, %v", done, err)
	}
	// B's part, after A's commit: refused, A's bytes kept.
	if _, err := commit.PutFile(ctx, b, dir, parts[0], []byte("config B"), 1); !errors.Is(err, commit.ErrConflict) {
		t.Fatalf("overwriting a committed part with other bytes: %v, want a conflict", err)
	}
	if _, err := commit.PutFile(ctx, b, dir, "extra.parquet", []byte("x"), 1); !errors.Is(err, commit.ErrConflict) {
		t.Fatalf("adding a file to a committed folder: %v, want a conflict", err)
	}
	m, _, err := commit.Read(ctx, b, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit.Verify(ctx, b, dir, m, true); err != nil {
		t.Fatalf("A's folder after B's attempts: %v", err)
	}
	// B's Finalize: a conflict, not "committed" (both workers exited 0 before).
	if done, _, err := commit.Finalize(ctx, b, dir, parts, writerOf("B"), nil); done || !errors.Is(err, commit.ErrConflict) || !strings.Contains(err.Error(), "another config") {
		t.Fatalf("writer B after A committed: done %v, %v", done, err)
	}
	// A's rerun, and a repair of A's file with its listed bytes, are fine.
	if done, _, err := commit.Finalize(ctx, b, dir, parts, writerOf("A"), nil); !done || err != nil {
		t.Fatalf("writer A again: done %v, %v", done, err)
	}
	if _, err := commit.PutFile(ctx, b, dir, parts[0], []byte("config A"), 1); err != nil {
		t.Fatalf("rewriting a committed file with its own bytes: %v", err)
	}
}
