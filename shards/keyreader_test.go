package shards_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/drmas-dev/drmas/internal/hugemem"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
	"github.com/drmas-dev/drmas/storage"
)

// bytesBucket serves one object from memory (only GetRange is used by the key readers).
type bytesBucket struct {
	storage.Bucket
	data []byte
}

func (b bytesBucket) GetRange(_ context.Context, _ string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("negative offset")
	}
	if off > int64(len(b.data)) {
		off = int64(len(b.data))
	}
	end := int64(len(b.data))
	if n >= 0 && n < end-off {
		end = off + n
	}
	return io.NopCloser(bytes.NewReader(b.data[off:end])), nil
}

// slowKeys reads data with OpenColumns and ReadKeys.
func slowKeys(data []byte) (*shards.Keys, error) {
	ctx := context.Background()
	pf, err := shards.OpenColumns(ctx, bytesBucket{data: data}, "p", int64(len(data)), shards.KeyColumns)
	if err != nil {
		return nil, err
	}
	return shards.ReadKeys(ctx, pf, "p")
}

// sameKeys compares two Keys field by field (nil and empty slices alike).
func sameKeys(a, b *shards.Keys) string {
	fa, fb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < fa.NumField(); i++ {
		x, y := fa.Field(i), fb.Field(i)
		if x.Len() == 0 && y.Len() == 0 {
			continue
		}
		if !reflect.DeepEqual(x.Interface(), y.Interface()) {
			return fmt.Sprintf("%s differs", fa.Type().Field(i).Name)
		}
	}
	return ""
}

// checkKeyReader reads data with kr and with OpenColumns + ReadKeys: both fail or both return
// the same keys.
func checkKeyReader(t *testing.T, kr *shards.KeyReader, data []byte, fast bool) {
	t.Helper()
	before := kr.Fallbacks()
	defer func() {
		if took := kr.Fallbacks() == before; took != fast && !t.Failed() {
			t.Fatalf("fast path taken: %v, want %v", took, fast)
		}
	}()
	want, werr := slowKeys(data)
	got, gerr := kr.Read(context.Background(), bytesBucket{data: data}, "p", int64(len(data)))
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("KeyReader error %v, ReadKeys error %v", gerr, werr)
	}
	if werr != nil {
		if werr.Error() != gerr.Error() {
			t.Fatalf("KeyReader error %q, ReadKeys error %q", gerr, werr)
		}
		return
	}
	if d := sameKeys(got, want); d != "" {
		t.Fatalf("KeyReader and ReadKeys disagree: %s", d)
	}
}

// keyRow has the key columns only, with encodings the fast path handles or not depending on
// the writer options.
type keyRow struct {
	RowID  int64   `parquet:"row_id"`
	UID    string  `parquet:"uid,plain"`
	Sample int32   `parquet:"sample,delta"`
	Agent  string  `parquet:"agent,dict"`
	Score  float64 `parquet:"score"`
}

func writeKeyRows(t *testing.T, rows []keyRow, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[keyRow](&buf, append([]parquet.WriterOption{parquet.MaxRowsPerRowGroup(1000)}, opts...)...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestKeyReaderMatchesReadKeys(t *testing.T) {
	var kr shards.KeyReader // one reader for every file: buffers are reused
	for _, o := range []shardtest.Options{
		{Seed: 1, Groups: 50, DropAgent: true},
		{Seed: 2, Part: 5, Groups: 17000, Samples: 2, MaxSteps: 1, Tokens: 1, Agents: []string{"a", "b", "c"}},
		{Seed: 3, Groups: 1, Samples: 1, MaxSteps: 1},
	} {
		rows := shardtest.Rows(o)
		checkKeyReader(t, &kr, encode(t, o.Part, rows), true)
		// Small pages, v1 and v2.
		for _, v := range []int{1, 2} {
			var buf bytes.Buffer
			w := parquet.NewGenericWriter[shards.Row](&buf, parquet.PageBufferSize(512), parquet.DataPageVersion(v),
				parquet.MaxRowsPerRowGroup(int64(shards.RowGroupRows)))
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			checkKeyReader(t, &kr, buf.Bytes(), true)
		}
		// Other encodings: PLAIN uids, delta samples; uncompressed (fast path) and zstd
		// (fallback).
		krows := make([]keyRow, len(rows))
		for i, r := range rows {
			krows[i] = keyRow{r.RowID, r.UID, r.Sample, r.Agent, r.Score}
		}
		checkKeyReader(t, &kr, writeKeyRows(t, krows, parquet.Compression(&uncompressed.Codec{})), true)
		checkKeyReader(t, &kr, writeKeyRows(t, krows, parquet.Compression(&zstd.Codec{})), false)
	}
	// Bad parts: the errors are ReadKeys'.
	rows := shardtest.Rows(shardtest.Options{Seed: 4, Groups: 20})
	krows := make([]keyRow, len(rows))
	for i, r := range rows {
		krows[i] = keyRow{r.RowID, r.UID, r.Sample, r.Agent, r.Score}
	}
	bad := append([]keyRow(nil), krows...)
	bad[7].Score = math.Inf(1)
	checkKeyReader(t, &kr, writeKeyRows(t, bad, parquet.Compression(&uncompressed.Codec{})), false)
	bad = append(append([]keyRow(nil), krows...), krows[0])
	checkKeyReader(t, &kr, writeKeyRows(t, bad, parquet.Compression(&uncompressed.Codec{})), false)
	// A reader's results stay right after a failure.
	checkKeyReader(t, &kr, encode(t, 0, rows), true)
	// NoSample: the same keys but Sample.
	data := encode(t, 0, rows)
	want, err := slowKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	ns := shards.KeyReader{NoSample: true}
	got, err := ns.Read(context.Background(), bytesBucket{data: data}, "p", int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Sample) != 0 {
		t.Fatalf("NoSample: %d samples decoded", len(got.Sample))
	}
	want.Sample = nil
	if d := sameKeys(got, want); d != "" {
		t.Fatalf("NoSample: %s", d)
	}
}

// FuzzKeyReader: KeyReader never panics, allocates no more than OpenColumns + ReadKeys (plus
// the usual budget), and agrees with them (same keys, or the same error).
//
// OpenColumns + ReadKeys themselves can allocate what a lying page header asks for (parquet-go
// sizes its page buffer from the header before reading), and KeyReader falls back to them on
// such input, so the bound is relative.
func FuzzKeyReader(f *testing.F) {
	for _, data := range shardSeeds(f) {
		f.Add(data)
	}
	var kr shards.KeyReader
	f.Fuzz(func(t *testing.T, data []byte) {
		before := totalAlloc()
		want, werr := slowKeys(data)
		slow := totalAlloc() - before
		got, gerr := kr.Read(context.Background(), bytesBucket{data: data}, "p", int64(len(data)))
		if fast := totalAlloc() - before - slow; fast > slow+allocBudget(2*len(data)) {
			t.Fatalf("KeyReader allocated %d MiB for %d input bytes, OpenColumns + ReadKeys %d MiB", fast>>20, len(data), slow>>20)
		}
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("KeyReader error %v, ReadKeys error %v", gerr, werr)
		}
		if werr == nil {
			if d := sameKeys(got, want); d != "" {
				t.Fatalf("KeyReader and ReadKeys disagree: %s", d)
			}
		}
		// The same with the columns in a huge-page arena (a fresh reader: its buffers die
		// with the arena).
		var arena hugemem.Arena
		defer arena.Free()
		ar := shards.KeyReader{Arena: &arena}
		agot, aerr := ar.Read(context.Background(), bytesBucket{data: data}, "p", int64(len(data)))
		if (aerr == nil) != (werr == nil) || (werr != nil && werr.Error() != aerr.Error()) {
			t.Fatalf("KeyReader with an arena: error %v, ReadKeys error %v", aerr, werr)
		}
		if werr == nil {
			if d := sameKeys(agot, want); d != "" {
				t.Fatalf("KeyReader with an arena and ReadKeys disagree: %s", d)
			}
		}
	})
}
