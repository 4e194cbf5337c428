package hf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/internal/regular"
	"github.com/drmas-dev/drmas/model"
)

// Files of a PEFT LoRA adapter folder.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// AdapterConfig is the part of adapter_config.json drmas computes with.
type AdapterConfig struct {
	R       int
	Alpha   float64
	RSLoRA  bool     // use_rslora: the scale is alpha/sqrt(r) instead of alpha/r
	Targets []string // target_modules as a list (nil when given as a regular expression)
	// TargetRegex is target_modules given as a string: a module is targeted when the regular
	// expression matches its whole name (Python's re.fullmatch). "all-linear" is every linear
	// layer but the output head.
	TargetRegex *regexp.Regexp
	AllLinear   bool
	// Layers is layers_to_transform (nil: every layer), found in a module's name after
	// layers_pattern (Patterns; empty: any name) as PEFT finds it. Both apply to a list of
	// target_modules only, as in PEFT.
	Layers   []int
	Patterns []*regexp.Regexp
}

// Targets reports whether the adapter applies to the module named mod (such as
// model.layers.0.self_attn.q_proj), by PEFT's rules (check_target_module_exists): a regular
// expression must match the whole name; a list entry must be the name or its dotted suffix,
// and then, with layers_to_transform, the layer index in the name must be one of them.
func (a AdapterConfig) Targeted(mod string) bool {
	switch {
	case a.AllLinear:
		return mod != "lm_head"
	case a.TargetRegex != nil:
		return a.TargetRegex.MatchString(mod)
	}
	found := false
	for _, t := range a.Targets {
		if mod == t || strings.HasSuffix(mod, "."+t) {
			found = true
			break
		}
	}
	if !found || a.Layers == nil || slices.Contains(a.Targets, mod) {
		return found
	}
	layer, ok := a.layerOf(mod)
	return ok && slices.Contains(a.Layers, layer)
}

// layerOf finds mod's layer index as PEFT does: the number after a dotted layers_pattern
// component (any component when there is no pattern) and before a dot.
func (a AdapterConfig) layerOf(mod string) (int, bool) {
	pats := a.Patterns
	if len(pats) == 0 {
		pats = []*regexp.Regexp{anyLayer}
	}
	for _, p := range pats {
		if m := p.FindStringSubmatch(mod); m != nil {
			n, err := strconv.Atoi(m[1])
			return n, err == nil
		}
	}
	return 0, false
}

// anyLayer is PEFT's layer index without layers_pattern: r".*\.[^.]*\.(\d+)\." matched at
// the start.
var anyLayer = regexp.MustCompile(`^.*\.[^.]*\.(\d+)\.`)

// Scale is the factor of B·A in the merged weight.
func (a AdapterConfig) Scale() float64 {
	if a.RSLoRA {
		return a.Alpha / math.Sqrt(float64(a.R))
	}
	return a.Alpha / float64(a.R)
}

// peftConfig is adapter_config.json as PEFT writes it; the fields that change the computation
// and that drmas does not implement are read to refuse them by name.
type peftConfig struct {
	PeftType      string          `json:"peft_type"`
	R             *int            `json:"r"`
	Alpha         *float64        `json:"lora_alpha"`
	Targets       json.RawMessage `json:"target_modules"`
	RSLoRA        bool            `json:"use_rslora"`
	DoRA          bool            `json:"use_dora"`
	FanInFanOut   bool            `json:"fan_in_fan_out"`
	Bias          string          `json:"bias"`
	ModulesToSave []string        `json:"modules_to_save"`
	RankPattern   map[string]any  `json:"rank_pattern"`
	AlphaPattern  map[string]any  `json:"alpha_pattern"`
	Layers        json.RawMessage `json:"layers_to_transform"`
	LayersPattern json.RawMessage `json:"layers_pattern"`
}

// ReadAdapterConfig reads and checks dir/adapter_config.json.
func ReadAdapterConfig(dir string) (AdapterConfig, error) {
	return ReadAdapterConfigContext(context.Background(), dir)
}

// ReadAdapterConfigContext is ReadAdapterConfig with reads that ctx cancels.
func ReadAdapterConfigContext(ctx context.Context, dir string) (AdapterConfig, error) {
	ac, _, err := readAdapterConfig(ctx, dir)
	return ac, err
}

// readAdapterConfig is ReadAdapterConfig also returning the file's bytes.
func readAdapterConfig(ctx context.Context, dir string) (AdapterConfig, []byte, error) {
	name := filepath.Join(dir, AdapterConfigFile)
	data, err := readBounded(ctx, name, maxConfigBytes)
	if err != nil {
		return AdapterConfig{}, nil, fmt.Errorf("read adapter config: %w", err)
	}
	ac, err := ParseAdapterConfig(data, name)
	return ac, data, err
}

// ParseAdapterConfig parses the bytes of an adapter_config.json; name is used in errors.
func ParseAdapterConfig(data []byte, name string) (AdapterConfig, error) {
	var p peftConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil {
		return AdapterConfig{}, formatErr(name, "not a PEFT adapter config: "+err.Error())
	}
	refuse := func(what string) (AdapterConfig, error) {
		return AdapterConfig{}, unsupported(name, what+" is not supported (plain LoRA adapters only)")
	}
	switch {
	case p.PeftType != "" && p.PeftType != "LORA":
		return refuse("peft_type " + excerpt.Quote(p.PeftType))
	case p.DoRA:
		return refuse("use_dora true")
	case p.FanInFanOut:
		return refuse("fan_in_fan_out true")
	case p.Bias != "" && p.Bias != "none":
		return refuse("bias " + excerpt.Quote(p.Bias))
	case len(p.ModulesToSave) > 0:
		return refuse("modules_to_save")
	case len(p.RankPattern) > 0 || len(p.AlphaPattern) > 0:
		return refuse("rank_pattern/alpha_pattern")
	case p.R == nil || *p.R < 1 || *p.R > maxDim:
		return AdapterConfig{}, formatErr(name, "r is missing or not a positive integer")
	case p.Alpha == nil || math.IsNaN(*p.Alpha) || math.IsInf(*p.Alpha, 0):
		return AdapterConfig{}, formatErr(name, "lora_alpha is missing or not a number")
	}
	a := AdapterConfig{R: *p.R, Alpha: *p.Alpha, RSLoRA: p.RSLoRA}
	if err := a.parseTargets(p, name); err != nil {
		return AdapterConfig{}, err
	}
	return a, nil
}

// parseTargets reads target_modules, layers_to_transform and layers_pattern.
func (a *AdapterConfig) parseTargets(p peftConfig, name string) error {
	var str string
	switch {
	case isNullJSON(p.Targets):
		// PEFT's default for Qwen2, Qwen3 and Llama (a saved adapter names them itself)
		a.Targets = []string{"q_proj", "v_proj"}
		return nil
	case json.Unmarshal(p.Targets, &str) == nil:
		if str == "all-linear" {
			a.AllLinear = true
			return nil
		}
		re, err := regexp.Compile(`^(?:` + str + `)$`)
		if err != nil {
			return unsupported(name, fmt.Sprintf("target_modules %s is not a regular expression Go's RE2 reads (%v)", excerpt.Quote(str), err))
		}
		a.TargetRegex = re
		return nil // PEFT ignores layers_to_transform for a regular expression
	case json.Unmarshal(p.Targets, &a.Targets) != nil:
		return formatErr(name, "target_modules is neither a list of names nor a regular expression")
	}
	if !isNullJSON(p.Layers) {
		var one int
		if json.Unmarshal(p.Layers, &one) == nil {
			a.Layers = []int{one}
		} else if err := json.Unmarshal(p.Layers, &a.Layers); err != nil {
			return formatErr(name, "layers_to_transform is neither a layer index nor a list of them")
		}
		if len(a.Layers) == 0 {
			a.Layers = nil // PEFT: an empty list means every layer
		}
	}
	return a.parseLayersPattern(p.LayersPattern, name)
}

func (a *AdapterConfig) parseLayersPattern(raw json.RawMessage, name string) error {
	if isNullJSON(raw) {
		return nil
	}
	var pats []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		pats = []string{one}
	} else if err := json.Unmarshal(raw, &pats); err != nil {
		return formatErr(name, "layers_pattern is neither a string nor a list of strings")
	}
	for _, pt := range pats {
		if pt == "" {
			continue
		}
		re, err := regexp.Compile(`^.*\.` + pt + `\.(\d+)\.`)
		if err != nil {
			return unsupported(name, fmt.Sprintf("layers_pattern %s is not a regular expression Go's RE2 reads (%v)", excerpt.Quote(pt), err))
		}
		a.Patterns = append(a.Patterns, re)
	}
	return nil
}

func isNullJSON(raw json.RawMessage) bool {
	r := bytes.TrimSpace(raw)
	return len(r) == 0 || string(r) == "null"
}

// loraPair is the A [r, in] and B [out, r] of one module.
type loraPair struct{ a, b *tensorInfo }

// ApplyAdapter merges the PEFT LoRA adapter in dir into m's weights: W' = W + scale·B·A for
// every module the adapter has (adapter_model.safetensors holds
// base_model.model.<module>.lora_A.weight [r, in] and .lora_B.weight [out, r]; scale is
// lora_alpha/r, or lora_alpha/sqrt(r) with use_rslora). Each module must be a linear layer of
// m with matching shapes and, when target_modules is a list, named by it. Nothing is changed
// when the adapter is refused.
func ApplyAdapter(m *model.LLM, dir string) error {
	return ApplyAdapterContext(context.Background(), m, dir)
}

// ApplyAdapterContext is ApplyAdapter with reads that ctx cancels (between modules; m is then
// partly merged, so the caller drops it).
func ApplyAdapterContext(ctx context.Context, m *model.LLM, dir string) error {
	if m.StoredBF16() {
		return fmt.Errorf("merge adapter %s: %w: load the model in float32 (LoadLLM) to merge into it", dir, model.ErrStoredBF16)
	}
	ad, err := openAdapter(ctx, m, dir)
	if err != nil {
		return err
	}
	defer ad.f.Close()
	modules := make([]string, 0, len(ad.pairs))
	for mod := range ad.pairs {
		modules = append(modules, mod)
	}
	sort.Strings(modules) // a fixed order: the same bytes every run
	for _, mod := range modules {
		if err := ctx.Err(); err != nil {
			return err
		}
		a, err := readTensor(ad.f, ad.pairs[mod].a)
		if err != nil {
			return err
		}
		b, err := readTensor(ad.f, ad.pairs[mod].b)
		if err != nil {
			return err
		}
		w := ad.weights[mod+".weight"].Data
		model.MergeLoRA(w, a, b, ad.ac.R, ad.ac.Scale())
		if i := nonFinite(w); i >= 0 {
			return formatErr(ad.f.Name(), fmt.Sprintf("module %s: the merged weight overflows to %v at index %d (lora_alpha %g, r %d)", excerpt.Name(mod), w[i], i, ad.ac.Alpha, ad.ac.R))
		}
	}
	return nil
}

// adapterFiles is an adapter folder opened and checked against a model: its config, its
// open weights file and each module's A and B.
type adapterFiles struct {
	ac      AdapterConfig
	config  []byte // adapter_config.json
	f       *os.File
	pairs   map[string]*loraPair
	weights map[string]model.Param // the model's tensors by name
}

// openAdapter reads dir's config and weights header and pairs the tensors with m's linear
// layers; the caller closes f.
func openAdapter(ctx context.Context, m *model.LLM, dir string) (*adapterFiles, error) {
	ac, data, err := readAdapterConfig(ctx, dir)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(dir, AdapterWeightsFile)
	f, err := regular.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read adapter: %w", fileErr(name, err))
	}
	fail := func(err error) (*adapterFiles, error) {
		f.Close()
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("read adapter: %w", err))
	}
	h, err := parseSafetensors(f, fi.Size(), name)
	if err != nil {
		return fail(err)
	}
	ad := &adapterFiles{ac: ac, config: data, f: f, weights: map[string]model.Param{}}
	for _, p := range m.Params() {
		ad.weights[p.Name] = p
	}
	if ad.pairs, err = loraPairs(h, ac, ad.weights, name); err != nil {
		return fail(err)
	}
	return ad, nil
}

// loraPairs pairs each module's A and B and checks them against the model before anything is
// merged.
func loraPairs(h *stHeader, ac AdapterConfig, weights map[string]model.Param, name string) (map[string]*loraPair, error) {
	pairs := map[string]*loraPair{}
	for i := range h.Tensors {
		t := &h.Tensors[i]
		mod, ab, ok := strings.Cut(strings.TrimPrefix(t.Name, "base_model.model."), ".lora_")
		if !ok || !strings.HasPrefix(t.Name, "base_model.model.") || (ab != "A.weight" && ab != "B.weight") {
			return nil, formatErr(name, fmt.Sprintf("tensor %s is not base_model.model.<module>.lora_A.weight or .lora_B.weight", excerpt.Name(t.Name)))
		}
		w, ok := weights[mod+".weight"]
		if mod == "model.embed_tokens" {
			return nil, unsupported(name, "tensor "+excerpt.Name(t.Name)+": LoRA on the embeddings is not supported")
		}
		if !ok || len(w.Shape) != 2 {
			return nil, formatErr(name, fmt.Sprintf("tensor %s: the model has no linear layer %s", excerpt.Name(t.Name), excerpt.Name(mod)))
		}
		if !ac.Targeted(mod) {
			return nil, formatErr(name, fmt.Sprintf("tensor %s: module %s is not selected by target_modules %s%s (PEFT would not load it)", excerpt.Name(t.Name), excerpt.Name(mod), excerpt.Cut(targetsText(ac)), layersText(ac)))
		}
		if width := min(w.Shape[0], w.Shape[1]); ac.R > width {
			return nil, formatErr(name, fmt.Sprintf("tensor %s: r %d is more than %s's width %d (shape %v): a rank above it adds nothing", excerpt.Name(t.Name), ac.R, excerpt.Name(mod), width, w.Shape))
		}
		want := []int{ac.R, w.Shape[1]}
		if ab == "B.weight" {
			want = []int{w.Shape[0], ac.R}
		}
		if !slices.Equal(t.Shape, want) {
			return nil, formatErr(name, fmt.Sprintf("tensor %s has shape %v, want %v (r %d, %s %v)", excerpt.Name(t.Name), t.Shape, want, ac.R, excerpt.Name(mod), w.Shape))
		}
		p := pairs[mod]
		if p == nil {
			p = &loraPair{}
			pairs[mod] = p
		}
		if ab == "A.weight" {
			p.a = t
		} else {
			p.b = t
		}
	}
	for mod, p := range pairs {
		if p.a == nil || p.b == nil {
			return nil, formatErr(name, fmt.Sprintf("module %s has only one of lora_A and lora_B", excerpt.Name(mod)))
		}
	}
	if len(pairs) == 0 {
		return nil, formatErr(name, "no LoRA tensors")
	}
	return pairs, nil
}

// targetsText is target_modules as the adapter gave it, for messages.
func targetsText(ac AdapterConfig) string {
	switch {
	case ac.AllLinear:
		return `"all-linear"`
	case ac.TargetRegex != nil:
		re := ac.TargetRegex.String()
		return strconv.Quote(re[len(`^(?:`) : len(re)-len(`)$`)])
	}
	return fmt.Sprint(ac.Targets)
}

func layersText(ac AdapterConfig) string {
	if ac.Layers == nil || ac.TargetRegex != nil || ac.AllLinear {
		return ""
	}
	return excerpt.Cut(fmt.Sprintf(" and layers_to_transform %v", ac.Layers))
}

// readTensor reads one tensor's values (its range was checked against the file's size),
// refusing a NaN or an infinity: merged or trained on, it would make every log-probability NaN.
func readTensor(f *os.File, t *tensorInfo) ([]float32, error) {
	raw := make([]byte, t.End-t.Begin)
	if _, err := f.ReadAt(raw, t.Begin); err != nil {
		return nil, fmt.Errorf("read adapter %s: %w", excerpt.Cut(t.Name), err)
	}
	dst := make([]float32, len(raw)/dtypeSize[t.Dtype])
	decode(t.Dtype, raw, dst)
	if i := nonFinite(dst); i >= 0 {
		return nil, formatErr(f.Name(), fmt.Sprintf("tensor %s has %v at index %d: adapter weights must be finite", excerpt.Cut(t.Name), dst[i], i))
	}
	return dst, nil
}
