package analysis

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duckdb/duckdb-go/v2"
)

// Table is a query result.
type Table struct {
	Columns []string
	Rows    [][]any
}

// Formats are the output formats of Write.
var Formats = []string{"table", "csv", "json"}

// Write renders t as an aligned text table, CSV or JSON (an array of objects, columns in order).
func (t *Table) Write(w io.Writer, format string) error {
	switch format {
	case "", "table":
		return t.WriteText(w)
	case "csv":
		return t.WriteCSV(w)
	case "json":
		return t.WriteJSON(w)
	}
	return fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
}

// Col returns the index of a column, or -1.
func (t *Table) Col(name string) int {
	for i, c := range t.Columns {
		if c == name {
			return i
		}
	}
	return -1
}

// Float returns row r of column name as a float64 (NaN if null or not numeric).
func (t *Table) Float(r int, name string) float64 {
	i := t.Col(name)
	if i < 0 {
		return math.NaN()
	}
	f, ok := toFloat(t.Rows[r][i])
	if !ok {
		return math.NaN()
	}
	return f
}

// String returns row r of column name formatted for people ("" if null).
func (t *Table) String(r int, name string) string {
	i := t.Col(name)
	if i < 0 || t.Rows[r][i] == nil {
		return ""
	}
	return formatValue(t.Rows[r][i], true)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case int16:
		return float64(x), true
	case int8:
		return float64(x), true
	case int:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint8:
		return float64(x), true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	case duckdb.Decimal:
		return x.Float64(), true
	}
	return 0, false
}

func isNumeric(v any) bool {
	_, ok := toFloat(v)
	return ok
}

// formatValue renders a value; short uses 6 significant digits for floats.
func formatValue(v any, short bool) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		if short {
			return strconv.FormatFloat(x, 'g', 6, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		if short {
			return strconv.FormatFloat(float64(x), 'g', 6, 32)
		}
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case duckdb.Decimal:
		return formatDecimal(x) // exact, with its scale's digits, as DuckDB prints it
	case duckdb.Interval:
		return formatInterval(x)
	case blobValue:
		return formatBlob(x)
	case unionValue:
		return formatValue(x.v, short)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatNested(e, short)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case structValue:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = quoteNested(f.name, true) + ": " + formatNested(f.val, short)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case mapValue:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatNested(e.key, short) + "=" + formatNested(e.val, short)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// WriteText writes an aligned table: numbers right-aligned, text left-aligned.
func (t *Table) WriteText(w io.Writer) error {
	cells := make([][]string, len(t.Rows))
	width := make([]int, len(t.Columns))
	numeric := make([]bool, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = utf8.RuneCountInString(c)
		numeric[i] = len(t.Rows) > 0
	}
	for r, row := range t.Rows {
		cells[r] = make([]string, len(row))
		for i, v := range row {
			s := formatValue(v, true)
			cells[r][i] = s
			width[i] = max(width[i], utf8.RuneCountInString(s))
			if v != nil && !isNumeric(v) {
				numeric[i] = false
			}
		}
	}
	var b strings.Builder
	line := func(vals []string) {
		for i, s := range vals {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(s))
			if numeric[i] {
				b.WriteString(pad + s)
			} else if i == len(vals)-1 {
				b.WriteString(s)
			} else {
				b.WriteString(s + pad)
			}
		}
		b.WriteString("\n")
	}
	line(t.Columns)
	rule := make([]string, len(t.Columns))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
	}
	line(rule)
	for _, row := range cells {
		line(row)
	}
	fmt.Fprintf(&b, "(%d rows)\n", len(t.Rows))
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCSV writes a header and one record per row, floats at full precision, nulls empty.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Columns); err != nil {
		return err
	}
	rec := make([]string, len(t.Columns))
	for _, row := range t.Rows {
		for i, v := range row {
			rec[i] = formatValue(v, false)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes an array of objects with keys in column order; NaN and ±Inf become null.
func (t *Table) WriteJSON(w io.Writer) error {
	var b strings.Builder
	b.WriteString("[")
	for r, row := range t.Rows {
		if r > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  {")
		for i, v := range row {
			if i > 0 {
				b.WriteString(", ")
			}
			k, _ := json.Marshal(t.Columns[i])
			b.Write(k)
			b.WriteString(": ")
			val, err := json.Marshal(jsonValue(v))
			if err != nil {
				return fmt.Errorf("column %s: %w", t.Columns[i], err)
			}
			b.Write(val)
		}
		b.WriteString("}")
	}
	if len(t.Rows) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	case []byte:
		return string(x)
	case *big.Int:
		return json.Number(x.String())
	case duckdb.Decimal:
		return json.Number(formatDecimal(x)) // exact; a struct of width, scale and unscaled value otherwise
	case duckdb.Interval:
		return formatInterval(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case blobValue:
		return formatBlob(x)
	case unionValue:
		return jsonValue(x.v)
	case duckdb.Bit: // a BIT inside a nested value (a top-level one is its text already)
		return x.String()
	case structValue:
		o := make(orderedObject, len(x))
		for i, f := range x {
			o[i] = namedValue{f.name, jsonValue(f.val)}
		}
		return o
	case mapValue:
		o := make(orderedObject, len(x))
		for i, e := range x {
			k, ok := e.key.(string)
			if !ok {
				k = formatValue(e.key, false) // a key is never NULL; JSON quotes it already
			}
			o[i] = namedValue{k, jsonValue(e.val)}
		}
		return o
	}
	return v
}

// orderedObject is a JSON object whose keys keep their order (a STRUCT's fields, a MAP's keys).
type orderedObject []namedValue

func (o orderedObject) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(f.name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.val)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// formatInterval renders an INTERVAL as DuckDB does: "1 year 2 months 3 days 04:05:06.5".
func formatInterval(iv duckdb.Interval) string {
	var parts []string
	unit := func(n int64, name string) {
		if n == 0 {
			return
		}
		if n != 1 && n != -1 {
			name += "s"
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, name))
	}
	unit(int64(iv.Months/12), "year")
	unit(int64(iv.Months%12), "month")
	unit(int64(iv.Days), "day")
	if us := iv.Micros; us != 0 || len(parts) == 0 {
		sign := ""
		if us < 0 {
			sign, us = "-", -us
		}
		t := fmt.Sprintf("%s%02d:%02d:%02d", sign, us/3_600_000_000, us/60_000_000%60, us/1_000_000%60)
		if frac := us % 1_000_000; frac != 0 {
			t += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, " ")
}

// formatDecimal renders a DECIMAL exactly, with as many fractional digits as its scale (1.50 for
// 1.5 as DECIMAL(4,2)), as DuckDB prints it.
func formatDecimal(d duckdb.Decimal) string {
	if d.Value == nil {
		return "0"
	}
	digits := new(big.Int).Abs(d.Value).String()
	sign := ""
	if d.Value.Sign() < 0 {
		sign = "-"
	}
	scale := int(d.Scale)
	if scale == 0 {
		return sign + digits
	}
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
}
