package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

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
}

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
}

// ReadAdapterConfig reads and checks dir/adapter_config.json.
func ReadAdapterConfig(dir string) (AdapterConfig, error) {
	ac, _, err := readAdapterConfig(dir)
	return ac, err
}

// readAdapterConfig is ReadAdapterConfig also returning the file's bytes.
func readAdapterConfig(dir string) (AdapterConfig, []byte, error) {
	name := filepath.Join(dir, AdapterConfigFile)
	data, err := readBounded(name, maxConfigBytes)
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
		return refuse(fmt.Sprintf("peft_type %q", p.PeftType))
	case p.DoRA:
		return refuse("use_dora true")
	case p.FanInFanOut:
		return refuse("fan_in_fan_out true")
	case p.Bias != "" && p.Bias != "none":
		return refuse(fmt.Sprintf("bias %q", p.Bias))
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
	if len(p.Targets) > 0 && p.Targets[0] == '[' {
		if err := json.Unmarshal(p.Targets, &a.Targets); err != nil {
			return AdapterConfig{}, formatErr(name, "target_modules is not a list of names: "+err.Error())
		}
	}
	return a, nil
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
	ad, err := openAdapter(m, dir)
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
		a, err := readTensor(ad.f, ad.pairs[mod].a)
		if err != nil {
			return err
		}
		b, err := readTensor(ad.f, ad.pairs[mod].b)
		if err != nil {
			return err
		}
		model.MergeLoRA(ad.weights[mod+".weight"].Data, a, b, ad.ac.R, ad.ac.Scale())
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
func openAdapter(m *model.LLM, dir string) (*adapterFiles, error) {
	ac, data, err := readAdapterConfig(dir)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(dir, AdapterWeightsFile)
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read adapter: %w", err)
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
			return nil, formatErr(name, fmt.Sprintf("tensor %s is not base_model.model.<module>.lora_A.weight or .lora_B.weight", t.Name))
		}
		w, ok := weights[mod+".weight"]
		if mod == "model.embed_tokens" {
			return nil, unsupported(name, "tensor "+t.Name+": LoRA on the embeddings is not supported")
		}
		if !ok || len(w.Shape) != 2 {
			return nil, formatErr(name, fmt.Sprintf("tensor %s: the model has no linear layer %s", t.Name, mod))
		}
		if ac.Targets != nil && !slices.Contains(ac.Targets, mod[strings.LastIndexByte(mod, '.')+1:]) {
			return nil, formatErr(name, fmt.Sprintf("tensor %s: %s is not in target_modules %v", t.Name, mod, ac.Targets))
		}
		want := []int{ac.R, w.Shape[1]}
		if ab == "B.weight" {
			want = []int{w.Shape[0], ac.R}
		}
		if !slices.Equal(t.Shape, want) {
			return nil, formatErr(name, fmt.Sprintf("tensor %s has shape %v, want %v (r %d, %s %v)", t.Name, t.Shape, want, ac.R, mod, w.Shape))
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
			return nil, formatErr(name, fmt.Sprintf("module %s has only one of lora_A and lora_B", mod))
		}
	}
	if len(pairs) == 0 {
		return nil, formatErr(name, "no LoRA tensors")
	}
	return pairs, nil
}

// readTensor reads one tensor's values (its range was checked against the file's size).
func readTensor(f *os.File, t *tensorInfo) ([]float32, error) {
	raw := make([]byte, t.End-t.Begin)
	if _, err := f.ReadAt(raw, t.Begin); err != nil {
		return nil, fmt.Errorf("read adapter %s: %w", t.Name, err)
	}
	dst := make([]float32, len(raw)/dtypeSize[t.Dtype])
	decode(t.Dtype, raw, dst)
	return dst, nil
}
