package shards_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
)

// allocBudget is how much a reader may allocate for an input of n bytes: a fixed overhead
// plus a generous factor of the input, never what a lying footer asks for.
func allocBudget(n int) uint64 { return 64<<20 + 1000*uint64(n) }

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// checkAlloc fails if more than allocBudget(n) bytes were allocated since before.
func checkAlloc(t *testing.T, what string, before uint64, n int) {
	t.Helper()
	if got := totalAlloc() - before; got > allocBudget(n) {
		t.Fatalf("%s allocated %d MiB for %d input bytes (budget %d MiB)", what, got>>20, n, allocBudget(n)>>20)
	}
}

// footerEdit rewrites the Thrift footer of a valid Parquet file.
func footerEdit(t testing.TB, file []byte, edit func(*format.FileMetaData)) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(file[len(file)-8:]))
	start := len(file) - 8 - n
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), file[start:len(file)-8], &md); err != nil {
		t.Fatal(err)
	}
	edit(&md)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), file[:start]...)
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// shardSeeds are the seed inputs of the shard fuzz targets: valid parts and the known
// allocation bombs.
func shardSeeds(t testing.TB) map[string][]byte {
	var buf bytes.Buffer
	if err := shards.WriteTrajectories(&buf, 0, shardtest.Rows(shardtest.Options{Seed: 3, Groups: 2, Samples: 2})); err != nil {
		t.Fatal(err)
	}
	valid := buf.Bytes()
	seeds := map[string][]byte{
		"valid":    valid,
		"par1par1": []byte("PAR1PAR1"),
		"rows_2_40": footerEdit(t, valid, func(md *format.FileMetaData) {
			md.NumRows = 1 << 40
			for i := range md.RowGroups {
				md.RowGroups[i].NumRows = 1 << 40
			}
		}),
		"rowgroup_rows_2_40": footerEdit(t, valid, func(md *format.FileMetaData) {
			for i := range md.RowGroups {
				md.RowGroups[i].NumRows = 1 << 40
			}
		}),
		"huge_column_chunk": footerEdit(t, valid, func(md *format.FileMetaData) {
			for i := range md.RowGroups {
				for j := range md.RowGroups[i].Columns {
					m := &md.RowGroups[i].Columns[j].MetaData
					m.TotalCompressedSize = 1 << 40
					m.TotalUncompressedSize = 1 << 40
					m.NumValues = 1 << 40
				}
			}
		}),
		"huge_byte_size": footerEdit(t, valid, func(md *format.FileMetaData) {
			for i := range md.RowGroups {
				md.RowGroups[i].TotalByteSize = 1 << 50
			}
		}),
		"negative_rows": footerEdit(t, valid, func(md *format.FileMetaData) { md.NumRows = -1 }),
		"truncated":     valid[:len(valid)/2],
	}
	other, err := shards.EncodeTable([]struct {
		RowID int64 `parquet:"row_id"`
		UID   int64 `parquet:"uid"`
	}{{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	seeds["other_schema"] = other
	return seeds
}

// TestWriteShardFuzzSeeds regenerates testdata/fuzz (DRMAS_WRITE_FUZZ_SEEDS=1).
func TestWriteShardFuzzSeeds(t *testing.T) {
	if os.Getenv("DRMAS_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set DRMAS_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz seeds")
	}
	for _, target := range []string{"FuzzReadTrajectories", "FuzzReadKeys"} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range shardSeeds(t) {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// FuzzReadTrajectories: any input is rows or an error naming the file, never a panic, and
// memory stays proportional to the input (a footer's counts are not trusted).
func FuzzReadTrajectories(f *testing.F) {
	for _, data := range shardSeeds(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before := totalAlloc()
		rows, err := shards.ReadTrajectories(bytes.NewReader(data), int64(len(data)), "fuzz.parquet")
		checkAlloc(t, "ReadTrajectories", before, len(data))
		if err != nil {
			if !bytes.Contains([]byte(err.Error()), []byte("fuzz.parquet")) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if int64(len(rows)) > int64(len(data))*8 {
			t.Fatalf("%d rows from %d bytes", len(rows), len(data))
		}
		// Whatever reads must write back and read again to the same rows.
		out, err := shards.EncodeTable(rows)
		if err != nil {
			return // rows a writer rejects (e.g. invalid part layout) are fine to read
		}
		again, err := shards.ReadTrajectories(bytes.NewReader(out), int64(len(out)), "again.parquet")
		if err != nil {
			t.Fatalf("re-read of re-encoded rows: %v", err)
		}
		if fmt.Sprint(again) != fmt.Sprint(rows) {
			t.Fatal("rows changed through a write and read")
		}
	})
}

// FuzzReadKeys: OpenParquet + ReadKeys (the column-wise reader normalize uses) reject bad
// input with an error, never panic, and keep memory proportional to the input.
func FuzzReadKeys(f *testing.F) {
	for _, data := range shardSeeds(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before := totalAlloc()
		pf, err := shards.OpenParquet(bytes.NewReader(data), int64(len(data)), "fuzz.parquet")
		checkAlloc(t, "OpenParquet", before, len(data))
		if err != nil {
			return
		}
		k, err := shards.ReadKeys(context.Background(), pf, "fuzz.parquet")
		checkAlloc(t, "ReadKeys", before, len(data))
		if err != nil {
			return
		}
		n := k.Len()
		if len(k.Group) != n || len(k.Sample) != n || len(k.Agent) != n || len(k.Score) != n {
			t.Fatalf("columns of different lengths: %d %d %d %d %d", n, len(k.Group), len(k.Sample), len(k.Agent), len(k.Score))
		}
		for i := 0; i < n; i++ {
			if int(k.Group[i]) >= len(k.UIDs) || k.Group[i] < 0 || int(k.Agent[i]) >= len(k.Agents) || k.Agent[i] < 0 {
				t.Fatalf("row %d: code out of range", i)
			}
		}
	})
}

// TestLyingRowCountWithinBudget: a footer that claims as many rows as the size check lets
// through (8 per byte) must not make the reader reserve memory for them. A decoded Row is
// 288 bytes, so trusting the count would ask for about 2300 times the file.
func TestLyingRowCountWithinBudget(t *testing.T) {
	var buf bytes.Buffer
	if err := shards.WriteTrajectories(&buf, 0, shardtest.Rows(shardtest.Options{Seed: 3, Groups: 100, Samples: 4})); err != nil {
		t.Fatal(err)
	}
	valid := buf.Bytes()
	bad := footerEdit(t, valid, func(md *format.FileMetaData) { md.NumRows = int64(len(valid)) * 8 })
	if trusting := uint64(len(bad)) * 8 * 288; trusting <= allocBudget(len(bad)) {
		t.Fatalf("test shard too small to tell: trusting the footer would take %d MiB, budget %d MiB", trusting>>20, allocBudget(len(bad))>>20)
	}
	before := totalAlloc()
	_, err := shards.ReadTrajectories(bytes.NewReader(bad), int64(len(bad)), "bad.parquet")
	checkAlloc(t, "ReadTrajectories", before, len(bad))
	if err == nil || !strings.Contains(err.Error(), "footer says") {
		t.Fatalf("want a row-count mismatch naming the footer, got %v", err)
	}
}
