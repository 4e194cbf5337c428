package configs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// FileFormats are the extensions (without the dot, any case) a config file may have.
var FileFormats = []string{"yaml", "yml", "json", "toml"}

// LoadOptions says where configuration comes from.
type LoadOptions struct {
	// File is a YAML, JSON or TOML config file, named by its extension (FileFormats); empty
	// means the embedded default.
	File string
	// Flags, if set, override keys: a changed flag named like a key ("store", "run", "seed",
	// "iterations", or "learn.lr") sets it.
	Flags *pflag.FlagSet
	// LookupEnv reads the environment; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Context, if set, stops the load between its steps once cancelled (Ctrl-C, SIGTERM), with
	// its error; each step is bounded by the caps of limits.go.
	Context context.Context
}

// syntaxPosition is ", line L, column C" for a JSON or TOML syntax error (YAML's name their line
// themselves), or "".
func syntaxPosition(data []byte, err error) string {
	var js *json.SyntaxError
	var tm *toml.DecodeError
	switch {
	case errors.As(err, &js) && js.Offset > 0 && js.Offset <= int64(len(data)):
		// Offset is just past the byte that failed.
		before := data[:js.Offset-1]
		line := bytes.Count(before, []byte("\n")) + 1
		col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
		return fmt.Sprintf(", line %d, column %d", line, col)
	case errors.As(err, &tm):
		row, col := tm.Position()
		return fmt.Sprintf(", line %d, column %d", row, col)
	}
	return ""
}

// Load resolves the configuration and validates it, reporting every problem at once.
func Load(o LoadOptions) (*Config, error) {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	cfg, err := load(o)
	if err != nil {
		return nil, excerpt.Lines(err, excerpt.MaxProblems) // at most MaxProblems lines, then a count
	}
	return cfg, nil
}

// load is Load without the cap on the problems listed.
func load(o LoadOptions) (*Config, error) {
	ctx := o.Context
	v := viper.New()
	octals := map[string]bool{} // keys checkRaw reported as YAML octals: reported once
	source := "(the embedded default)"
	var rawErr error
	if o.File != "" {
		source = o.File
		if fi, err := os.Stat(o.File); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("config %s is a folder: give a file in it (e.g. %s)", o.File, filepath.Join(o.File, "default.yaml"))
		}
		format := strings.ToLower(strings.TrimPrefix(filepath.Ext(o.File), "."))
		if !slices.Contains(FileFormats, format) {
			return nil, fmt.Errorf("config %s: unknown format: name the file .yaml, .yml, .json or .toml", o.File)
		}
		data, err := readCapped(o.File)
		var limit *LimitError
		if errors.As(err, &limit) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("read config %s: %w", o.File, err)
		}
		if err := checkShape(data, format, o.File); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v.SetConfigType(format)
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("read config %s%s: %w", o.File, syntaxPosition(data, err), err)
		}
		// What viper's reading hides (keys folded together, keys with no value, a JSON key given
		// twice, a second YAML document) stops the load before decoding, with the other problems.
		rawErr = checkRaw(data, format, octals)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	} else {
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(defaultYAML)); err != nil {
			return nil, fmt.Errorf("read embedded default config: %w", err)
		}
	}
	// Unknown keys are reported with every other problem, all at once; a value the decoder
	// would silently change (checkKeys) stops the load before decoding, with the other problems.
	var errs []error
	if rawErr != nil {
		errs = append(errs, fmt.Errorf("config %s: %w", source, rawErr))
	}
	badTypes := map[string]reflect.Type{} // keys whose values typeErr reports, and their fields' types
	for key := range octals {
		badTypes[key] = nil
	}
	keysErr, typeErr := checkKeys(v.AllSettings(), reflect.TypeOf(Config{}), "", badTypes)
	if keysErr != nil {
		errs = append(errs, fmt.Errorf("config %s: %w", source, keysErr))
	}
	if typeErr != nil {
		errs = append(errs, fmt.Errorf("config %s: %w", source, typeErr))
	}
	// A bad variable is named as such, not blamed on the file; the others are still applied so
	// that every problem is reported at once.
	var overrides []string
	for _, key := range FixedKeys() {
		if val, ok := o.LookupEnv(EnvVar(key)); ok {
			if err := checkOverrideLength(EnvVar(key), val); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := checkValue(key, val); err != nil {
				errs = append(errs, fmt.Errorf("%s=%s: %s: %w", EnvVar(key), excerpt.Quote(val), key, err))
				continue
			}
			v.Set(key, val)
			overrides = append(overrides, EnvVar(key))
		}
	}
	if o.Flags != nil {
		o.Flags.VisitAll(func(f *pflag.Flag) {
			if f.Changed && isFixedKey(f.Name) {
				if err := checkOverrideLength("--"+f.Name, f.Value.String()); err != nil {
					errs = append(errs, err)
					return
				}
				if err := checkValue(f.Name, f.Value.String()); err != nil {
					errs = append(errs, fmt.Errorf("--%s %s: %w", f.Name, excerpt.Quote(f.Value.String()), err))
					return
				}
				v.Set(f.Name, f.Value.String())
				overrides = append(overrides, "--"+f.Name)
			}
		})
	}
	if rawErr != nil || typeErr != nil { // the decoder's own complaints, then stop: nothing to validate
		for key, t := range badTypes { // reported already: the decoder would repeat it
			if t != nil {
				v.Set(key, reflect.Zero(t).Interface())
			}
		}
		if cfg, err := defaults(); err == nil {
			if err := v.Unmarshal(cfg); err != nil {
				errs = append(errs, fmt.Errorf("config %s: %w", source, err))
			}
		}
		return nil, errors.Join(errs...)
	}
	// What the values come from: a problem with an overridden value is not the file's.
	if len(overrides) > 0 {
		source += " as overridden by " + strings.Join(overrides, ", ")
	}
	cfg, err := defaults()
	if err != nil {
		return nil, err
	}
	if o.File != "" && v.IsSet("models") {
		cfg.Models = nil
	}
	if o.File != "" && v.IsSet("agents") {
		cfg.Agents = nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := v.Unmarshal(cfg); err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("config %s: %w", source, err))...)
	}
	// viper folds the keys of a file to lower case, so `models: {M1: …}` defines m1: fold the
	// agents' references to models the same way, or `model: M1` would name no model.
	for name, a := range cfg.Agents {
		if low := strings.ToLower(a.Model); low != a.Model {
			if _, ok := cfg.Models[low]; ok {
				a.Model = low
				cfg.Agents[name] = a
			}
		}
	}
	cfg.Dir = configDir(o.File)
	if err := cfg.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("config %s: %w", source, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// checkValue reports whether val, a string from the environment or a flag, decodes into the
// fixed key as Load decodes it, and if not says in a few words what the key wants.
func checkValue(key, val string) error {
	if err := checkString(val, fixedFields()[key].Type); err != nil {
		return err
	}
	v := viper.New()
	v.Set(key, val)
	if err := v.Unmarshal(&Config{}); err == nil {
		return nil
	}
	t := fixedFields()[key].Type
	if t.Kind() == reflect.Pointer { // an optional value (workflow.failure_reward)
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return errors.New("not a duration (e.g. 30s)")
	case t.Kind() == reflect.Bool:
		return errors.New("not true or false")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return errors.New("not an integer")
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return errors.New("not an integer ≥ 0")
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return errors.New("not a number")
	}
	return fmt.Errorf("not a valid %s", t)
}

// Default returns the embedded default configuration.
func Default() *Config {
	cfg, err := Load(LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		panic("embedded default config is invalid: " + err.Error()) // a build defect, not user input
	}
	return cfg
}

func defaults() (*Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(defaultYAML)); err != nil {
		return nil, fmt.Errorf("read embedded default config: %w", err)
	}
	var cfg Config
	if err := v.Unmarshal(&cfg); err != nil {
		return nil, fmt.Errorf("decode embedded default config: %w", err)
	}
	return &cfg, nil
}

// FixedKeys lists the dotted keys that environment variables and flags can set.
func FixedKeys() []string { return slices.Clone(fixedKeys()) }

// fixedKeys is the list FixedKeys copies, walked once.
var fixedKeys = sync.OnceValue(func() []string {
	var keys []string
	walkFixed(func(key string, _ reflect.StructField) { keys = append(keys, key) })
	return keys
})

// fixedFields maps each fixed key to its struct field (its type, its secret tag).
var fixedFields = sync.OnceValue(func() map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	walkFixed(func(key string, f reflect.StructField) { m[key] = f })
	return m
})

// walkFixed calls f for every fixed key, in field order, with its field.
func walkFixed(f func(key string, field reflect.StructField)) {
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag := sf.Tag.Get("mapstructure")
			if tag == "-" {
				continue
			}
			switch sf.Type.Kind() {
			case reflect.Struct:
				walk(sf.Type, prefix+tag+".")
			case reflect.Map:
			default:
				f(prefix+tag, sf)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

// EnvVar is the environment variable that sets the fixed key, e.g. DRMAS_LEARN_LR for learn.lr.
func EnvVar(key string) string {
	return "DRMAS_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Overrides returns what o's flags and DRMAS_* variables set, as the DRMAS_* variables that
// set it the same way (a changed flag wins over the variable, as in Load): a process that
// loads the same file with these variables resolves the same configuration. Secrets
// (s3.access_key, s3.secret_key) are left out: pass them by other means.
func Overrides(o LoadOptions) map[string]string {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	out := map[string]string{}
	for _, key := range FixedKeys() {
		if isSecretKey(key) {
			continue
		}
		if o.Flags != nil {
			if f := o.Flags.Lookup(key); f != nil && f.Changed {
				out[EnvVar(key)] = f.Value.String()
				continue
			}
		}
		if val, ok := o.LookupEnv(EnvVar(key)); ok {
			out[EnvVar(key)] = val
		}
	}
	return out
}

// isSecretKey reports whether the fixed key's field is tagged secret:"true".
func isSecretKey(key string) bool { return fixedFields()[key].Tag.Get("secret") == "true" }

func isFixedKey(k string) bool {
	_, ok := fixedFields()[k]
	return ok
}

// configDir is the absolute folder of the config file (the working folder without one), where
// an agent program (workflow.command) runs.
func configDir(file string) string {
	dir := "."
	if file != "" {
		dir = filepath.Dir(file)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}
