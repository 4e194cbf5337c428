package model

import (
	"encoding/json"
	"fmt"
	"io"
)

// NewParamAdamW returns an optimizer with zero state over params (their Data are updated in
// place; Decay selects weight decay). The optimizers of an LLM (NewLLMAdamW) and of a LoRA
// adapter are of this kind; SaveState and LoadState name each moment after its parameter.
func NewParamAdamW(params []Param, cfg AdamWConfig) *AdamW {
	parts := make([][]float32, len(params))
	n := 0
	for i, p := range params {
		parts[i] = p.Data
		n += len(p.Data)
	}
	o := newAdamW(cfg, parts, n)
	o.params = params
	for i, p := range params {
		o.mask[i] = p.Decay
	}
	return o
}

// SaveState writes the state of an optimizer made by NewParamAdamW (or NewLLMAdamW):
// "m.<param>" and "v.<param>" (F32, the parameter's shape), "step" (I64 [1]) and the
// hyper-parameters as JSON under "drmas.adamw_config".
func (o *AdamW) SaveState(w io.Writer) error {
	if o.params == nil {
		return fmt.Errorf("model: AdamW.SaveState: the built-in model's optimizer is saved by SaveSafetensors")
	}
	ts := make([]Tensor, 0, 2*len(o.params)+1)
	off := 0
	for _, p := range o.params {
		n := len(p.Data)
		ts = append(ts, F32View("m."+p.Name, p.Shape, o.mom[off:off+n]), F32View("v."+p.Name, p.Shape, o.vel[off:off+n]))
		off += n
	}
	ts = append(ts, I64Tensor("step", []int{1}, []int64{o.Steps}))
	ab, err := json.Marshal(o.AdamWConfig)
	if err != nil {
		return err
	}
	return WriteSafetensors(w, ts, map[string]string{MetaAdamWConfig: string(ab), "format": "pt"})
}

// LoadState restores into o, a fresh optimizer (no step taken) made by NewParamAdamW or
// NewLLMAdamW over the same parameters, the state SaveState wrote: the tensors must be exactly
// o's, F32 of the parameters' shapes, finite (second moments ≥ 0); the hyper-parameters must
// pass Validate. The moments are read in place (no second copy of a large model's state); on
// an error o is left fresh. r is read one tensor at a time: pass a file, not its bytes.
func (o *AdamW) LoadState(r io.ReaderAt, size int64) error {
	if o.params == nil {
		return fmt.Errorf("model: AdamW.LoadState: the built-in model's optimizer is loaded by LoadAdamW")
	}
	if o.Steps != 0 {
		return fmt.Errorf("model: AdamW.LoadState: the optimizer has taken %d steps; load into a fresh one", o.Steps)
	}
	f, err := ReadSafetensors(r, size)
	if err != nil {
		return err
	}
	var ac AdamWConfig
	raw, ok := f.Metadata[MetaAdamWConfig]
	if !ok {
		return fmt.Errorf("model: optimizer state has no %q metadata", MetaAdamWConfig)
	}
	if err := decodeStrict(raw, &ac); err != nil {
		return fmt.Errorf("model: bad %q metadata: %w", MetaAdamWConfig, err)
	}
	if err := ac.Validate(); err != nil {
		return fmt.Errorf("model: bad %q metadata: %w", MetaAdamWConfig, err)
	}
	specs := make([]paramSpec, 0, 2*len(o.params))
	for _, p := range o.params {
		specs = append(specs, paramSpec{name: "m." + p.Name, shape: p.Shape}, paramSpec{name: "v." + p.Name, shape: p.Shape})
	}
	if err := checkLayout(f, specs, "", "step"); err != nil {
		return err
	}
	st, err := f.Tensor("step")
	if err != nil {
		return err
	}
	steps, err := st.Int64s()
	if err != nil || len(steps) != 1 || steps[0] < 0 {
		return fmt.Errorf("model: optimizer \"step\" must be one non-negative I64")
	}
	off := 0
	for _, p := range o.params {
		n := len(p.Data)
		err := readInto(f, "m."+p.Name, o.mom[off:off+n], false)
		if err == nil {
			err = readInto(f, "v."+p.Name, o.vel[off:off+n], true)
		}
		if err != nil {
			clear(o.mom)
			clear(o.vel)
			return err
		}
		off += n
	}
	o.AdamWConfig, o.Steps = ac, steps[0]
	return nil
}
