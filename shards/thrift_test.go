package shards_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/shards/shardtest"
)

// TestThriftSizeMatchesDecoder: on a real shard, the walk measures the footer as the bytes the
// writer gave it and every page header as the bytes parquet-go's decoder reads.
func TestThriftSizeMatchesDecoder(t *testing.T) {
	var buf bytes.Buffer
	if err := shards.WriteTrajectories(&buf, 0, shardtest.Rows(shardtest.Options{Seed: 5, Groups: 30, Samples: 4})); err != nil {
		t.Fatal(err)
	}
	file := buf.Bytes()
	flen := int(binary.LittleEndian.Uint32(file[len(file)-8:]))
	if n, err := shards.ThriftSize(file[len(file)-8-flen : len(file)-8]); err != nil || n != flen {
		t.Fatalf("footer: ThriftSize = %d, %v; want %d", n, err, flen)
	}
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	headers := 0
	for _, rg := range f.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			md := cc.MetaData
			off := md.DataPageOffset
			if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < off {
				off = md.DictionaryPageOffset
			}
			rd := new(thrift.CompactProtocol).NewReaderFromBytes(nil)
			for rest := file[off : off+md.TotalCompressedSize]; len(rest) > 0; headers++ {
				n, err := shards.ThriftSize(rest)
				if err != nil {
					t.Fatalf("page header at %d: %v", len(file)-len(rest), err)
				}
				rd.ResetBytes(rest)
				var h format.PageHeader
				if err := thrift.NewDecoder(rd).Decode(&h); err != nil {
					t.Fatal(err)
				}
				if n != rd.BytesRead() {
					t.Fatalf("page header: ThriftSize %d bytes, the decoder read %d", n, rd.BytesRead())
				}
				rest = rest[n+int(h.CompressedPageSize):]
			}
		}
	}
	if headers < 10 {
		t.Fatalf("only %d page headers checked", headers)
	}
}

// TestThriftSizeRefuses: hand-encoded compact-protocol structs whose claims do not fit their
// bytes, nest too deep or stop short are refused, saying what claimed what.
func TestThriftSizeRefuses(t *testing.T) {
	deep := bytes.Repeat([]byte{0x1c}, 100) // field 1, a struct, inside each other
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		// field 1 (i32) = 1, stop.
		{"valid", []byte{0x15, 0x02, 0x00}, ""},
		// field 4, a list of 2³⁰ structs (size as a varint), nothing after.
		{"list", append([]byte{0x49, 0xfc}, binary.AppendUvarint(nil, 1<<30)...), "list size of 1073741824"},
		// field 1, a binary of 1,000 bytes, with 3.
		{"binary", []byte{0x18, 0xe8, 0x07, 'a', 'b', 'c'}, "binary length of 1000"},
		// field 1, a map of 100 entries, 3 bytes left.
		{"map", []byte{0x1b, 100, 0x55, 1, 2}, "map size of 100"},
		{"nesting", deep, "nested more than"},
		// field 1 (i32) with no value.
		{"truncated", []byte{0x15}, "runs past its bytes"},
		// field 1 of type 13, which the compact protocol lacks.
		{"type", []byte{0x1d, 0x00}, "thrift type 13"},
	} {
		n, err := shards.ThriftSize(c.b)
		switch {
		case c.want == "" && (err != nil || n != len(c.b)):
			t.Errorf("%s: ThriftSize = %d, %v; want %d", c.name, n, err, len(c.b))
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: ThriftSize error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// TestLyingFooterListWithinBudget: a footer whose row-group list claims 2³⁰ entries is refused
// without the ~88 GiB parquet-go would allocate for them.
func TestLyingFooterListWithinBudget(t *testing.T) {
	footer := append([]byte{0x49, 0xfc}, binary.AppendUvarint(nil, 1<<30)...)
	footer = append(footer, make([]byte, 64)...)
	file := append([]byte("PAR1"), footer...)
	file = binary.LittleEndian.AppendUint32(file, uint32(len(footer)))
	file = append(file, "PAR1"...)
	before := totalAlloc()
	_, err := shards.OpenParquet(bytes.NewReader(file), int64(len(file)), "lying.parquet")
	checkAlloc(t, "OpenParquet", before, len(file))
	if err == nil || !strings.Contains(err.Error(), "lying.parquet: malformed parquet footer: thrift list size of 1073741824") {
		t.Fatalf("OpenParquet error %v, want the malformed footer named", err)
	}
	_, err = shards.OpenColumns(t.Context(), bytesBucket{data: file}, "lying", int64(len(file)), shards.KeyColumns)
	if err == nil || !strings.Contains(err.Error(), "lying: malformed parquet footer: thrift list size") {
		t.Fatalf("OpenColumns error %v, want the malformed footer named", err)
	}
}

// withHeaderField returns file with field (a compact-protocol field, its id in full) added at
// the end of the first page header of the first key column, the footer's offsets moved to match.
func withHeaderField(t *testing.T, file []byte, field []byte) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := f.Schema().Lookup(shards.KeyColumns[0])
	md := f.Metadata().RowGroups[0].Columns[leaf.ColumnIndex].MetaData
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	n, err := shards.ThriftSize(file[start:])
	if err != nil {
		t.Fatal(err)
	}
	at := start + int64(n) - 1 // the header's stop byte
	out := append(append(append([]byte(nil), file[:at]...), field...), file[at:]...)
	k := int64(len(field))
	move := func(off *int64) {
		if *off > at {
			*off += k
		}
	}
	return footerEdit(t, out, func(m *format.FileMetaData) {
		for i := range m.RowGroups {
			rg := &m.RowGroups[i]
			move(&rg.FileOffset)
			for j := range rg.Columns {
				cc := &rg.Columns[j]
				move(&cc.FileOffset)
				move(&cc.MetaData.DataPageOffset)
				move(&cc.MetaData.DictionaryPageOffset)
				if i == 0 && j == leaf.ColumnIndex {
					cc.MetaData.TotalCompressedSize += k
				}
			}
		}
	})
}

// TestLyingPageHeaderWithinBudget: a key column's page header whose statistics claim a 2³⁰-byte
// maximum is refused by every reader within budget, naming the claim (parquet-go's decoder,
// reading from the chunk's bytes, bounds a binary itself but says only "unexpected EOF"); an
// unknown field holding the bytes it claims is read past, so the edit itself is sound.
func TestLyingPageHeaderWithinBudget(t *testing.T) {
	var buf bytes.Buffer
	if err := shards.WriteTrajectories(&buf, 0, shardtest.Rows(shardtest.Options{Seed: 5, Groups: 30, Samples: 4})); err != nil {
		t.Fatal(err)
	}
	want, err := readKeys(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// Field 100 (zigzag 200), binary, 3 bytes.
	honest := withHeaderField(t, buf.Bytes(), []byte{0x08, 200, 1, 3, 'a', 'b', 'c'})
	if got, err := readKeys(honest); err != nil || sameKeys(got, want) != "" {
		t.Fatalf("a header with an unknown 3-byte field: %v", err)
	}
	var kr shards.KeyReader
	if got, err := kr.Read(t.Context(), bytesBucket{data: honest}, "p", int64(len(honest))); err != nil || sameKeys(got, want) != "" {
		t.Fatalf("KeyReader, a header with an unknown 3-byte field: %v", err)
	}

	// Field 5 (zigzag 10), data_page_header: its field 5, statistics: its field 1, max, a
	// binary of 2³⁰ bytes; then the ends of the two structs, which the claim swallows.
	lie := binary.AppendUvarint([]byte{0x0c, 10, 0x5c, 0x18}, 1<<30)
	lying := withHeaderField(t, buf.Bytes(), append(lie, 0, 0))
	const refusal = "malformed page: header: thrift binary length of 1073741824"
	before := totalAlloc()
	_, err = readKeys(lying)
	checkAlloc(t, "OpenParquet and ReadKeys", before, len(lying))
	if err == nil || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("OpenParquet and ReadKeys: error %v, want %q", err, refusal)
	}
	before = totalAlloc()
	_, kerr := kr.Read(t.Context(), bytesBucket{data: lying}, "p", int64(len(lying)))
	checkAlloc(t, "KeyReader", before, len(lying))
	if kerr == nil || !strings.Contains(kerr.Error(), refusal) || kr.Fallbacks() != 1 {
		t.Fatalf("KeyReader: error %v after %d fallbacks, want %q after 1", kerr, kr.Fallbacks(), refusal)
	}
}

func readKeys(file []byte) (*shards.Keys, error) {
	pf, err := shards.OpenParquet(bytes.NewReader(file), int64(len(file)), "p")
	if err != nil {
		return nil, err
	}
	return shards.ReadKeys(context.Background(), pf, "p")
}
