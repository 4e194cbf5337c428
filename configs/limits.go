package configs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
	"go.yaml.in/yaml/v3"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// The caps on what a config may be. A config file is read by parsers whose time grows faster
// than the file (YAML's check for repeated keys compares every pair of keys of a map; viper
// looks each key up by every prefix of its path): under these caps, checked on one linear pass
// before they run, that time stays small. Each cap is far above what a real config needs
// (docs/operations.md, "Reliability: bounded inputs", has the figures).
const (
	// MaxFileBytes is the largest config file.
	MaxFileBytes = 256 << 10
	// MaxEntries is how many keys and list entries a config file may hold, in all.
	MaxEntries = 2000
	// MaxDepth is how deep a config file's maps and lists may nest (models.<name>.openai.endpoint
	// is 4).
	MaxDepth = 16
	// MaxKeyBytes is the longest key (a model's or an agent's name included).
	MaxKeyBytes = 256
	// MaxValueBytes is the longest value of one key: a name, a URL, a path.
	MaxValueBytes = 4096
)

// LimitError is a config (a file, or one DRMAS_* variable or flag) over one of the caps. It is
// reported alone, at once: nothing past the cap is parsed.
type LimitError struct {
	Source string // the file, or the variable or flag
	What   string // "bytes", "keys and list entries", "levels of nesting", "bytes in a key", "bytes in a value"
	Max    int64  // the cap
	Got    int64  // what the input has, or Max+1 where counting stopped at the cap
	At     string // the key path where the cap was passed; "" for the whole input
}

func (e *LimitError) Error() string {
	got := fmt.Sprint(e.Got)
	if e.Got == e.Max+1 {
		got = fmt.Sprintf("more than %d", e.Max)
	}
	at := ""
	if e.At != "" {
		at = " at " + excerpt.Cut(e.At)
	}
	return fmt.Sprintf("config %s: %s %s%s, over the limit of %d: %s", e.Source, got, e.What, at, e.Max, limitAdvice[e.What])
}

// limitAdvice says what to change for each cap.
var limitAdvice = map[string]string{
	"bytes":                 "a drmas config is a few KB; give a config file, not data",
	"keys and list entries": "a drmas config has under 100; remove the keys drmas does not read",
	"levels of nesting":     "drmas's keys nest at most 4 deep; remove the nesting drmas does not read",
	"bytes in a key":        "shorten the key or the name",
	"bytes in a value":      "shorten the value: names, URLs and paths are short",
}

// readCapped reads a config file of at most MaxFileBytes, refusing a larger one before reading
// it.
func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFileBytes {
		return nil, &LimitError{Source: path, What: "bytes", Max: MaxFileBytes, Got: fi.Size()}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1)) // a pipe or a device has no size
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, &LimitError{Source: path, What: "bytes", Max: MaxFileBytes, Got: MaxFileBytes + 1}
	}
	return data, nil
}

// shape counts what a config file holds, stopping at the first cap passed.
type shape struct {
	source  string
	entries int64
	path    []string // the keys down to where the walk is, for the message
}

func (s *shape) at() string { return strings.Join(s.path, ".") }

// entry counts one key or list entry at depth (1 for a top-level key).
func (s *shape) entry(depth int) error {
	s.entries++
	if s.entries > MaxEntries {
		return &LimitError{Source: s.source, What: "keys and list entries", Max: MaxEntries, Got: MaxEntries + 1}
	}
	if depth > MaxDepth {
		return &LimitError{Source: s.source, What: "levels of nesting", Max: MaxDepth, Got: MaxDepth + 1, At: s.at()}
	}
	return nil
}

func (s *shape) key(k string) error {
	if len(k) > MaxKeyBytes {
		return &LimitError{Source: s.source, What: "bytes in a key", Max: MaxKeyBytes, Got: int64(len(k)), At: s.at() + "." + k}
	}
	return nil
}

func (s *shape) value(v string) error {
	if len(v) > MaxValueBytes {
		return &LimitError{Source: s.source, What: "bytes in a value", Max: MaxValueBytes, Got: int64(len(v)), At: s.at()}
	}
	return nil
}

// checkShape refuses a config file (of format, already within MaxFileBytes) over a cap, in one
// pass that stops at the cap. A file that does not parse passes: the reader reports its syntax.
func checkShape(data []byte, format, source string) error {
	s := &shape{source: source}
	switch format {
	case "yaml", "yml":
		var doc yaml.Node
		if yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc) != nil {
			return nil
		}
		return s.yaml(&doc, 0)
	case "json":
		return s.json(json.NewDecoder(bytes.NewReader(data)), 0)
	case "toml":
		return s.toml(data)
	}
	return nil
}

// yaml walks a YAML node at depth. An alias is walked as the value it stands for, as decoding
// expands it: a few aliases of aliases stand for millions of keys, stopped at MaxEntries.
func (s *shape) yaml(n *yaml.Node, depth int) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := s.yaml(c, depth); err != nil {
				return err
			}
		}
	case yaml.AliasNode:
		if n.Alias != nil {
			return s.yaml(n.Alias, depth)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if err := s.key(k); err != nil {
				return err
			}
			s.path = append(s.path, k)
			err := s.entry(depth + 1)
			if err == nil {
				err = s.yaml(n.Content[i+1], depth+1)
			}
			s.path = s.path[:len(s.path)-1]
			if err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			s.path = append(s.path, fmt.Sprintf("[%d]", i))
			err := s.entry(depth + 1)
			if err == nil {
				err = s.yaml(c, depth+1)
			}
			s.path = s.path[:len(s.path)-1]
			if err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		return s.value(n.Value)
	}
	return nil
}

// json walks the JSON value dec reads next, at depth; malformed JSON ends the walk, for the
// reader to report.
func (s *shape) json(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	switch tok {
	case json.Delim('{'), json.Delim('['):
		object := tok == json.Delim('{')
		for i := 0; dec.More(); i++ {
			step := fmt.Sprintf("[%d]", i)
			if object {
				kt, err := dec.Token()
				k, ok := kt.(string)
				if err != nil || !ok {
					return nil
				}
				if err := s.key(k); err != nil {
					return err
				}
				step = k
			}
			s.path = append(s.path, step)
			err := s.entry(depth + 1)
			if err == nil {
				err = s.json(dec, depth+1)
			}
			s.path = s.path[:len(s.path)-1]
			if err != nil {
				return err
			}
		}
		_, _ = dec.Token()
	default:
		if v, ok := tok.(string); ok {
			return s.value(v)
		}
	}
	return nil
}

// toml walks a TOML document with go-toml's parser, which builds no map: the decoder's own
// bookkeeping of the keys it has seen is what grows faster than the file.
func (s *shape) toml(data []byte) error {
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			s.path = s.path[:0]
			depth := 0
			for it := e.Key(); it.Next(); depth++ {
				if err := s.tomlKey(it.Node(), depth); err != nil {
					return err
				}
			}
			if e.Kind == unstable.ArrayTable { // each [[x]] is one more entry of x, one level down
				s.path = append(s.path, "[]")
				if err := s.entry(depth + 1); err != nil {
					return err
				}
			}
		case unstable.KeyValue:
			if err := s.tomlKeyValue(e, len(s.path)); err != nil {
				return err
			}
		}
	}
	return nil
}

// tomlKey counts one part of a dotted key or a table header, at depth.
func (s *shape) tomlKey(k *unstable.Node, depth int) error {
	name := string(k.Data)
	if err := s.key(name); err != nil {
		return err
	}
	s.path = append(s.path, name)
	return s.entry(depth + 1)
}

// tomlKeyValue counts a key = value line (or an inline table's entry) below depth.
func (s *shape) tomlKeyValue(e *unstable.Node, depth int) error {
	base := len(s.path)
	defer func() { s.path = s.path[:base] }()
	d := depth
	for it := e.Key(); it.Next(); d++ {
		if err := s.tomlKey(it.Node(), d); err != nil {
			return err
		}
	}
	return s.tomlValue(e.Value(), d)
}

// tomlValue counts a value at depth: an array's entries and an inline table's keys one level
// down.
func (s *shape) tomlValue(v *unstable.Node, depth int) error {
	switch v.Kind {
	case unstable.Array:
		for it := v.Children(); it.Next(); {
			s.path = append(s.path, "[]")
			err := s.entry(depth + 1)
			if err == nil {
				err = s.tomlValue(it.Node(), depth+1)
			}
			s.path = s.path[:len(s.path)-1]
			if err != nil {
				return err
			}
		}
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			if err := s.tomlKeyValue(it.Node(), depth); err != nil {
				return err
			}
		}
	case unstable.String:
		return s.value(string(v.Data))
	}
	return nil
}

// checkOverrideLength refuses a DRMAS_* variable's or a flag's value over MaxValueBytes.
func checkOverrideLength(source, val string) error {
	if len(val) > MaxValueBytes {
		return &LimitError{Source: source, What: "bytes in a value", Max: MaxValueBytes, Got: int64(len(val))}
	}
	return nil
}
