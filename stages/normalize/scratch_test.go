package normalize

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
	"syscall"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/drmas-dev/drmas/kernels"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
)

type advDelta struct {
	RowID        int64   `parquet:"row_id,delta"`
	UID          string  `parquet:"uid,dict"`
	Agent        string  `parquet:"agent,dict"`
	Advantage    float32 `parquet:"advantage"`
	BaselineMean float64 `parquet:"baseline_mean"`
	BaselineStd  float64 `parquet:"baseline_std"`
	GroupSize    int32   `parquet:"group_size"`
}
type advDict struct {
	RowID        int64   `parquet:"row_id,delta"`
	UID          string  `parquet:"uid,dict"`
	Agent        string  `parquet:"agent,dict"`
	Advantage    float32 `parquet:"advantage"`
	BaselineMean float64 `parquet:"baseline_mean,dict"`
	BaselineStd  float64 `parquet:"baseline_std,dict"`
	GroupSize    int32   `parquet:"group_size,dict"`
}

type advE1 struct {
	RowID        int64   `parquet:"row_id,delta"`
	UID          string  `parquet:"uid,delta"`
	Agent        string  `parquet:"agent,dict"`
	Advantage    float32 `parquet:"advantage"`
	BaselineMean float64 `parquet:"baseline_mean"`
	BaselineStd  float64 `parquet:"baseline_std"`
	GroupSize    int32   `parquet:"group_size,delta"`
}
type advE2 struct {
	RowID        int64   `parquet:"row_id,delta"`
	UID          string  `parquet:"uid,delta"`
	Agent        string  `parquet:"agent,dict"`
	Advantage    float32 `parquet:"advantage"`
	BaselineMean float64 `parquet:"baseline_mean,dict"`
	BaselineStd  float64 `parquet:"baseline_std,dict"`
	GroupSize    int32   `parquet:"group_size,delta"`
}

func opts(level zstd.Level) []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(&zstd.Codec{Level: level}),
		parquet.CreatedBy("drmas", "1", "none"),
		parquet.MaxRowsPerRowGroup(shards.RowGroupRows),
		parquet.PageBufferSize(1 << 20),
	}
}

func write[T any](rows []T, o []parquet.WriterOption) []byte {
	var buf bytes.Buffer
	pw := parquet.NewGenericWriter[T](&buf, o...)
	for off := 0; off < len(rows); off += shards.RowGroupRows {
		end := min(off+shards.RowGroupRows, len(rows))
		pw.Write(rows[off:end])
		pw.Flush()
	}
	pw.Close()
	return buf.Bytes()
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkScratchSidecar(b *testing.B) {
	rows := shardtest.Rows(shardtest.Options{Seed: 1, Groups: 1250000 / 36, Samples: 8, Agents: []string{"router", "searcher", "answerer"}, DropAgent: true, Tokens: 1})
	var buf bytes.Buffer
	shards.WriteTrajectories(&buf, 0, rows)
	f, _ := shards.OpenParquet(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "p")
	keys, err := shards.ReadKeys(context.Background(), f, "p")
	if err != nil {
		b.Fatal(err)
	}
	cols := ColumnsOf(keys)
	res := &kernels.Result{}
	sp, _ := kernels.ParseSpec("drmas")
	kernels.Compute(context.Background(), sp, cols, res)
	n := keys.Len()
	b.Logf("%d rows", n)
	ar := make([]shards.AdvantageRow, n)
	for i := range ar {
		ar[i] = shards.AdvantageRow{RowID: keys.RowID[i], UID: keys.UIDs[keys.Group[i]], Agent: keys.Agents[keys.Agent[i]], Advantage: res.Advantage[i], BaselineMean: res.BaselineMean[i], BaselineStd: res.BaselineStd[i], GroupSize: res.GroupSize[i]}
	}
	dr := make([]advDelta, n)
	dc := make([]advDict, n)
	e1 := make([]advE1, n)
	e2 := make([]advE2, n)
	for i, r := range ar {
		dr[i] = advDelta(r)
		dc[i] = advDict(r)
		e1[i] = advE1(r)
		e2[i] = advE2(r)
	}
	bench := func(name string, f func() []byte) {
		b.Run(name, func(b *testing.B) {
			var out []byte
			c0 := cpuNow()
			for b.Loop() {
				out = f()
			}
			b.ReportMetric(float64(len(out)), "bytes")
			b.ReportMetric(float64(cpuNow()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
	o := opts(zstd.SpeedDefault)
	nob := append(opts(zstd.SpeedDefault), parquet.SkipPageBounds("row_id"), parquet.SkipPageBounds("uid"), parquet.SkipPageBounds("agent"), parquet.SkipPageBounds("advantage"), parquet.SkipPageBounds("baseline_mean"), parquet.SkipPageBounds("baseline_std"), parquet.SkipPageBounds("group_size"))
	bench("E1", func() []byte { return write(e1, o) })
	bench("E2", func() []byte { return write(e2, o) })
	bench("E1-nobounds", func() []byte { return write(e1, nob) })
	bench("E2-nobounds", func() []byte { return write(e2, nob) })
	bench("E1-uncomp", func() []byte { return write(e1, append(opts(zstd.SpeedDefault), parquet.Compression(&parquet.Uncompressed))) })
	for _, lv := range []zstd.Level{zstd.SpeedDefault} {
		b.Run(fmt.Sprintf("readkeys"), func(b *testing.B) {
			c0 := cpuNow()
			for b.Loop() {
				shards.ReadKeys(context.Background(), f, "p")
			}
			b.ReportMetric(float64(cpuNow()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
		b.Run(fmt.Sprintf("compute"), func(b *testing.B) {
			c0 := cpuNow()
			for b.Loop() {
				kernels.Compute(context.Background(), sp, cols, res)
			}
			b.ReportMetric(float64(cpuNow()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
		b.Run(fmt.Sprintf("plain-%d", lv), func(b *testing.B) {
			var out []byte
			c0 := cpuNow()
			for b.Loop() {
				out = write(ar, opts(lv))
			}
			b.ReportMetric(float64(len(out)), "bytes")
			b.ReportMetric(float64(cpuNow()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
		b.Run(fmt.Sprintf("delta-%d", lv), func(b *testing.B) {
			var out []byte
			c0 := cpuNow()
			for b.Loop() {
				out = write(dr, opts(lv))
			}
			b.ReportMetric(float64(len(out)), "bytes")
			b.ReportMetric(float64(cpuNow()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
		b.Run(fmt.Sprintf("dict-%d", lv), func(b *testing.B) {
			var out []byte
			c0 := cpuNow()
			for b.Loop() {
				out = write(dc, opts(lv))
			}
			b.ReportMetric(float64(len(out)), "bytes")
			b.ReportMetric(float64(cpuNow()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
}
