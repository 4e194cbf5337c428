package normalize

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/storage/filestore"
)

// BenchmarkPartStages times the steps of one part of a dataset made by bench/normalize
// (DRMAS_BENCH_STORE names its root; skipped without it).
func BenchmarkPartStages(b *testing.B) {
	root := os.Getenv("DRMAS_BENCH_STORE")
	if root == "" {
		b.Skip("DRMAS_BENCH_STORE not set")
	}
	ctx := context.Background()
	bk, err := filestore.New(root)
	if err != nil {
		b.Fatal(err)
	}
	env := testEnv(b, root)
	env.Bucket = bk
	dir := layout.RolloutDir("bench", 1)
	m, _, err := commit.Read(ctx, bk, dir)
	if err != nil {
		b.Fatal(err)
	}
	f := m.Files[0]
	specs, _ := ParseSpecs([]string{"drmas"}, 0)
	sl := &slot{}
	cols, keys, err := readPart(ctx, env, dir, f, sl)
	if err != nil {
		b.Fatal(err)
	}
	out := []*estimators.Result{{}}
	if err := estimators.ComputeMany(ctx, specs, cols, out); err != nil {
		b.Fatal(err)
	}
	rows := float64(keys.Len())
	b.Run("read", func(b *testing.B) {
		sl2 := &slot{}
		cpu0 := cpuNow()
		for i := 0; i < b.N; i++ {
			if _, _, err := readPart(ctx, env, dir, f, sl2); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
		b.ReportMetric((cpuNow()-cpu0)/float64(b.N), "cpu-ms/op")
	})
	b.Run("compute", func(b *testing.B) {
		cpu0 := cpuNow()
		for i := 0; i < b.N; i++ {
			if err := estimators.ComputeMany(ctx, specs, cols, out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
		b.ReportMetric((cpuNow()-cpu0)/float64(b.N), "cpu-ms/op")
	})
	b.Run("diagnose", func(b *testing.B) {
		cpu0 := cpuNow()
		for i := 0; i < b.N; i++ {
			if _, err := estimators.Diagnose(cols); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
		b.ReportMetric((cpuNow()-cpu0)/float64(b.N), "cpu-ms/op")
	})
	var enc sidecarEncoder
	var size int
	b.Run("encode", func(b *testing.B) {
		cpu0 := cpuNow()
		for i := 0; i < b.N; i++ {
			data, err := enc.encode(keys, out[0], true)
			if err != nil {
				b.Fatal(err)
			}
			size = len(data)
		}
		b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
		b.ReportMetric((cpuNow()-cpu0)/float64(b.N), "cpu-ms/op")
		b.ReportMetric(float64(size)/rows, "B/row")
	})
}

// cpuNow is this process's user + system CPU time in ms.
func cpuNow() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}
