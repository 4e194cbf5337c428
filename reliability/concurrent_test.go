package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
)

// storeUnderTest is a store both the binary (through --store and the environment) and the
// test (through a Bucket) can reach.
type storeUnderTest struct {
	name string
	url  string
	env  []string
	open func(t testing.TB) storage.Bucket
}

func folderStore(t *testing.T) storeUnderTest {
	dir := t.TempDir()
	return storeUnderTest{name: "folder", url: dir, open: func(t testing.TB) storage.Bucket { return openDir(t, dir) }}
}

func minioStore(t *testing.T, srv *miniotest.Server) storeUnderTest {
	bucket := srv.NewBucket(t)
	url := "s3://" + bucket + "/shared"
	return storeUnderTest{
		name: "minio", url: url,
		env: []string{"AWS_ENDPOINT_URL=http://" + srv.Endpoint, "AWS_ACCESS_KEY_ID=" + srv.AccessKey,
			"AWS_SECRET_ACCESS_KEY=" + srv.SecretKey, "AWS_REGION=us-east-1"},
		open: func(t testing.TB) storage.Bucket { return openS3(t, url, s3config(srv.Endpoint, srv)) },
	}
}

// TestConcurrentStageProcesses runs every stage twice at once, as two processes on the same
// store, on the folder store and on MinIO. Each process must either succeed (it won, or it
// found identical committed content) or report a conflict; afterwards every committed folder
// verifies and the committed bytes equal a run without contention.
func TestConcurrentStageProcesses(t *testing.T) {
	t.Parallel()
	want := inspect(t, openDir(t, prepare(t, "learn")), "runs/")
	srv := miniotest.Start(t)
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for _, mk := range []func(*testing.T) storeUnderTest{folderStore, func(t *testing.T) storeUnderTest { return minioStore(t, srv) }} {
		for round := 0; round < rounds; round++ {
			st := mk(t)
			t.Run(fmt.Sprintf("%s/%d", st.name, round), func(t *testing.T) {
				for _, s := range sequence {
					outs := make([]string, 2)
					errs := make([]error, 2)
					var wg sync.WaitGroup
					start := make(chan struct{})
					for i := range 2 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							cmd := drmas(t, st.url, s.args...)
							cmd.Env = append(cmd.Env, st.env...)
							<-start
							out, err := cmd.CombinedOutput()
							outs[i], errs[i] = string(out), err
						}()
					}
					close(start)
					wg.Wait()
					ok := 0
					for i := range 2 {
						switch {
						case errs[i] == nil:
							ok++
						case strings.Contains(outs[i], commit.ErrConflict.Error()):
							t.Logf("%s process %d reported a conflict: %s", s.name, i, strings.TrimSpace(outs[i]))
						default:
							t.Fatalf("%s process %d failed without a conflict: %v\n%s", s.name, i, errs[i], outs[i])
						}
					}
					if ok == 0 {
						t.Fatalf("%s: neither process succeeded:\n%s\n%s", s.name, outs[0], outs[1])
					}
					inspect(t, st.open(t), "runs/") // nothing torn between stages
				}
				got := inspect(t, st.open(t), "runs/")
				if d := diff(got.Committed, want.Committed); d != "" {
					t.Fatalf("committed outputs differ from a run without contention:\n%s", d)
				}
			})
		}
	}
}

// TestRacingCommits races two commit.Commit calls of different manifests on the same folder,
// each through its own Bucket value, many times, on the folder store and on MinIO: at most one
// wins, a loser gets commit.ErrConflict, and the folder is either the winner's, verifying deep,
// or not committed (withdrawn: one's upload landed on the other's commit). Two
// commits of the same manifest both succeed. Concurrent Puts of one key with different bytes
// leave one complete version, never a mix.
func TestRacingCommits(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	dir := t.TempDir()
	stores := map[string]func(t testing.TB) storage.Bucket{
		"folder": func(t testing.TB) storage.Bucket { return openDir(t, dir) },
		"minio": func(t testing.TB) storage.Bucket {
			return openS3(t, "s3://"+bucket+"/race", s3store.Config{
				Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, PathStyle: true, MaxRetries: 3,
			})
		},
	}
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for _, name := range []string{"folder", "minio"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			bs := []storage.Bucket{stores[name](t), stores[name](t)}
			manifest := func(i, round int, data []byte) *commit.Manifest {
				iter := round
				return &commit.Manifest{Kind: "rollout", SchemaVersion: 1, Run: run, Iteration: &iter, Rows: 1,
					Files:  []commit.File{{Name: "part.parquet", Rows: 1, Bytes: int64(len(data)), SHA256: commit.Digest(data)}},
					Params: map[string]string{"writer": fmt.Sprint(i)}}
			}
			wins, withdrawn := [2]int{}, 0
			for round := 0; round < rounds; round++ {
				d := fmt.Sprintf("runs/%s/race/round=%03d", run, round)
				// Different manifests.
				shas := make([]string, 2)
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for i := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						data := []byte(fmt.Sprintf("writer %d round %d", i, round))
						if _, err := commit.PutFile(ctx, bs[i], d, "part.parquet", data, 1); err != nil {
							errs[i] = err
							return
						}
						shas[i], errs[i] = commit.Commit(ctx, bs[i], d, manifest(i, round, data))
					}()
				}
				wg.Wait()
				winner := -1
				for i := range 2 {
					switch {
					case errs[i] == nil:
						if winner >= 0 {
							t.Fatalf("round %d: both different manifests committed", round)
						}
						winner = i
					case errors.Is(errs[i], commit.ErrConflict):
					default:
						t.Fatalf("round %d writer %d: %v", round, i, errs[i])
					}
				}
				// The folder is the winner's, whole, or not committed at all: an upload of
				// the loser that landed on the winner's part withdrew the winner's commit
				// (after its Commit returned, if need be), and a writer said so.
				m, msha, err := commit.Read(ctx, bs[0], d)
				switch {
				case errors.Is(err, commit.ErrNotCommitted):
					if winner >= 0 && !errors.Is(errs[1-winner], commit.ErrWithdrawn) {
						t.Fatalf("round %d: writer %d's commit is gone and nobody said it was withdrawn: %v", round, winner, errs)
					}
					withdrawn++
				case err != nil:
					t.Fatal(err)
				case winner < 0:
					t.Fatalf("round %d: committed, but both writers failed: %v", round, errs)
				case msha != shas[winner] || m.Params["writer"] != fmt.Sprint(winner):
					t.Fatalf("round %d: committed manifest is not the winner's", round)
				default:
					if err := commit.Verify(ctx, bs[1], d, m, true); err != nil {
						t.Fatalf("round %d: committed, but not with the bytes it lists: %v", round, err)
					}
					wins[winner]++
				}
				data, err := storage.ReadAll(ctx, bs[1], d+"/part.parquet")
				if storage.IsNotFound(err) && m == nil {
					// withdrawn, and the upload that withdrew it removed itself
				} else if err != nil {
					t.Fatal(err)
				} else if s := string(data); s != fmt.Sprintf("writer 0 round %d", round) && s != fmt.Sprintf("writer 1 round %d", round) {
					t.Fatalf("round %d: torn part %q", round, s)
				}

				// Identical manifests: both succeed.
				same := d + "/same"
				data0 := []byte("same bytes")
				for i := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := commit.PutFile(ctx, bs[i], same, "part.parquet", data0, 1); err != nil {
							errs[i] = err
							return
						}
						_, errs[i] = commit.Commit(ctx, bs[i], same, manifest(0, round, data0))
					}()
				}
				wg.Wait()
				if errs[0] != nil || errs[1] != nil {
					t.Fatalf("round %d: identical commits: %v", round, errs)
				}
				mm, _, err := commit.Read(ctx, bs[0], same)
				if err != nil {
					t.Fatal(err)
				}
				if err := commit.Verify(ctx, bs[1], same, mm, true); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%d rounds: writer 0 won %d, writer 1 won %d, %d withdrawn; every loser got ErrConflict", rounds, wins[0], wins[1], withdrawn)
		})
	}
}
