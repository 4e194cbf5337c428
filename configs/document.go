package configs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/drmas-dev/drmas/commit"
)

// Redacted returns a copy of c with secrets replaced by "<redacted>" (or left empty if unset).
func (c *Config) Redacted() *Config {
	r := *c
	if r.S3.AccessKey != "" {
		r.S3.AccessKey = "<redacted>"
	}
	if r.S3.SecretKey != "" {
		r.S3.SecretKey = "<redacted>"
	}
	return &r
}

// durationType is the type of the config's durations (timeouts, waits), which a file writes
// with a unit.
var durationType = reflect.TypeOf(time.Duration(0))

// exactFloat is where float64 stops holding every integer: a config file's integer from it on
// must be a quoted string in JSON, whose numbers are float64.
const exactFloat = 1 << 53

// Document returns c as a config file of format ("yaml" or "json") holds it: a tree of maps
// (keys as config files spell them), with every duration written with its unit ("2m0s"; JSON
// encoding gives nanoseconds, which Load refuses as a duration) and, in JSON, the integers a
// float64 cannot hold quoted (as Load asks), so that what `drmas config show` prints loads
// back as c.
func (c *Config) Document(format string) (map[string]any, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	doc := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // exact integers (a seed above 2^53)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	durationsAsText(doc, reflect.TypeOf(*c))
	return numbersAsValues(doc, format == "json").(map[string]any), nil
}

// numbersAsValues replaces the json.Numbers of v by int64, uint64 or float64 values, which YAML
// and JSON write as numbers, not as quoted strings; with quoteInexact, an integer a float64
// cannot hold stays a string of its digits.
func numbersAsValues(v any, quoteInexact bool) any {
	switch x := v.(type) {
	case json.Number:
		s := x.String()
		if quoteInexact && strings.Trim(strings.TrimPrefix(s, "-"), "0123456789") == "" {
			if f, err := x.Float64(); err == nil && math.Abs(f) >= exactFloat {
				return s
			}
		}
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
	case map[string]any:
		for k, e := range x {
			x[k] = numbersAsValues(e, quoteInexact)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersAsValues(e, quoteInexact)
		}
	}
	return v
}

// durationsAsText rewrites the durations of m, the JSON form of a value of struct type t.
func durationsAsText(m map[string]any, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch v := m[key]; {
		case v == nil:
		case f.Type == durationType:
			if n, ok := v.(json.Number); ok {
				if ns, err := n.Int64(); err == nil {
					m[key] = time.Duration(ns).String()
				}
			}
		case f.Type.Kind() == reflect.Struct:
			if sub, ok := v.(map[string]any); ok {
				durationsAsText(sub, f.Type)
			}
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			if sub, ok := v.(map[string]any); ok {
				for _, e := range sub {
					if em, ok := e.(map[string]any); ok {
						durationsAsText(em, f.Type.Elem())
					}
				}
			}
		}
	}
}

// Digest is a stable sha256 of the JSON encoding of any config section (secrets are never
// part of what stages digest: pass sections, not the S3 settings). A section holding NaN or
// infinite floats, which JSON cannot encode (Validate rejects them, but a Config built in code
// may hold them), is digested from its %+v form instead: Digest never fails on values.
func Digest(section any) string {
	data, err := json.Marshal(section)
	var unsupported *json.UnsupportedValueError
	if errors.As(err, &unsupported) {
		data, err = fmt.Appendf(nil, "%T %+v", section, section), nil
	}
	if err != nil {
		panic(fmt.Sprintf("configs: digest of unencodable section %T: %v", section, err)) // programming error: a type JSON cannot encode
	}
	return commit.Digest(data)
}
