package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Metadata keys used in checkpoints.
const (
	MetaModelConfig = "drmas.model_config"
	MetaAdamWConfig = "drmas.adamw_config"
)

// Tensors returns the parameters as F32 safetensors tensors (copies).
func (m *Model) Tensors() []Tensor {
	ts := make([]Tensor, len(m.params))
	for i, p := range m.params {
		ts[i] = F32Tensor(p.Name, p.Shape, p.Data)
	}
	return ts
}

// SaveSafetensors writes the parameters, with the config as JSON under the
// metadata key "drmas.model_config" (and "format": "pt").
func (m *Model) SaveSafetensors(w io.Writer) error {
	cb, err := json.Marshal(m.cfg)
	if err != nil {
		return err
	}
	return WriteSafetensors(w, m.Tensors(), map[string]string{MetaModelConfig: string(cb), "format": "pt"})
}

func configFromFile(f *SafetensorsFile) (Config, error) {
	raw, ok := f.Metadata[MetaModelConfig]
	if !ok {
		return Config{}, fmt.Errorf("model: checkpoint has no %q metadata", MetaModelConfig)
	}
	var cfg Config
	if err := decodeStrict(raw, &cfg); err != nil {
		return Config{}, fmt.Errorf("model: bad %q metadata: %w", MetaModelConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// decodeStrict decodes one JSON value from s into v, refusing unknown keys
// (a misspelt key would otherwise silently leave its field at zero) and
// trailing data.
func decodeStrict(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// checkLayout verifies, before anything is allocated, that f holds exactly
// the tensors named by specs (with prefix) as F32 with the expected shapes.
func checkLayout(f *SafetensorsFile, specs []paramSpec, prefix string, extra ...string) error {
	want := map[string]bool{}
	for _, s := range specs {
		name := prefix + s.name
		want[name] = true
		ti, ok := f.Info(name)
		if !ok {
			return fmt.Errorf("model: checkpoint lacks tensor %q", name)
		}
		if ti.DType != F32 || !slices.Equal(ti.Shape, s.shape) {
			return fmt.Errorf("model: tensor %q is %s%v, want F32%v", name, ti.DType, ti.Shape, s.shape)
		}
	}
	for _, e := range extra {
		want[e] = true
	}
	for _, t := range f.Tensors {
		if !want[t.Name] {
			return fmt.Errorf("model: unexpected tensor %q in checkpoint", t.Name)
		}
	}
	return nil
}

// readInto reads the named tensor into dst. Every element must be finite
// (and ≥ 0 with nonNegative): a NaN or Inf weight or moment would turn every
// later output or update into NaN.
func readInto(f *SafetensorsFile, name string, dst []float32, nonNegative bool) error {
	v, err := f.Float32s(name, nil)
	if err != nil {
		return err
	}
	if len(v) != len(dst) {
		return fmt.Errorf("model: tensor %q has %d elements, want %d", name, len(v), len(dst))
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("model: tensor %q: element %d is %v, want a finite value", name, i, x)
		}
		if nonNegative && x < 0 {
			return fmt.Errorf("model: tensor %q: element %d is %v, want ≥ 0", name, i, x)
		}
	}
	copy(dst, v)
	return nil
}

// LoadModel reads a checkpoint written by SaveSafetensors. The config comes
// from the metadata (unknown keys are an error); every parameter must be
// present as F32 with the right shape and finite values, and no other tensor
// may be present.
func LoadModel(r io.ReaderAt, size int64) (*Model, error) {
	f, err := ReadSafetensors(r, size)
	if err != nil {
		return nil, err
	}
	cfg, err := configFromFile(f)
	if err != nil {
		return nil, err
	}
	if err := checkLayout(f, paramSpecs(cfg), ""); err != nil {
		return nil, err
	}
	m := newModel(cfg)
	for i, s := range m.specs {
		if err := readInto(f, s.name, m.parts[i], false); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SaveSafetensors writes the optimizer state: "m.<param>" and "v.<param>"
// (F32, the parameter's shape) for the first and second moments, "step"
// (I64, shape [1]), the hyper-parameters as JSON under "drmas.adamw_config"
// and the model config under "drmas.model_config".
func (o *AdamW) SaveSafetensors(w io.Writer) error {
	if o.m == nil {
		return fmt.Errorf("model: AdamW.SaveSafetensors: only the built-in model's optimizer state is saved")
	}
	ts := make([]Tensor, 0, 2*len(o.m.specs)+1)
	off := 0
	for _, s := range o.m.specs {
		n := prod(s.shape)
		ts = append(ts, F32Tensor("m."+s.name, s.shape, o.mom[off:off+n]), F32Tensor("v."+s.name, s.shape, o.vel[off:off+n]))
		off += n
	}
	ts = append(ts, I64Tensor("step", []int{1}, []int64{o.Steps}))
	cb, err := json.Marshal(o.m.cfg)
	if err != nil {
		return err
	}
	ab, err := json.Marshal(o.AdamWConfig)
	if err != nil {
		return err
	}
	return WriteSafetensors(w, ts, map[string]string{MetaModelConfig: string(cb), MetaAdamWConfig: string(ab), "format": "pt"})
}

// LoadAdamW restores optimizer state saved by (*AdamW).SaveSafetensors for
// model m (whose config must match the one recorded). The hyper-parameters
// must pass AdamWConfig.Validate (unknown keys are an error), the moments
// must be finite and the second moments ≥ 0.
func LoadAdamW(m *Model, r io.ReaderAt, size int64) (*AdamW, error) {
	f, err := ReadSafetensors(r, size)
	if err != nil {
		return nil, err
	}
	cfg, err := configFromFile(f)
	if err != nil {
		return nil, err
	}
	if cfg != m.cfg {
		return nil, fmt.Errorf("model: optimizer state is for config %+v, model has %+v", cfg, m.cfg)
	}
	raw, ok := f.Metadata[MetaAdamWConfig]
	if !ok {
		return nil, fmt.Errorf("model: optimizer state has no %q metadata", MetaAdamWConfig)
	}
	var ac AdamWConfig
	if err := decodeStrict(raw, &ac); err != nil {
		return nil, fmt.Errorf("model: bad %q metadata: %w", MetaAdamWConfig, err)
	}
	if err := ac.Validate(); err != nil {
		return nil, fmt.Errorf("model: bad %q metadata: %w", MetaAdamWConfig, err)
	}
	specs := make([]paramSpec, 0, 2*len(m.specs))
	for _, s := range m.specs {
		ms, vs := s, s
		ms.name, vs.name = "m."+s.name, "v."+s.name
		specs = append(specs, ms, vs)
	}
	if err := checkLayout(f, specs, "", "step"); err != nil {
		return nil, err
	}
	st, err := f.Tensor("step")
	if err != nil {
		return nil, err
	}
	steps, err := st.Int64s()
	if err != nil || len(steps) != 1 || steps[0] < 0 {
		return nil, fmt.Errorf("model: optimizer \"step\" must be one non-negative I64")
	}
	o := NewAdamW(m, ac)
	o.Steps = steps[0]
	off := 0
	for _, s := range m.specs {
		n := prod(s.shape)
		if err := readInto(f, "m."+s.name, o.mom[off:off+n], false); err != nil {
			return nil, err
		}
		if err := readInto(f, "v."+s.name, o.vel[off:off+n], true); err != nil {
			return nil, err
		}
		off += n
	}
	return o, nil
}
