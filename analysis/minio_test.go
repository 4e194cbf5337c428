package analysis_test

import (
	"context"
	"math"
	"testing"

	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/pipeline"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/storage/client"
	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
)

// TestRewardPerAgentOnMinIOAndLocal runs the same small job on a real MinIO and on the local
// folder, and checks that analyze answers the reward-per-agent query identically from both
// (through the download cache: DuckDB never reads s3:// itself).
func TestRewardPerAgentOnMinIOAndLocal(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	s3b, err := client.Open(ctx, "s3://"+bucket+"/exp", s3store.Config{
		Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, PathStyle: true, MaxRetries: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s3b.Close()
	localDir, cfg := analysistest.Source(t)
	localB, err := client.Open(ctx, localDir, s3store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer localB.Close()
	if _, err := pipeline.Run(ctx, &stages.Env{Bucket: s3b, Config: cfg}, pipeline.Options{Iterations: analysistest.Iterations, EvalEvery: 1}); err != nil {
		t.Fatal(err)
	}
	const q = `SELECT iteration, agent, count(*) AS n, avg(score) AS mean FROM rollouts GROUP BY ALL ORDER BY ALL`
	var results []*analysis.Table
	for _, b := range []storage.Bucket{s3b, localB} {
		s, err := analysis.Open(ctx, analysis.Options{Bucket: b, Run: cfg.Run, CacheDir: t.TempDir(), Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := s.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		results = append(results, tb)
	}
	s3t, lt := results[0], results[1]
	if len(s3t.Rows) == 0 || len(s3t.Rows) != len(lt.Rows) {
		t.Fatalf("MinIO run: %d rows, local run: %d rows", len(s3t.Rows), len(lt.Rows))
	}
	for i := range s3t.Rows {
		if s3t.String(i, "agent") != lt.String(i, "agent") || s3t.Float(i, "n") != lt.Float(i, "n") ||
			math.Abs(s3t.Float(i, "mean")-lt.Float(i, "mean")) > 1e-12 {
			t.Fatalf("row %d: MinIO %v, local %v", i, s3t.Rows[i], lt.Rows[i])
		}
	}
}
