package importer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/drmas-dev/drmas/shards"
)

// pqColumn is an accepted column found in a Parquet file.
type pqColumn struct {
	col    *column
	leaf   int          // leaf column index
	kind   parquet.Kind // physical type
	list   bool
	repDef int // definition level of the repeated node: below it, the list is empty or null
	maxDef int
}

// accepts reports whether a physical type can hold a column of kind k.
func accepts(k kind, pk parquet.Kind) bool {
	switch k {
	case kString:
		return pk == parquet.ByteArray
	case kID:
		return pk == parquet.ByteArray || pk == parquet.Int32 || pk == parquet.Int64
	case kInt32, kInt64, kIntList:
		return pk == parquet.Int32 || pk == parquet.Int64
	case kFloat:
		return pk == parquet.Double || pk == parquet.Float || pk == parquet.Int32 || pk == parquet.Int64
	case kFloatList:
		return pk == parquet.Double || pk == parquet.Float
	case kBool:
		return pk == parquet.Boolean
	}
	return false
}

// resolve maps the accepted columns onto f's leaf columns, reporting every missing or
// mistyped one.
func resolve(f *parquet.File, cols []column, p *problems) []pqColumn {
	schema := f.Schema()
	leaves := map[string][][]string{}
	for _, path := range schema.Columns() {
		leaves[path[0]] = append(leaves[path[0]], path)
	}
	var out []pqColumn
	for i := range cols {
		c := &cols[i]
		paths := leaves[c.name]
		if len(paths) == 0 {
			if c.required {
				p.add(-1, "missing required column %q", c.name)
			}
			continue
		}
		if len(paths) > 1 {
			p.add(-1, "column %q is a group of %d columns, want %s", c.name, len(paths), c.kind)
			continue
		}
		leaf, _ := schema.Lookup(paths[0]...)
		wantList := c.kind == kIntList || c.kind == kFloatList
		switch {
		case leaf.MaxRepetitionLevel > 1:
			p.add(-1, "column %q is a nested list, want %s", c.name, c.kind)
			continue
		case wantList && leaf.MaxRepetitionLevel == 0:
			p.add(-1, "column %q is not a list, want %s", c.name, c.kind)
			continue
		case !wantList && leaf.MaxRepetitionLevel > 0:
			p.add(-1, "column %q is a list, want %s", c.name, c.kind)
			continue
		case !wantList && len(paths[0]) > 1:
			// A struct of one field: its leaf would be read as the column itself.
			p.add(-1, "column %q is a struct (%s), want %s", c.name, strings.Join(paths[0], "."), c.kind)
			continue
		}
		pk := leaf.Node.Type().Kind()
		if !accepts(c.kind, pk) {
			p.add(-1, "column %q has type %v, want %s", c.name, pk, c.kind)
			continue
		}
		if lt := annotation(leaf.Node.Type()); lt != "" {
			p.add(-1, "column %q holds %s values stored as %v, which the import would misread, want %s: cast it (e.g. CAST(%s AS %s))",
				c.name, lt, pk, c.kind, c.name, castTo(c.kind))
			continue
		}
		pc := pqColumn{col: c, leaf: leaf.ColumnIndex, kind: pk, list: wantList, maxDef: leaf.MaxDefinitionLevel}
		var node parquet.Node = schema
		def := 0
		for _, name := range paths[0] {
			node = child(node, name)
			if node == nil {
				break
			}
			if node.Optional() || node.Repeated() {
				def++
			}
			if node.Repeated() {
				pc.repDef = def
			}
		}
		out = append(out, pc)
	}
	return out
}

// annotation names the logical type of t when the physical value is not the number or text it
// means ("" when it is): a DECIMAL is its unscaled integer (12.34 is 1234), a DATE, TIME or
// TIMESTAMP a count of days or seconds' fractions since an epoch, an unsigned integer of 32 or
// 64 bits a negative number when large, a BSON document binary. Plain, signed-integer, 8- and
// 16-bit unsigned, string, enum and JSON columns read as they are. Older writers' converted
// types count too.
func annotation(t parquet.Type) string {
	if lt := t.LogicalType(); lt != nil && lt.Value != nil {
		switch v := lt.Value.(type) {
		case *format.StringType, *format.EnumType, *format.JsonType:
			return ""
		case *format.IntType:
			if v.IsSigned || v.BitWidth <= 16 { // UINT8 and UINT16 fit the INT32 they are stored in
				return ""
			}
		}
		return lt.String()
	}
	if ct := t.ConvertedType(); ct != nil {
		switch *ct {
		case deprecated.UTF8, deprecated.Enum, deprecated.Json, deprecated.Uint8, deprecated.Uint16,
			deprecated.Int8, deprecated.Int16, deprecated.Int32, deprecated.Int64:
			return ""
		}
		return convertedNames[*ct]
	}
	return ""
}

// convertedNames are the older converted types that annotation refuses, by name.
var convertedNames = map[deprecated.ConvertedType]string{
	deprecated.Decimal: "DECIMAL", deprecated.Date: "DATE", deprecated.TimeMillis: "TIME(MILLIS)",
	deprecated.TimeMicros: "TIME(MICROS)", deprecated.TimestampMillis: "TIMESTAMP(MILLIS)",
	deprecated.TimestampMicros: "TIMESTAMP(MICROS)", deprecated.Uint32: "UINT32", deprecated.Uint64: "UINT64", deprecated.Bson: "BSON",
	deprecated.Map: "MAP", deprecated.MapKeyValue: "MAP_KEY_VALUE", deprecated.List: "LIST",
	deprecated.Interval: "INTERVAL",
}

// castTo is the SQL type a column of kind k is written as.
func castTo(k kind) string {
	switch k {
	case kString, kID:
		return "VARCHAR"
	case kInt32:
		return "INTEGER"
	case kInt64:
		return "BIGINT"
	case kFloat:
		return "DOUBLE"
	case kIntList:
		return "BIGINT[]"
	case kFloatList:
		return "DOUBLE[]"
	case kBool:
		return "BOOLEAN"
	}
	return "its type"
}

func child(n parquet.Node, name string) parquet.Node {
	for _, f := range n.Fields() {
		if f.Name() == name {
			return f
		}
	}
	return nil
}

// readParquet decodes the accepted columns of a Parquet file row by row. Problems name the
// row index (from 0). Malformed files are problems, never panics, and nothing is allocated
// from the footer's row count beyond what the file size allows.
func readParquet(ctx context.Context, data []byte, name string, cols []column, p *problems, c *checker) (recs []rec, err error) {
	row := 0
	defer func() {
		if x := recover(); x != nil {
			recs, err = nil, nil
			p.add(-1, "malformed parquet (after %d rows): %v", row, x)
		}
	}()
	f, oerr := shards.OpenParquet(bytes.NewReader(data), int64(len(data)), name)
	if oerr != nil {
		p.add(-1, "%s", strings.TrimPrefix(oerr.Error(), name+": "))
		return nil, nil
	}
	n := f.NumRows()
	if n < 0 || n > int64(len(data))*8 {
		// A row costs at least one bit of some column; a larger count is a lie in the footer.
		p.add(-1, "footer claims %d rows in %d bytes", n, len(data))
		return nil, nil
	}
	pcs := resolve(f, cols, p)
	if p.e.Total > 0 {
		return nil, nil
	}
	nleaf := len(f.Schema().Columns())
	vals := make([][]parquet.Value, nleaf)
	want := make([]bool, nleaf)
	for _, pc := range pcs {
		want[pc.leaf] = true
	}
	buf := make([]parquet.Row, 64)
	for rgi, rg := range f.RowGroups() {
		start := row
		rows := rg.Rows()
		for {
			if err := ctx.Err(); err != nil {
				rows.Close()
				return nil, err
			}
			k, rerr := rows.ReadRows(buf)
			for _, r := range buf[:k] {
				for i := range vals {
					vals[i] = vals[i][:0]
				}
				for _, v := range r {
					if ci := v.Column(); ci >= 0 && ci < nleaf && want[ci] {
						vals[ci] = append(vals[ci], v)
					}
				}
				if rec, ok := parquetRecord(row, pcs, vals, p); ok {
					c.add(&rec)
					recs = append(recs, rec)
				}
				row++
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				rows.Close()
				p.add(row, "read: %v", rerr)
				return nil, nil
			}
			if k == 0 {
				rows.Close()
				p.add(row, "reader made no progress")
				return nil, nil
			}
		}
		if err := rows.Close(); err != nil {
			p.add(-1, "close row group %d: %v", rgi, err)
			return nil, nil
		}
		if got := int64(row - start); got != rg.NumRows() {
			p.add(-1, "row group %d: read %d rows, footer says %d", rgi, got, rg.NumRows())
			return nil, nil
		}
	}
	if int64(row) != n {
		p.add(-1, "read %d rows, footer says %d", row, n)
	}
	return recs, nil
}

func parquetRecord(row int, pcs []pqColumn, vals [][]parquet.Value, p *problems) (rec, bool) {
	r := rec{pos: row}
	for i := range pcs {
		pc := &pcs[i]
		vs := vals[pc.leaf]
		var (
			v   value
			err error
		)
		switch {
		case !pc.list && (len(vs) == 0 || vs[0].IsNull()):
			if pc.col.required {
				p.add(row, "required column %q is null", pc.col.name)
				r.missing = true
			}
			continue
		case !pc.list:
			v, err = parquetScalar(pc.col.kind, vs[0])
			if err == nil && !utf8.ValidString(v.s) {
				// The shards' strings must be UTF-8 (DuckDB refuses to read anything else):
				// invalid bytes become U+FFFD, as in JSONL (encoding/json) and as rollout stores
				// a policy's text; an id or name holding U+FFFD is then refused (exact).
				v.s = strings.ToValidUTF8(v.s, "\uFFFD")
			}
		case len(vs) == 0 || (len(vs) == 1 && vs[0].DefinitionLevel() < pc.repDef):
			continue // an empty or null list
		default:
			v, err = parquetList(pc, vs)
		}
		if err == nil {
			err = assign(&r, pc.col, &v)
		}
		if err != nil {
			p.add(row, "column %q: %v", pc.col.name, err)
			if pc.col.required {
				r.missing = true
			}
		}
	}
	if r.missing {
		return r, false
	}
	for _, msg := range finish(&r) {
		p.add(row, "%s", msg)
	}
	return r, true
}

func parquetInt(v parquet.Value, k kind) (int64, error) {
	var i int64
	switch v.Kind() {
	case parquet.Int32:
		i = int64(v.Int32())
	case parquet.Int64:
		i = v.Int64()
	default:
		return 0, fmt.Errorf("want an integer, got %v", v.Kind())
	}
	return i, checkInt(k, i)
}

func parquetFloat(v parquet.Value) (float64, error) {
	var f float64
	switch v.Kind() {
	case parquet.Double:
		f = v.Double()
	case parquet.Float:
		f = float64(v.Float())
	case parquet.Int32:
		f = float64(v.Int32())
	case parquet.Int64:
		f = float64(v.Int64())
	default:
		return 0, fmt.Errorf("want a number, got %v", v.Kind())
	}
	return f, checkFinite(f)
}

func parquetScalar(k kind, pv parquet.Value) (value, error) {
	var (
		v   value
		err error
	)
	switch k {
	case kString, kID:
		switch pv.Kind() {
		case parquet.ByteArray:
			v.s = string(pv.ByteArray())
		case parquet.Int32, parquet.Int64:
			var i int64
			i, err = parquetInt(pv, kInt64)
			v.s = strconv.FormatInt(i, 10)
		default:
			err = fmt.Errorf("want %s, got %v", k, pv.Kind())
		}
	case kInt32, kInt64:
		v.i, err = parquetInt(pv, k)
	case kFloat:
		v.f, err = parquetFloat(pv)
	case kBool:
		if pv.Kind() != parquet.Boolean {
			return v, fmt.Errorf("want a boolean, got %v", pv.Kind())
		}
		v.b = pv.Boolean()
	}
	return v, err
}

func parquetList(pc *pqColumn, vs []parquet.Value) (value, error) {
	var v value
	if pc.col.kind == kIntList {
		v.ints = make([]int32, len(vs))
	} else {
		v.floats = make([]float32, len(vs))
	}
	for j, x := range vs {
		if x.DefinitionLevel() < pc.maxDef {
			return value{}, fmt.Errorf("element %d is null", j)
		}
		if pc.col.kind == kIntList {
			i, err := parquetInt(x, kIntList)
			if err != nil {
				return value{}, fmt.Errorf("element %d: %w", j, err)
			}
			v.ints[j] = int32(i)
			continue
		}
		f, err := parquetFloat(x)
		if err == nil {
			err = checkFloat32(f)
		}
		if err != nil {
			return value{}, fmt.Errorf("element %d: %w", j, err)
		}
		v.floats[j] = float32(f)
	}
	return v, nil
}
