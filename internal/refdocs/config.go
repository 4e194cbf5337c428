package refdocs

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drmas-dev/drmas/configs"
)

// Key is one config key as configuration.md lists it.
type Key struct {
	Path    string // e.g. learn.lr, models.<id>.lora.r
	Type    string // string, integer, number, bool, duration, list, map
	Default string // the embedded default's value; empty inside models/agents entries
	Env     string // the DRMAS_* variable that sets it, for the fixed keys
	Doc     string // the default file's comment on the key, else the field's Go doc comment
}

// Config returns docs/configuration.md: how a config is read, every key with its type, default,
// variable and meaning, then the embedded default file verbatim. docs are the Go doc comments of
// the config fields, by package path and type name (FieldDocs reads them from the source).
func Config(docs map[string]string) []byte {
	keys := Keys(docs)
	var b bytes.Buffer
	b.WriteString(Generated)
	b.WriteString(configIntro)
	b.WriteString("| key | type | default | variable | meaning |\n|---|---|---|---|---|\n")
	for _, k := range keys {
		env := ""
		if k.Env != "" {
			env = "`" + k.Env + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Path, k.Type, cell(k.Default), env, cell(k.Doc))
	}
	b.WriteString("\n## The embedded default (`drmas config default`)\n\n```yaml\n")
	b.Write(bytes.TrimRight(configs.DefaultYAML(), "\n"))
	b.WriteString("\n```\n")
	return b.Bytes()
}

const configIntro = `# Configuration reference

Every key drmas reads, with its type, its value in the embedded default, the ` + "`DRMAS_*`" + `
variable that sets it and what it means. Precedence, highest first: command-line flags
(see [cli.md](cli.md)), ` + "`DRMAS_*`" + ` variables, the ` + "`--config`" + ` file (` + "`.yaml`" + `, ` + "`.yml`" + `, ` + "`.json`" + ` or
` + "`.toml`" + `), the embedded default. Variables set the fixed keys only: the entries of ` + "`models:`" + ` and
` + "`agents:`" + ` come from the config file, and a file that names ` + "`models:`" + ` or ` + "`agents:`" + ` replaces the
default entries rather than merging into them. Keys are not case-sensitive; unknown keys, values
of the wrong type and out-of-range values are errors naming the key and the file, all reported
before any work starts. Durations are written with a unit (` + "`30s`" + `, ` + "`2m`" + `). ` + "`drmas config show`" + `
prints the resolved config (secrets redacted) as a file that loads back as the same config.

An empty default in the models and agents entries means the key has no value until a file sets
it; for the optional keys further down a zero means "unset", and the meaning column says what
applies then.

`

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// Keys lists every key of configs.Config in declaration order, with the embedded default's
// values and comments.
func Keys(docs map[string]string) []Key {
	comments := yamlComments(configs.DefaultYAML())
	var keys []Key
	walk(reflect.ValueOf(*configs.Default()), "", true, docs, &keys)
	for i := range keys {
		if c, ok := comments[keys[i].Path]; ok {
			keys[i].Doc = c
		} else if keys[i].Doc == "" {
			keys[i].Doc = meanings[keys[i].Path]
		}
	}
	return keys
}

// walk appends the keys of struct value v under prefix; fixed is false inside map entries,
// which have neither a default nor a variable.
func walk(v reflect.Value, prefix string, fixed bool, docs map[string]string, keys *[]Key) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		doc := docOf(docs, t, f, name)
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Duration(0)):
			walk(v.Field(i), path, fixed, docs, keys)
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			walk(reflect.New(ft.Elem()).Elem(), path, false, docs, keys)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			walk(reflect.New(ft.Elem()).Elem(), path+".<"+entryName(name)+">", false, docs, keys)
		default:
			k := Key{Path: path, Type: typeName(ft), Doc: doc}
			if fixed {
				k.Default = valueText(v.Field(i))
			}
			if fixed && slices.Contains(configs.FixedKeys(), path) {
				k.Env = configs.EnvVar(path)
			}
			*keys = append(*keys, k)
		}
	}
}

// entryName is how a map section's entry is named in a key path.
func entryName(section string) string {
	switch section {
	case "agents":
		return "agent"
	case "models":
		return "id"
	}
	return "name"
}

// docOf is field f's Go doc comment with its Go name replaced by the key's name.
func docOf(docs map[string]string, t reflect.Type, f reflect.StructField, key string) string {
	d := docs[t.PkgPath()+"."+t.Name()+"."+f.Name]
	if rest, ok := strings.CutPrefix(d, f.Name+" "); ok {
		d = "`" + key + "` " + rest
	}
	return d
}

// typeName is how the table names a key's type.
func typeName(t reflect.Type) string {
	if t == reflect.TypeOf(time.Duration(0)) {
		return "duration"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "map of " + typeName(t.Key()) + " → " + typeName(t.Elem())
	}
	return t.Kind().String()
}

// valueText is v as a config file would write it, in backticks.
func valueText(v reflect.Value) string {
	if d, ok := v.Interface().(time.Duration); ok {
		return "`" + d.String() + "`"
	}
	switch v.Kind() {
	case reflect.String:
		return "`" + strconv.Quote(v.String()) + "`"
	case reflect.Float32, reflect.Float64:
		return "`" + strconv.FormatFloat(v.Float(), 'g', -1, 64) + "`"
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = strings.Trim(valueText(v.Index(i)), "`")
		}
		return "`[" + strings.Join(parts, ", ") + "]`"
	case reflect.Map:
		ks := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			ks = append(ks, fmt.Sprintf("%v: %v", k, v.MapIndex(k)))
		}
		sort.Strings(ks)
		return "`{" + strings.Join(ks, ", ") + "}`"
	}
	return fmt.Sprintf("`%v`", v.Interface())
}

// yamlComments maps each key path of a YAML file written as the default is (block mappings, two
// spaces an indent level) to its end-of-line comment, joined with the comment-only lines
// indented under it that continue it.
func yamlComments(src []byte) map[string]string {
	out := map[string]string{}
	var stack []string // key path by indent level
	last, lastIndent := "", -1
	for _, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if strings.HasPrefix(trimmed, "#") {
			if last != "" && indent > lastIndent {
				out[last] = strings.TrimSpace(out[last] + " " + strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			}
			continue
		}
		key, rest, ok := strings.Cut(trimmed, ":")
		if !ok || key == "" || strings.ContainsAny(key, " {[") {
			last = ""
			continue
		}
		level := indent / 2
		stack = append(stack[:min(level, len(stack))], key)
		last, lastIndent = strings.Join(stack, "."), indent
		if _, c, ok := strings.Cut(rest, " #"); ok {
			out[last] = strings.TrimSpace(c)
		}
	}
	return out
}
