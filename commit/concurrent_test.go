package commit_test

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
	"github.com/drmas-dev/drmas/storage/storetest"
)

// backends are the stores the interleavings run on: their ETags differ (the folder names the
// file written, S3 hashes the bytes), and the checks must hold for both. MinIO runs for the
// whole of t.
func backends(t *testing.T) map[string]func(t *testing.T) storage.Bucket {
	srv := miniotest.Start(t)
	return map[string]func(t *testing.T) storage.Bucket{
		"folder": bucket,
		"minio": func(t *testing.T) storage.Bucket {
			b, err := s3store.New(context.Background(), s3store.Config{Endpoint: srv.Endpoint, Bucket: srv.NewBucket(t),
				AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, MaxRetries: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
	}
}

// TestConcurrentWritersNeverLeaveADamagedCommit places the upload of a writer with other bytes
// (writer B) at each point of writer A's PutFile and Commit, and checks that the folder ends up
// either committed with the bytes it lists or not committed, and that the writer whose output is
// not committed gets a conflict. Before these checks, A's commit listed A's bytes over B's file.
func TestConcurrentWritersNeverLeaveADamagedCommit(t *testing.T) {
	const name = "part-00000-of-00001.parquet"
	dir := layout.RolloutDir("r", 0)
	key := path.Join(dir, name)
	it := 0
	manifestOf := func(f commit.File) *commit.Manifest {
		return &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it, Rows: 1, Files: []commit.File{f}}
	}
	a, bb := []byte("writer A's part"), []byte("writer B's part") // the same size: only the sha256 tells them apart
	// settled checks the folder: committed with the bytes it lists, or not committed.
	settled := func(t *testing.T, ctx context.Context, b storage.Bucket) (committed bool) {
		t.Helper()
		m, _, err := commit.Read(ctx, b, dir)
		if errors.Is(err, commit.ErrNotCommitted) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := commit.Verify(ctx, b, dir, m, true); err != nil {
			t.Fatalf("the folder is committed but damaged: %v", err)
		}
		return true
	}
	for bname, open := range backends(t) {
		t.Run(bname, func(t *testing.T) {
			ctx := context.Background()
			t.Run("B uploads after A's commit, having checked before it", func(t *testing.T) {
				b := open(t)
				fa, err := commit.PutFile(ctx, b, dir, name, a, 1)
				if err != nil {
					t.Fatal(err)
				}
				// B's check finds the folder uncommitted; A commits; then B's bytes land.
				h := &storetest.PutHook{Bucket: b, Prefix: key, Before: func() {
					if _, err := commit.Commit(ctx, b, dir, manifestOf(fa)); err != nil {
						t.Fatalf("A's commit: %v", err)
					}
				}}
				_, err = commit.PutFile(ctx, h, dir, name, bb, 1)
				if !errors.Is(err, commit.ErrConflict) || !errors.Is(err, commit.ErrWithdrawn) {
					t.Fatalf("B's PutFile: %v, want a conflict saying A's commit is withdrawn", err)
				}
				if ce := (*commit.ConflictError)(nil); !errors.As(err, &ce) || ce.Dir != dir || ce.File != name || ce.State != commit.Uncommitted || !ce.Withdrawn {
					t.Fatalf("B's PutFile: %+v, want a withdrawn *commit.ConflictError naming %s and %s", ce, dir, name)
				}
				if settled(t, ctx, b) {
					t.Fatal("A's commit stayed over B's bytes")
				}
				// A's rerun redoes the folder.
				if fa, err = commit.PutFile(ctx, b, dir, name, a, 1); err != nil {
					t.Fatal(err)
				}
				if _, err := commit.Commit(ctx, b, dir, manifestOf(fa)); err != nil || !settled(t, ctx, b) {
					t.Fatalf("A's rerun: %v", err)
				}
			})
			t.Run("B uploads before A's commit", func(t *testing.T) {
				b := open(t)
				fa, err := commit.PutFile(ctx, b, dir, name, a, 1)
				if err != nil {
					t.Fatal(err)
				}
				fb, err := commit.PutFile(ctx, b, dir, name, bb, 1)
				if err != nil {
					t.Fatal(err)
				}
				_, err = commit.Commit(ctx, b, dir, manifestOf(fa))
				if !errors.Is(err, commit.ErrConflict) || errors.Is(err, commit.ErrWithdrawn) || !strings.Contains(err.Error(), "not committed") {
					t.Fatalf("A's commit over B's bytes: %v, want a conflict", err)
				}
				if settled(t, ctx, b) {
					t.Fatal("A committed B's bytes")
				}
				if _, err := commit.Commit(ctx, b, dir, manifestOf(fb)); err != nil || !settled(t, ctx, b) {
					t.Fatalf("B's commit: %v", err)
				}
			})
			t.Run("B uploads right after A's manifest, having checked before it", func(t *testing.T) {
				b := open(t)
				fa, err := commit.PutFile(ctx, b, dir, name, a, 1)
				if err != nil {
					t.Fatal(err)
				}
				h := &storetest.PutHook{Bucket: b, Prefix: path.Join(dir, commit.ManifestName), After: func() {
					if err := storage.PutBytes(ctx, b, key, bb); err != nil {
						t.Fatal(err)
					}
				}}
				_, err = commit.Commit(ctx, h, dir, manifestOf(fa))
				if !errors.Is(err, commit.ErrConflict) || !errors.Is(err, commit.ErrWithdrawn) {
					t.Fatalf("A's commit, B's bytes landing after it: %v, want a conflict saying it is withdrawn", err)
				}
				if settled(t, ctx, b) {
					t.Fatal("A's commit stayed over B's bytes")
				}
			})
			t.Run("B commits a folder without A's file", func(t *testing.T) {
				b := open(t)
				fb, err := commit.PutFile(ctx, b, dir, "other.parquet", bb, 1)
				if err != nil {
					t.Fatal(err)
				}
				h := &storetest.PutHook{Bucket: b, Prefix: key, Before: func() {
					if _, err := commit.Commit(ctx, b, dir, manifestOf(fb)); err != nil {
						t.Fatalf("B's commit: %v", err)
					}
				}}
				if _, err := commit.PutFile(ctx, h, dir, name, a, 1); !errors.Is(err, commit.ErrConflict) {
					t.Fatalf("A's PutFile into B's folder: %v, want a conflict", err)
				}
				if !settled(t, ctx, b) {
					t.Fatal("B's commit was withdrawn, though A replaced none of its files")
				}
				if _, err := b.Stat(ctx, key); !storage.IsNotFound(err) {
					t.Fatalf("A's stray upload is left in B's folder: %v", err)
				}
			})
			t.Run("a writer of the same bytes rewrites the file around the commit", func(t *testing.T) {
				b := open(t)
				fa, err := commit.PutFile(ctx, b, dir, name, a, 1)
				if err != nil {
					t.Fatal(err)
				}
				var twin commit.File
				h := &storetest.PutHook{Bucket: b, Prefix: path.Join(dir, commit.ManifestName), Before: func() {
					if twin, err = commit.PutFile(ctx, b, dir, name, a, 1); err != nil {
						t.Fatal(err)
					}
				}, After: func() {
					if _, err := commit.PutFile(ctx, b, dir, name, a, 1); err != nil {
						t.Fatal(err)
					}
				}}
				if _, err := commit.Commit(ctx, h, dir, manifestOf(fa)); err != nil {
					t.Fatalf("A's commit with its twin writing the same bytes: %v", err)
				}
				if _, err := commit.Commit(ctx, b, dir, manifestOf(twin)); err != nil {
					t.Fatalf("the twin's commit: %v", err)
				}
				if !settled(t, ctx, b) {
					t.Fatal("not committed")
				}
			})
		})
	}
}

// TestCommitConfirmsOwnUploadsWithoutReading checks that Commit reads back only files whose
// upload this process did not record (the checks must not double a stage's I/O), and that a
// receipt carries the ETag to the worker that finalizes.
func TestCommitConfirmsOwnUploadsWithoutReading(t *testing.T) {
	ctx := context.Background()
	m := storage.WithMetrics(bucket(t))
	dir := layout.RolloutDir("r", 1)
	it := 1
	parts := []string{"part-00000-of-00002.parquet", "part-00001-of-00002.parquet"}
	writer := &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &it}
	for i, p := range parts {
		f, err := commit.PutFile(ctx, m, dir, p, []byte(strings.Repeat("x", 100+i)), 1)
		if err != nil {
			t.Fatal(err)
		}
		if f.ETag == "" {
			t.Fatal("PutFile recorded no ETag")
		}
		if err := commit.PutReceipt(ctx, m, dir, commit.Receipt{File: f, Writer: commit.Writer(writer)}); err != nil {
			t.Fatal(err)
		}
		r, ok, err := commit.ReadReceipt(ctx, m, dir, p)
		if err != nil || !ok || r.File.ETag != f.ETag {
			t.Fatalf("receipt of %s: %v %v, ETag %q, want %q", p, ok, err, r.File.ETag, f.ETag)
		}
	}
	before := m.Snapshot()
	if done, _, err := commit.Finalize(ctx, m, dir, parts, writer, nil); !done || err != nil {
		t.Fatalf("finalize: %v %v", done, err)
	}
	after := m.Snapshot()
	// Finalize reads the manifest (a miss) and the two receipts; Commit reads nothing.
	if gets := after.Gets - before.Gets; gets != 3 {
		t.Errorf("finalize and commit made %d Gets, want 3 (the parts were read back)", gets)
	}
	// A manifest built by hand (no ETags): Commit reads each file once.
	dir2 := layout.RolloutDir("r", 2)
	f, err := commit.PutFile(ctx, m, dir2, parts[0], []byte("y"), 1)
	if err != nil {
		t.Fatal(err)
	}
	f.ETag = ""
	two := 2
	before = m.Snapshot()
	if _, err := commit.Commit(ctx, m, dir2, &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: "r", Iteration: &two, Rows: 1, Files: []commit.File{f}}); err != nil {
		t.Fatal(err)
	}
	if gets := m.Snapshot().Gets - before.Gets; gets != 1 {
		t.Errorf("commit of a file without an ETag made %d Gets, want 1", gets)
	}
}
