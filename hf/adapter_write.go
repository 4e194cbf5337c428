package hf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/model"
)

// peftAdapterConfig is adapter_config.json as PEFT's save_pretrained writes it for a plain
// LoRA, with the keys PEFT (0.9 and later) and vLLM read; struct order keeps the bytes fixed.
type peftAdapterConfig struct {
	AlphaPattern      map[string]any `json:"alpha_pattern"`
	AutoMapping       any            `json:"auto_mapping"`
	BaseModel         string         `json:"base_model_name_or_path"`
	Bias              string         `json:"bias"`
	FanInFanOut       bool           `json:"fan_in_fan_out"`
	InferenceMode     bool           `json:"inference_mode"`
	InitLoraWeights   bool           `json:"init_lora_weights"`
	LayersPattern     any            `json:"layers_pattern"`
	LayersToTransform any            `json:"layers_to_transform"`
	LoftqConfig       map[string]any `json:"loftq_config"`
	LoraAlpha         float64        `json:"lora_alpha"`
	LoraDropout       float64        `json:"lora_dropout"`
	MegatronConfig    any            `json:"megatron_config"`
	MegatronCore      string         `json:"megatron_core"`
	ModulesToSave     any            `json:"modules_to_save"`
	PeftType          string         `json:"peft_type"`
	R                 int            `json:"r"`
	RankPattern       map[string]any `json:"rank_pattern"`
	Revision          any            `json:"revision"`
	TargetModules     []string       `json:"target_modules"`
	TaskType          string         `json:"task_type"`
	UseDora           bool           `json:"use_dora"`
	UseRSLoRA         bool           `json:"use_rslora"`
}

// WriteAdapter writes l as a PEFT LoRA adapter folder that PEFT and vLLM load over the base
// named baseName (base_model_name_or_path): adapter_config.json and adapter_model.safetensors
// (F32, PEFT's tensor names, A [r, in] and B [out, r]). Like WriteFolder it goes through a
// temporary folder renamed into place; dir must not exist yet, or be empty. The same adapter
// gives the same bytes.
func WriteAdapter(dir string, baseName string, l *model.LoRA) error {
	c := l.Config()
	pc := peftAdapterConfig{
		AlphaPattern: map[string]any{}, BaseModel: baseName, Bias: "none", InferenceMode: true, InitLoraWeights: true,
		LoftqConfig: map[string]any{}, LoraAlpha: c.Alpha, LoraDropout: c.Dropout, MegatronCore: "megatron.core",
		PeftType: "LORA", R: c.R, RankPattern: map[string]any{}, TargetModules: c.Targets, TaskType: "CAUSAL_LM",
	}
	js, err := json.MarshalIndent(pc, "", "  ")
	if err != nil {
		return fmt.Errorf("write adapter: %w", err)
	}
	params := l.Params()
	specs := make([]TensorSpec, len(params))
	byName := make(map[string][]float32, len(params))
	for i, p := range params {
		specs[i] = TensorSpec{Name: p.Name, Shape: p.Shape}
		byName[p.Name] = p.Data
	}
	return writeFolderAtomic(dir, func(tmp string) error {
		err := writeFileSync(filepath.Join(tmp, AdapterConfigFile), func(w io.Writer) error {
			_, err := w.Write(append(js, '\n'))
			return err
		})
		if err != nil {
			return err
		}
		return writeFileSync(filepath.Join(tmp, AdapterWeightsFile), func(w io.Writer) error {
			return writeSafetensors(w, specs, F32, func(name string) []float32 { return byName[name] })
		})
	})
}

// ReadAdapter loads the PEFT LoRA adapter in dir over base, unmerged, for training on: r,
// lora_alpha, lora_dropout and target_modules (a list) from adapter_config.json, and every
// target module of every layer from adapter_model.safetensors with its shapes checked (any
// dtype PEFT writes). Adapters drmas cannot train are refused in one line: use_rslora, target
// modules given as a regular expression, or modules missing (layers_to_transform).
func ReadAdapter(dir string, base *model.LLM) (*model.LoRA, error) {
	ad, err := openAdapter(context.Background(), base, dir)
	if err != nil {
		return nil, err
	}
	defer ad.f.Close()
	cname := filepath.Join(dir, AdapterConfigFile)
	var extra struct {
		Dropout float64 `json:"lora_dropout"`
	}
	if err := json.Unmarshal(ad.config, &extra); err != nil {
		return nil, formatErr(cname, "lora_dropout is not a number: "+err.Error())
	}
	switch {
	case ad.ac.RSLoRA:
		return nil, unsupported(cname, "use_rslora true is not supported for training (drmas scales by lora_alpha/r)")
	case ad.ac.Targets == nil:
		return nil, unsupported(cname, "target_modules as a regular expression is not supported for training: list the modules")
	}
	l, err := model.NewLoRA(base, model.LoRAConfig{R: ad.ac.R, Alpha: ad.ac.Alpha, Dropout: extra.Dropout, Targets: ad.ac.Targets}, 0)
	if err != nil {
		return nil, formatErr(cname, err.Error())
	}
	wname := filepath.Join(dir, AdapterWeightsFile)
	mods := l.Modules()
	if len(ad.pairs) != len(mods) {
		for _, mod := range mods {
			if ad.pairs[mod] == nil {
				return nil, unsupported(wname, fmt.Sprintf("module %s has no lora_A/lora_B: adapters of some layers only are not supported for training", excerpt.Name(mod)))
			}
		}
	}
	for _, p := range l.Params() {
		mod, ab, _ := strings.Cut(strings.TrimPrefix(p.Name, "base_model.model."), ".lora_")
		t := ad.pairs[mod].a
		if ab == "B.weight" {
			t = ad.pairs[mod].b
		}
		vals, err := readTensor(ad.f, t)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(t.Shape, p.Shape) {
			return nil, formatErr(wname, fmt.Sprintf("tensor %s has shape %v, want %v", excerpt.Name(t.Name), t.Shape, p.Shape))
		}
		copy(p.Data, vals)
	}
	return l, nil
}
