package commit_test

import (
	"context"
	"errors"
	"io"
	"path"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/storetest"
)

// TestCommitAfterWithdrawnRivalIsNotASuccess: B's only-if-absent manifest put finds A's
// manifest, which A withdraws (its file was replaced by B's bytes) before B reads it back.
// B's Commit must not report success for a folder with no manifest.
func TestCommitAfterWithdrawnRivalIsNotASuccess(t *testing.T) {
	const name = "part-00000-of-00001.parquet"
	dir := layout.RolloutDir("r", 0)
	mkey := path.Join(dir, commit.ManifestName)
	it := 0
	manifestOf := func(f commit.File) *commit.Manifest {
		return &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it, Rows: 1, Files: []commit.File{f}}
	}
	for bname, open := range backends(t) {
		t.Run(bname, func(t *testing.T) {
			ctx := context.Background()
			b := open(t)
			fa, err := commit.PutFile(ctx, b, dir, name, []byte("writer A's part"), 1)
			if err != nil {
				t.Fatal(err)
			}
			var fb commit.File
			aCommitted, bPutFailed, aDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			ha := &storetest.PutHook{Bucket: b, Prefix: mkey,
				// B's upload lands after A's check of its files, its re-read of the manifest
				// before A's manifest.
				Before: func() {
					if fb, err = commit.PutFile(ctx, b, dir, name, []byte("writer B's part"), 1); err != nil {
						t.Error(err)
					}
				},
				After: func() { close(aCommitted); <-bPutFailed },
			}
			var aerr error
			go func() { _, aerr = commit.Commit(ctx, ha, dir, manifestOf(fa)); close(aDone) }()
			<-aCommitted
			hb := &storetest.PutHook{Bucket: b, Prefix: mkey, After: func() { close(bPutFailed); <-aDone }}
			_, berr := commit.Commit(ctx, hb, dir, manifestOf(fb))
			t.Logf("A: %v", aerr)
			t.Logf("B: %v", berr)
			ok, err := commit.IsCommitted(ctx, b, dir)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(aerr, commit.ErrWithdrawn) {
				t.Fatalf("A: %v, want its commit withdrawn (the interleaving did not happen)", aerr)
			}
			if berr == nil && !ok {
				t.Fatal("B's Commit returned success, but the folder is not committed")
			}
			if berr != nil || !ok {
				t.Fatalf("B: %v, committed %v: B's put met A's withdrawn manifest and must put again", berr, ok)
			}
			m, _, err := commit.Read(ctx, b, dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := commit.Verify(ctx, b, dir, m, true); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// failStat fails the Stat of key once.
type failStat struct {
	storage.Bucket
	key  string
	done bool
}

func (f *failStat) Stat(ctx context.Context, key string) (storage.Attributes, error) {
	if key == f.key && !f.done {
		f.done = true
		return storage.Attributes{}, errors.New("injected: connection reset")
	}
	return f.Bucket.Stat(ctx, key)
}

// TestPutFileStatFailureAfterReplacingACommittedFile: B's upload lands on A's commit (B checked
// before it); B's Stat of its upload fails. The folder is left committed over B's bytes, and
// B's error must not say its file was "not overwritten".
func TestPutFileStatFailureAfterReplacingACommittedFile(t *testing.T) {
	const name = "part-00000-of-00001.parquet"
	dir := layout.RolloutDir("r", 0)
	key := path.Join(dir, name)
	it := 0
	ctx := context.Background()
	b := bucket(t)
	fa, err := commit.PutFile(ctx, b, dir, name, []byte("writer A's part"), 1)
	if err != nil {
		t.Fatal(err)
	}
	h := &storetest.PutHook{Bucket: &failStat{Bucket: b, key: key}, Prefix: key, Before: func() {
		if _, err := commit.Commit(ctx, b, dir, &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it, Rows: 1, Files: []commit.File{fa}}); err != nil {
			t.Fatal(err)
		}
	}}
	_, err = commit.PutFile(ctx, h, dir, name, []byte("writer B's part"), 1)
	t.Logf("B: %v", err)
	m, _, rerr := commit.Read(ctx, b, dir)
	if rerr != nil {
		t.Fatalf("A's commit is gone (%v): the interleaving did not happen", rerr)
	}
	verr := commit.Verify(ctx, b, dir, m, true)
	if verr == nil {
		t.Fatal("A's folder verifies: B's upload did not land on it (the interleaving did not happen)")
	}
	t.Logf("folder committed and damaged: %v", verr)
	if err == nil || !strings.Contains(err.Error(), "may have replaced") {
		t.Errorf("and B's error does not say its upload may have replaced the file: %v", err)
	}
}

// getHook runs Before once, before the first Get of key.
type getHook struct {
	storage.Bucket
	key    string
	Before func()
}

func (g *getHook) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if f := g.Before; key == g.key && f != nil {
		g.Before = nil
		f()
	}
	return g.Bucket.Get(ctx, key)
}

// TestCommitWhoseFileIsRemovedWhileCheckedIsWithdrawn: right after A's manifest, B's upload
// replaces A's part; A's check after the commit sees another ETag and reads the part back, but
// before it does, B (whose own check found its upload under A's commit) withdraws A's commit and
// removes its upload. A must report the withdrawal (ErrWithdrawn), not a store error about a
// missing object, and the folder must be uncommitted. (Seen in CI as "check the files after
// the commit: ... object not found".)
func TestCommitWhoseFileIsRemovedWhileCheckedIsWithdrawn(t *testing.T) {
	const name = "part-00000-of-00001.parquet"
	dir := layout.RolloutDir("r", 0)
	key, mkey := path.Join(dir, name), path.Join(dir, commit.ManifestName)
	it := 0
	for bname, open := range backends(t) {
		t.Run(bname, func(t *testing.T) {
			ctx := context.Background()
			b := open(t)
			fa, err := commit.PutFile(ctx, b, dir, name, []byte("writer A's part"), 1)
			if err != nil {
				t.Fatal(err)
			}
			gets := 0
			g := &getHook{Bucket: b, key: key, Before: func() {
				gets++
				// B's steps after its upload: it finds A's commit over its bytes.
				_, sha, err := commit.Read(ctx, b, dir)
				if err != nil {
					t.Error(err)
					return
				}
				if err := commit.Withdraw(ctx, b, dir, sha); err != nil {
					t.Error(err)
				}
				if err := b.Delete(ctx, key); err != nil {
					t.Error(err)
				}
			}}
			h := &storetest.PutHook{Bucket: g, Prefix: mkey, After: func() {
				// B's upload, of as many bytes, lands right after A's manifest.
				if err := storage.PutBytes(ctx, b, key, []byte("writer B's part")); err != nil {
					t.Error(err)
				}
			}}
			_, err = commit.Commit(ctx, h, dir, &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it, Rows: 1, Files: []commit.File{fa}})
			t.Logf("A: %v", err)
			if gets != 1 {
				t.Fatalf("A's check read the part %d times, want 1 (the interleaving did not happen)", gets)
			}
			if !errors.Is(err, commit.ErrWithdrawn) || !errors.Is(err, commit.ErrConflict) {
				t.Fatalf("A's Commit: %v, want an error matching ErrWithdrawn and ErrConflict", err)
			}
			if ce := (*commit.ConflictError)(nil); !errors.As(err, &ce) || ce.Dir != dir || ce.State != commit.Uncommitted || !ce.Withdrawn {
				t.Fatalf("A's Commit: %+v, want a withdrawn *commit.ConflictError leaving %s uncommitted", ce, dir)
			}
			if ok, err := commit.IsCommitted(ctx, b, dir); err != nil || ok {
				t.Fatalf("folder committed %v (%v), want uncommitted", ok, err)
			}
		})
	}
}
