package configs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// checkKeys reports every key of m that t has no field for, as a dotted path (keys), and every
// value that decoding would silently change (types, checkType): m holds what a config
// file set, as its parser typed it.
func checkKeys(m map[string]any, t reflect.Type, prefix string, bad map[string]reflect.Type) (keys, types error) {
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag := f.Tag.Get("mapstructure"); tag != "" && tag != "-" {
			fields[tag] = f.Type
			names = append(names, tag)
		}
	}
	keyNames := make([]string, 0, len(m))
	for k := range m {
		keyNames = append(keyNames, k)
	}
	sort.Strings(keyNames)
	var kerrs, terrs []error
	add := func(k, ty error) { kerrs, terrs = append(kerrs, k), append(terrs, ty) }
	for _, k := range keyNames {
		ft, ok := fields[k]
		if !ok {
			hint := ""
			if c := suggestKey(k, names); c != "" {
				hint = fmt.Sprintf(" (did you mean %s%s?)", prefix, c)
			}
			kerrs = append(kerrs, fmt.Errorf("unknown key %s%s%s", prefix, k, hint))
			continue
		}
		sub, isMap := m[k].(map[string]any)
		switch {
		case ft.Kind() == reflect.Struct && isMap:
			add(checkKeys(sub, ft, prefix+k+".", bad))
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct && isMap:
			names := make([]string, 0, len(sub))
			for name := range sub {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				if entry, ok := sub[name].(map[string]any); ok {
					add(checkKeys(entry, ft.Elem(), prefix+k+"."+name+".", bad))
				}
			}
		case ft.Kind() != reflect.Struct && ft.Kind() != reflect.Map:
			if _, reported := bad[prefix+k]; reported {
				bad[prefix+k] = ft
				continue
			}
			if err := checkType(prefix+k, m[k], ft); err != nil {
				terrs = append(terrs, err)
				bad[prefix+k] = ft
			}
		}
	}
	return errors.Join(kerrs...), errors.Join(terrs...)
}

// checkType reports a value of a config file that decoding into a field of type t would
// silently change or drop (mapstructure converts weakly, for the strings of DRMAS_* variables
// and flags): no value (the default would stay), a fraction, a negative number, a boolean or an
// out-of-range number for an integer, a boolean for a number or a string, a number for a
// boolean, and a bare number for a duration (it would be nanoseconds). Strings are checked by
// checkString.
func checkType(key string, val any, t reflect.Type) error {
	rv := reflect.ValueOf(val)
	isBool := rv.Kind() == reflect.Bool
	var num float64 // val as a number, when it is one
	isNum := true
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		num = float64(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		num = float64(rv.Uint())
	case reflect.Float32, reflect.Float64:
		num = rv.Float()
	default:
		isNum = false
	}
	switch k := t.Kind(); {
	case t == durationType:
		if isBool || isNum && num != 0 {
			return fmt.Errorf("%s: %v, want a duration with its unit, e.g. 30s or 2m (a bare number would be nanoseconds)", key, val)
		}
	case k >= reflect.Int && k <= reflect.Uint64:
		unsigned := k >= reflect.Uint
		switch {
		case isBool:
			return fmt.Errorf("%s: %v, want an integer", key, val)
		case !isNum:
		case num != math.Trunc(num): // also NaN and ±Inf
			return fmt.Errorf("%s: %v is not an integer", key, val)
		case unsigned && num < 0:
			return fmt.Errorf("%s: %v, want an integer ≥ 0", key, val)
		case rv.CanUint() && !unsigned && rv.Uint() > math.MaxInt64,
			rv.CanFloat() && (!unsigned && (num < math.MinInt64 || num >= 1<<63) || unsigned && num >= 1<<64):
			return fmt.Errorf("%s: %v is out of range", key, val)
		case rv.CanFloat() && math.Abs(num) >= exactFloat: // JSON numbers are float64: the digits are lost
			return fmt.Errorf("%s: %v is not exact as a number: quote it (\"%.0f\" or your exact digits)", key, val, num)
		}
	case k == reflect.Float32 || k == reflect.Float64:
		if isBool {
			return fmt.Errorf("%s: %v, want a number", key, val)
		}
	case k == reflect.Bool:
		if isNum {
			return fmt.Errorf("%s: %v, want true or false", key, val)
		}
	case k == reflect.String:
		if isBool || isNum { // a number is read back in its shortest form: 1.50 would be "1.5", 0x1F "31"
			return fmt.Errorf("%s: %v, want a string: quote it", key, val)
		}
	}
	if s, ok := val.(string); ok {
		if err := checkString(s, t); err != nil {
			return fmt.Errorf("%s: %s: %w", key, excerpt.Quote(s), err)
		}
	}
	return nil
}

// checkString reports a string (a DRMAS_* variable, a flag, a quoted value in a file) that the
// decoder would read as something else than a reader of the config means, for a field of type
// t. The decoder converts weakly: an empty string becomes 0 or false, an integer is parsed in
// Go syntax (010 is octal 8, 0x10 is 16, 1_0 is 10) and a number may be a hex float. So numbers
// must be plain decimal (an integer without leading zeros), and a string must not be empty
// where the field is not a string.
func checkString(s string, t reflect.Type) error {
	k := t.Kind()
	if k == reflect.String || k == reflect.Slice || k == reflect.Map || k == reflect.Struct {
		return nil
	}
	if s == "" {
		return errors.New("empty: give a value, or leave the key unset")
	}
	switch {
	case t == durationType:
		if _, err := time.ParseDuration(s); err != nil {
			return errors.New("not a duration (e.g. 30s or 2m)")
		}
	case k >= reflect.Int && k <= reflect.Uint64:
		digits := strings.TrimPrefix(s, "-")
		switch {
		case k >= reflect.Uint && digits != s:
			return errors.New("not an integer ≥ 0")
		case strings.HasPrefix(s, "+"):
			return errors.New("write it without the +")
		case digits == "" || strings.Trim(digits, "0123456789") != "":
			return errors.New("not an integer: write decimal digits, e.g. 42")
		}
		if len(digits) > 1 && digits[0] == '0' {
			return fmt.Errorf("a leading zero makes it octal: write %s", withoutLeadingZeros(s))
		}
		var err error
		if k >= reflect.Uint {
			_, err = strconv.ParseUint(s, 10, t.Bits())
		} else {
			_, err = strconv.ParseInt(s, 10, t.Bits())
		}
		if err != nil {
			return fmt.Errorf("out of range for a %d-bit integer", t.Bits())
		}
	case k == reflect.Float32 || k == reflect.Float64:
		low := strings.ToLower(s)
		_, err := strconv.ParseFloat(s, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return errors.New("out of range for a float64")
		case err != nil || strings.Contains(low, "_") || strings.Contains(low, "0x"):
			return errors.New("not a decimal number (e.g. 0.001 or 1e-3)")
		}
	case k == reflect.Bool:
		if _, err := strconv.ParseBool(s); err != nil {
			return errors.New("not true or false")
		}
	}
	return nil
}

// withoutLeadingZeros returns the decimal integer s, which may have a sign, without its
// leading zeros.
func withoutLeadingZeros(s string) string {
	digits := strings.TrimLeft(s, "+-")
	if d := strings.TrimLeft(digits, "0"); d != "" {
		return s[:len(s)-len(digits)] + d
	}
	return "0"
}

// yamlOctals reports the plain integers of a YAML document written with a leading zero: the
// YAML parser reads 010 as octal 8 (YAML 1.1's rule), where YAML 1.2 and a reader mean 10.
func yamlOctals(n *yaml.Node, path string, seen map[string]bool) []error {
	var errs []error
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			errs = append(errs, yamlOctals(c, p, seen)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			errs = append(errs, yamlOctals(n.Content[i+1], p, seen)...)
		}
	case yaml.ScalarNode:
		digits := strings.TrimLeft(n.Value, "+-")
		if n.Style == 0 && n.ShortTag() == "!!int" && len(n.Value)-len(digits) <= 1 &&
			len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0123456789_") == "" {
			seen[strings.ToLower(path)] = true
			sign, octal := n.Value[:len(n.Value)-len(digits)], strings.TrimLeft(digits, "0_")
			if octal == "" {
				octal = "0"
			}
			decimal := withoutLeadingZeros(strings.ReplaceAll(n.Value, "_", ""))
			switch t := fieldAt(reflect.TypeOf(Config{}), path); {
			case t == durationType: // a bare number is refused for a duration: say what to write
				errs = append(errs, fmt.Errorf("%s: %s is read as an octal number in YAML: write a duration with its unit, e.g. %ss", path, n.Value, decimal))
			case t != nil && t.Kind() == reflect.String:
				errs = append(errs, fmt.Errorf("%s: %s is read as an octal number in YAML: quote it (\"%s\") for the text", path, n.Value, n.Value))
			case t != nil:
				errs = append(errs, fmt.Errorf("%s: %s is read as octal in YAML: write %s (or %s0o%s for octal)", path, n.Value, decimal, sign, octal))
			default: // not a known key (reported as such): say both
				errs = append(errs, fmt.Errorf("%s: %s is read as octal in YAML: write %s (or %s0o%s for octal; quote it for text)", path, n.Value, decimal, sign, octal))
			}
		}
	}
	return errs
}

// fieldAt is the type of the value at a config file's dotted path in t ("learn.lr",
// "models.big.lr", "normalize.estimators[0]"), matching keys as the loader does (not
// case-sensitive); nil where t has no such key.
func fieldAt(t reflect.Type, path string) reflect.Type {
	for _, part := range strings.Split(path, ".") {
		key, index, _ := strings.Cut(part, "[")
		switch t.Kind() {
		case reflect.Struct:
			var next reflect.Type
			for i := 0; i < t.NumField(); i++ {
				if f := t.Field(i); strings.EqualFold(f.Tag.Get("mapstructure"), key) && key != "" {
					next = f.Type
				}
			}
			if next == nil {
				return nil
			}
			t = next
		case reflect.Map: // models.<name>, agents.<name>: any name
			t = t.Elem()
		default:
			return nil
		}
		for ; index != ""; _, index, _ = strings.Cut(index, "[") {
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

// checkRaw reports what viper's reading of a config file hides: keys of one map that differ
// only in case (viper folds keys to lower case, so all but one would silently be dropped), keys
// with no value (dropped: the default would silently stay),
// a key given twice in a JSON object (encoding/json keeps the last), and YAML documents after
// the first (viper reads only the first), and YAML integers with a leading zero (read as octal).
// YAML and TOML themselves reject a repeated key.
func checkRaw(data []byte, format string, octals map[string]bool) error {
	dec, err := viper.NewCodecRegistry().Decoder(format)
	if err != nil {
		return err
	}
	raw := map[string]any{}
	if err := dec.Decode(data, raw); err != nil {
		return err
	}
	errs := caseCollisions(raw, "")
	switch format {
	case "json":
		errs = append(errs, jsonDuplicates(json.NewDecoder(bytes.NewReader(data)), "")...)
	case "yaml", "yml":
		d := yaml.NewDecoder(bytes.NewReader(data))
		var first, second yaml.Node
		if d.Decode(&first) == nil {
			errs = append(errs, yamlOctals(&first, "", octals)...)
			if err := d.Decode(&second); !errors.Is(err, io.EOF) {
				errs = append(errs, errors.New("more than one YAML document (a --- line): drmas reads one; merge them"))
			}
		}
	}
	return errors.Join(errs...)
}

// caseCollisions reports the keys of m, and of the maps in it, that differ only in case, and
// those with no value (`lr:` or `lr: null`), which viper drops: the default would silently stay.
func caseCollisions(m map[string]any, prefix string) []error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	seen := map[string]string{}
	for _, k := range keys {
		low := strings.ToLower(k)
		if prev, ok := seen[low]; ok {
			errs = append(errs, fmt.Errorf("keys %s%s and %s%s differ only in case: keys are not case-sensitive, keep one", prefix, prev, prefix, k))
		} else {
			seen[low] = k
		}
		switch sub := m[k].(type) {
		case map[string]any:
			errs = append(errs, caseCollisions(sub, prefix+k+".")...)
		case nil:
			errs = append(errs, fmt.Errorf("%s%s has no value: give one, or remove the key", prefix, k))
		}
	}
	return errs
}

// jsonDuplicates reports the keys given twice in a JSON object of the value dec reads next;
// it reports nothing on malformed JSON, which the parser reports.
func jsonDuplicates(dec *json.Decoder, prefix string) []error {
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	var errs []error
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			k, ok := kt.(string)
			if err != nil || !ok {
				return errs
			}
			if seen[k] {
				errs = append(errs, fmt.Errorf("key %s%s is given twice: keep one", prefix, k))
			}
			seen[k] = true
			errs = append(errs, jsonDuplicates(dec, prefix+k+".")...)
		}
		_, _ = dec.Token()
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			errs = append(errs, jsonDuplicates(dec, fmt.Sprintf("%s[%d].", strings.TrimSuffix(prefix, "."), i))...)
		}
		_, _ = dec.Token()
	}
	return errs
}

// suggestKey returns the key of names that k, an unknown key, most likely means: one that
// begins with k (kl: kl_coef), else the nearest within max(2, len(k)/4) edits that keeps
// something of k (not s3 for lr: two edits, but every letter changed); "" if none.
func suggestKey(k string, names []string) string {
	if len(k) >= 2 {
		for _, n := range names {
			if strings.HasPrefix(n, k) {
				return n
			}
		}
	}
	c := Closest(k, names, max(2, len(k)/4))
	if c != "" && EditDistance(k, c) >= min(len(k), len(c)) {
		return ""
	}
	return c
}

// Closest returns the word of words nearest to s by edit distance (the first of equals), if
// within maxDist; otherwise "".
func Closest(s string, words []string, maxDist int) string {
	best, bestDist := "", maxDist+1
	for _, w := range words {
		if d := EditDistance(s, w); d < bestDist {
			best, bestDist = w, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b (bytes), for did-you-mean hints.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
