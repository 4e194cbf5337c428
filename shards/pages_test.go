package shards_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/drmas-dev/drmas/shards"
)

type textRow struct {
	ID   int64  `parquet:"id"`
	Text string `parquet:"text"`
}

// withPageHeader returns data (a Parquet file) with the first page header of column ci edited
// by edit, the header re-encoded in place and the footer's offsets and sizes moved to match, so
// that the file is well-formed except for what edit says.
func withPageHeader(t *testing.T, data []byte, ci int, edit func(*format.PageHeader)) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata().RowGroups[0].Columns[ci].MetaData
	off := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < off {
		off = md.DictionaryPageOffset
	}
	var prot thrift.CompactProtocol
	rd := prot.NewReaderFromBytes(data[off:])
	var h format.PageHeader
	if err := thrift.NewDecoder(rd).Decode(&h); err != nil {
		t.Fatal(err)
	}
	old := rd.BytesRead()
	edit(&h)
	enc, err := thrift.Marshal(&prot, &h)
	if err != nil {
		t.Fatal(err)
	}
	shift := int64(len(enc) - old)
	fm := *f.Metadata()
	fm.RowGroups = append([]format.RowGroup(nil), fm.RowGroups...)
	cols := append([]format.ColumnChunk(nil), fm.RowGroups[0].Columns...)
	for i := range cols {
		m := &cols[i].MetaData
		if i == ci {
			m.TotalCompressedSize += shift
		}
		if m.DataPageOffset > off {
			m.DataPageOffset += shift
		}
		if m.DictionaryPageOffset > off {
			m.DictionaryPageOffset += shift
		}
		cols[i].OffsetIndexOffset, cols[i].OffsetIndexLength, cols[i].ColumnIndexOffset, cols[i].ColumnIndexLength = 0, 0, 0, 0
	}
	fm.RowGroups[0].Columns = cols
	footer, err := thrift.Marshal(&prot, &fm)
	if err != nil {
		t.Fatal(err)
	}
	flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	out := append(append(append([]byte(nil), data[:off]...), enc...), data[int(off)+old:len(data)-8-flen]...)
	out = append(out, footer...)
	return append(binary.LittleEndian.AppendUint32(out, uint32(len(footer))), 'P', 'A', 'R', '1')
}

func allocated(f func()) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	f()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - before
}

// TestPageHeadersAreCheckedBeforeReading: a compressed page whose header claims 1 GiB
// uncompressed (a footer that agrees with the edited header) made parquet-go allocate 1.2 GiB
// for a 42 KB file, and a string in a page header claiming more bytes than the file holds made
// it allocate them (882 MiB for an 821-byte tasks file found by fuzzing). OpenParquet refuses
// both before any page is read, and still reads the file with its header re-encoded unedited.
// (Pages that legitimately expand thousands of times: stages/normalize's TestSidecarEncoding.)
func TestPageHeadersAreCheckedBeforeReading(t *testing.T) {
	rows := make([]textRow, 20000)
	for i := range rows {
		rows[i] = textRow{ID: int64(i), Text: "the same text in every row"}
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[textRow](&b, parquet.Compression(&zstd.Codec{}))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	read := func(data []byte) ([]textRow, error) {
		return shards.ReadTable[textRow](bytes.NewReader(data), int64(len(data)), "x.parquet")
	}
	// Unedited (the edit re-encodes the same header): opens, and reads every row back.
	same := withPageHeader(t, data, 1, func(*format.PageHeader) {})
	got, err := read(same)
	if err != nil || len(got) != len(rows) || got[len(got)-1] != rows[len(rows)-1] {
		t.Fatalf("well-formed file: %d rows, %v", len(got), err)
	}
	for _, tc := range []struct {
		name string
		edit func(*format.PageHeader)
		want string
	}{
		{"uncompressed size", func(h *format.PageHeader) { h.UncompressedPageSize = 1 << 30 }, "claim 1024 MiB uncompressed"},
		{"statistics string", func(h *format.PageHeader) {
			d, _ := h.DataPageHeader.Get()
			d.Statistics.MaxValue = make([]byte, 1<<20)
			h.DataPageHeader.Set(d)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := withPageHeader(t, data, 1, tc.edit)
			if tc.want == "" {
				// Claim a 1 GiB string where the header holds a 1 MiB one: cut the file's
				// header down by rewriting the varint length in place.
				i := bytes.Index(bad, []byte{0x80, 0x80, 0x40})
				if i < 0 {
					t.Fatal("length varint of the 1 MiB string not found")
				}
				bad = append(append(append([]byte(nil), bad[:i]...), 0x80, 0x80, 0x80, 0x80, 0x04), bad[i+3:]...)
				tc.want = "malformed page"
			}
			var err error
			n := allocated(func() { _, err = read(bad) })
			t.Logf("%d KiB allocated: %v", n>>10, err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "x.parquet") {
				t.Fatalf("got %v, want an error naming the file and %q", err, tc.want)
			}
			if n > 64<<20 {
				t.Fatalf("allocated %d MiB for a %d-byte file", n>>20, len(bad))
			}
		})
	}
}
