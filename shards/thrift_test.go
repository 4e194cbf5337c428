package shards_test

import (
	"bytes"
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
