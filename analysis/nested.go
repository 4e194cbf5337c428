package analysis

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// The driver hands over nested values in Go forms that lose what DuckDB prints: a STRUCT is a
// Go map (its field order lost), a MAP an OrderedMap whose String is Go syntax, a UNION a tag and
// a value, a BLOB raw bytes (binary on a terminal, replaced by U+FFFD in JSON). Query turns them,
// guided by the column's type, into the values below, which Write renders as DuckDB does:
// {'z': 1, 'a': x} for a STRUCT, {k=v} for a MAP, \xAA for a byte that is not printable ASCII,
// NULL inside a nested value; and, in JSON, an object in field or key order.

// structValue is a STRUCT row value, fields in the type's order.
type structValue []namedValue

// mapValue is a MAP row value, entries in the map's order.
type mapValue []keyValue

// blobValue is a BLOB (or a BLOB nested in another value).
type blobValue []byte

type namedValue struct {
	name string
	val  any
}

type keyValue struct{ key, val any }

// unionValue is a UNION's member value: DuckDB prints it inside a nested value as is, unquoted.
type unionValue struct{ v any }

// sqlType is a parsed DuckDB type name: enough of it to walk nested values.
type sqlType struct {
	name   string     // the scalar type name ("UUID", "DECIMAL(2,1)"), or STRUCT, MAP, UNION, LIST
	fields []sqlField // STRUCT and UNION members, in order
	elem   *sqlType   // LIST element
	key    *sqlType   // MAP key
	val    *sqlType   // MAP value
}

type sqlField struct {
	name string
	typ  *sqlType
}

// parseType parses a type name as the driver reports it: STRUCT("a" INTEGER, "b" VARCHAR[]),
// MAP(VARCHAR, DECIMAL(2,1)), UNION("num" INTEGER), T[] and T[3]. A name it does not know is a
// scalar of that name.
func parseType(s string) *sqlType {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "]") {
		if i := strings.LastIndex(s, "["); i > 0 && depthAt(s, i) == 0 {
			return &sqlType{name: "LIST", elem: parseType(s[:i])}
		}
	}
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") {
		return &sqlType{name: s}
	}
	kind, args := s[:open], splitTopLevel(s[open+1:len(s)-1])
	switch kind {
	case "STRUCT", "UNION":
		t := &sqlType{name: kind}
		for _, a := range args {
			name, rest := fieldName(a)
			t.fields = append(t.fields, sqlField{name: name, typ: parseType(rest)})
		}
		return t
	case "MAP":
		if len(args) == 2 {
			return &sqlType{name: kind, key: parseType(args[0]), val: parseType(args[1])}
		}
	}
	return &sqlType{name: s}
}

// scanTopLevel calls f with the index of every byte of s outside double quotes (a quoted name
// may hold parentheses and commas) and the parenthesis depth before it; f returning false
// stops the scan.
func scanTopLevel(s string, f func(j, depth int) bool) {
	depth, quoted := 0, false
	for j := 0; j < len(s); j++ {
		c := s[j]
		if c == '"' {
			quoted = !quoted
			continue
		}
		if quoted {
			continue
		}
		if !f(j, depth) {
			return
		}
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		}
	}
}

// depthAt is the parenthesis depth of s at byte i, or -1 if i is inside quotes.
func depthAt(s string, i int) int {
	at := -1
	scanTopLevel(s, func(j, depth int) bool {
		if j == i {
			at = depth
		}
		return j < i
	})
	return at
}

// splitTopLevel splits s at the commas outside parentheses and quotes.
func splitTopLevel(s string) []string {
	var out []string
	start := 0
	scanTopLevel(s, func(j, depth int) bool {
		if s[j] == ',' && depth == 0 {
			out = append(out, strings.TrimSpace(s[start:j]))
			start = j + 1
		}
		return true
	})
	return append(out, strings.TrimSpace(s[start:]))
}

// fieldName splits `"na""me" TYPE` (or `name TYPE`) into the unquoted name and the type.
func fieldName(s string) (name, rest string) {
	if !strings.HasPrefix(s, `"`) {
		name, rest, _ = strings.Cut(s, " ")
		return name, rest
	}
	var b strings.Builder
	for j := 1; j < len(s); j++ {
		if s[j] == '"' {
			if j+1 < len(s) && s[j+1] == '"' {
				b.WriteByte('"')
				j++
				continue
			}
			return b.String(), strings.TrimSpace(s[j+1:])
		}
		b.WriteByte(s[j])
	}
	return b.String(), ""
}

// fromDriverNested converts a nested value (or a BLOB) of type t into the forms above; other
// values go through fromDriver.
func fromDriverNested(v any, t *sqlType) any {
	if v == nil {
		return nil
	}
	switch t.name {
	case "BLOB":
		if b, ok := v.([]byte); ok {
			return blobValue(b)
		}
	case "LIST":
		if l, ok := v.([]any); ok {
			out := make([]any, len(l))
			for i, e := range l {
				out[i] = fromDriverNested(e, t.elem)
			}
			return out
		}
	case "STRUCT":
		if m, ok := v.(map[string]any); ok {
			out := make(structValue, 0, len(m))
			for _, f := range t.fields {
				out = append(out, namedValue{f.name, fromDriverNested(m[f.name], f.typ)})
			}
			if len(out) == len(m) {
				return out
			}
		}
	case "MAP":
		if m, ok := v.(duckdb.OrderedMap); ok {
			keys, vals := m.Keys(), m.Values()
			out := make(mapValue, len(keys))
			for i := range keys {
				out[i] = keyValue{fromDriverNested(keys[i], t.key), fromDriverNested(vals[i], t.val)}
			}
			return out
		}
	case "UNION":
		if u, ok := v.(duckdb.Union); ok {
			for _, f := range t.fields {
				if f.name == u.Tag {
					return unionValue{fromDriverNested(u.Value, f.typ)}
				}
			}
			return u.Value
		}
	}
	return fromDriver(v, t.name)
}

// formatBlob renders bytes as DuckDB does: printable ASCII as is, every other byte (and the
// backslash) as \xHH.
func formatBlob(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		if c >= 0x20 && c < 0x7f && c != '\\' {
			s.WriteByte(c)
		} else {
			fmt.Fprintf(&s, `\x%02X`, c)
		}
	}
	return s.String()
}

// formatNested renders an element of a nested value as DuckDB does: NULL for a null, a nested
// value as is, and the text of any other value quoted when it would otherwise be ambiguous.
func formatNested(v any, short bool) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []any, structValue, mapValue:
		return formatValue(v, short)
	case unionValue: // a member's text is not quoted, as DuckDB does not
		switch m := x.v.(type) {
		case nil:
			return "NULL"
		case float64, float32:
			return formatNested(m, short)
		}
		return formatValue(x.v, short)
	case float64:
		return formatFloat(x, 64)
	case float32:
		return formatFloat(float64(x), 32)
	}
	return quoteNested(formatValue(v, short), false)
}

// formatFloat writes a DOUBLE (bits 64) or FLOAT (32) inside a nested value as DuckDB does:
// the shortest digits that read back as the same number, in plain notation with at least one
// decimal ("1.0", "100.0", "0.0001") for exponents -4 to 15 and in e-notation with two or more
// exponent digits otherwise ("1e+16", "1e-05"), and nan, inf, -inf.
func formatFloat(x float64, bits int) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(x, 'e', -1, bits)
	if exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:]); exp < -4 || exp >= 16 {
		return e
	}
	f := strconv.FormatFloat(x, 'f', -1, bits)
	if !strings.Contains(f, ".") {
		f += ".0"
	}
	return f
}

// quoteNested quotes the text of a scalar inside a nested value as DuckDB's cast to VARCHAR
// does (NestedToVarcharCast): when it is empty, is NULL in any case, starts or ends with white
// space, or holds one of "'(),:=[]{} (always, for a STRUCT's field name), with ' and \ escaped
// by a backslash.
func quoteNested(s string, always bool) string {
	space := func(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }
	if !always && s != "" && !strings.EqualFold(s, "null") && !space(s[0]) &&
		!(len(s) >= 2 && space(s[len(s)-1])) && !strings.ContainsAny(s, `"'(),:=[]{}`) {
		return s
	}
	return "'" + nestedEscaper.Replace(s) + "'"
}

// nestedEscaper escapes ' and \ inside a quoted nested text, as DuckDB does.
var nestedEscaper = strings.NewReplacer(`\`, `\\`, `'`, `\'`)
