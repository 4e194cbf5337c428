package importer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// readJSONL decodes one JSON object per line. Blank lines are skipped; unknown fields are
// ignored; null is the same as an absent field; a field given twice on a line is an error;
// a leading UTF-8 byte order mark is skipped. Problems name the line (from 1).
func readJSONL(ctx context.Context, data []byte, cols []column, p *problems, c *checker) ([]rec, error) {
	var recs []rec
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	for line := 1; len(data) > 0; line++ {
		var b []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			b, data = data[:i], data[i+1:]
		} else {
			b, data = data, nil
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		m, err := decodeObject(b)
		if err != nil {
			p.add(line, "%v", err)
			continue
		}
		r := rec{pos: line}
		for i := range cols {
			col := &cols[i]
			raw, ok := m[col.name]
			if !ok || raw == nil {
				if col.required {
					p.add(line, "missing required field %q", col.name)
					r.missing = true
				}
				continue
			}
			v, err := jsonValue(col.kind, raw)
			if err == nil {
				err = assign(&r, col, &v)
			}
			if err != nil {
				p.add(line, "field %q: %v", col.name, err)
				if col.required {
					r.missing = true
				}
			}
		}
		if r.missing {
			continue
		}
		for _, msg := range finish(&r) {
			p.add(line, "%s", msg)
		}
		c.add(&r)
		recs = append(recs, r)
	}
	return recs, nil
}

// decodeObject decodes one line's object field by field, so that a field given twice
// (`{"uid":"u","uid":"v"}`, which encoding/json would silently resolve to the last) is an
// error rather than a guess. Values are decoded whole, with numbers as json.Number.
func decodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, invalidJSON(b, err)
	}
	if tok == nil {
		return nil, errors.New("want a JSON object, got null")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("invalid JSON: want an object, got %s", describeToken(tok))
	}
	m := make(map[string]any)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalidJSON(b, err)
		}
		key := tok.(string) // inside an object the decoder yields only string keys
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, invalidJSON(b, err)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("field %s is given twice", quote(key))
		}
		m[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, invalidJSON(b, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: more than one value on the line")
	}
	return m, nil
}

func invalidJSON(b []byte, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && (bytes.Contains(b, []byte("NaN")) || bytes.Contains(b, []byte("Infinity"))) {
		return fmt.Errorf("invalid JSON: %v (NaN and Infinity are not JSON, and a non-finite value cannot be imported)", err)
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// describeToken names the first token of a line that is not an object.
func describeToken(tok json.Token) string {
	switch x := tok.(type) {
	case json.Delim:
		if x == '[' {
			return "an array"
		}
		return fmt.Sprintf("%q", string(x))
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// describe names a decoded JSON value for an error message.
func describe(raw any) string {
	switch x := raw.(type) {
	case string:
		if len(x) > 40 {
			return fmt.Sprintf("string %q…", x[:40])
		}
		return fmt.Sprintf("string %q", x)
	case json.Number:
		return "number " + x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", raw)
}

func jsonValue(k kind, raw any) (value, error) {
	var v value
	switch k {
	case kString:
		s, ok := raw.(string)
		if !ok {
			return v, fmt.Errorf("want a string, got %s", describe(raw))
		}
		v.s = s
	case kID:
		switch x := raw.(type) {
		case string:
			v.s = x
		case json.Number:
			i, err := strconv.ParseInt(x.String(), 10, 64)
			if err != nil {
				return v, fmt.Errorf("want a string or an integer, got %s", describe(raw))
			}
			v.s = strconv.FormatInt(i, 10)
		default:
			return v, fmt.Errorf("want a string or an integer, got %s", describe(raw))
		}
	case kInt32, kInt64:
		i, err := jsonInt(raw, k)
		if err != nil {
			return v, err
		}
		v.i = i
	case kFloat:
		f, err := jsonFloat(raw)
		if err != nil {
			return v, err
		}
		v.f = f
	case kBool:
		b, ok := raw.(bool)
		if !ok {
			return v, fmt.Errorf("want true or false, got %s", describe(raw))
		}
		v.b = b
	case kIntList:
		xs, ok := raw.([]any)
		if !ok {
			return v, fmt.Errorf("want a list of integers, got %s", describe(raw))
		}
		v.ints = make([]int32, len(xs))
		for j, x := range xs {
			i, err := jsonInt(x, kIntList)
			if err != nil {
				return value{}, fmt.Errorf("element %d: %w", j, err)
			}
			v.ints[j] = int32(i)
		}
	case kFloatList:
		xs, ok := raw.([]any)
		if !ok {
			return v, fmt.Errorf("want a list of numbers, got %s", describe(raw))
		}
		v.floats = make([]float32, len(xs))
		for j, x := range xs {
			f, err := jsonFloat(x)
			if err == nil {
				err = checkFloat32(f)
			}
			if err != nil {
				return value{}, fmt.Errorf("element %d: %w", j, err)
			}
			v.floats[j] = float32(f)
		}
	}
	return v, nil
}

// jsonInt accepts integers, also written with a fraction of zero or an exponent (3.0, 1e3).
func jsonInt(raw any, k kind) (int64, error) {
	n, ok := raw.(json.Number)
	if !ok {
		return 0, fmt.Errorf("want an integer, got %s", describe(raw))
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(n.String(), 64)
		if ferr != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, fmt.Errorf("want an integer, got %s", describe(raw))
		}
		i = int64(f)
	}
	return i, checkInt(k, i)
}

// jsonFloat accepts numbers. JSON has no NaN or Infinity, but a huge exponent overflows and a
// string may spell them: both are reported as not finite.
func jsonFloat(raw any) (float64, error) {
	switch x := raw.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(x.String(), 64)
		if err != nil {
			return 0, fmt.Errorf("%s is not finite (overflows float64)", x)
		}
		return f, nil
	case string:
		if f, err := strconv.ParseFloat(x, 64); (err == nil || errors.Is(err, strconv.ErrRange)) && checkFinite(f) != nil {
			return 0, fmt.Errorf("%s is not finite", excerpt.Quote(x))
		}
	}
	return 0, fmt.Errorf("want a number, got %s", describe(raw))
}
