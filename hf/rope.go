package hf

import (
	"fmt"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/model"
)

// ropeScaling reads the RoPE scaling of the object m under key (rope_scaling or
// rope_parameters): the zero value for default RoPE, model.RopeLlama3's four numbers, and an
// error naming the type for any other. rope_scaling must name its type (transformers' old
// configs wrote "type"); rope_parameters without one is default RoPE. ok is false after an
// error.
func (p *cfgParser) ropeScaling(key string, m map[string]any) (s model.RopeScaling, ok bool) {
	typ := ""
	for _, k := range []string{"rope_type", "type"} {
		if t, isStr := m[k].(string); isStr && typ == "" {
			typ = t
		}
	}
	switch {
	case typ == "" && key == "rope_parameters", typ == "default":
		return model.RopeScaling{}, true
	case typ == model.RopeLlama3:
		return p.llama3Scaling(key, m)
	case typ == "":
		typ = "(unnamed)"
	default:
		typ = excerpt.Quote(typ)
	}
	p.fail(unsupported(p.name, fmt.Sprintf("%s type %s is not supported (supported: %s)", key, typ, strings.Join(model.RopeScalingTypes, ", "))))
	return model.RopeScaling{}, false
}

// llama3Scaling reads llama3's factor, low_freq_factor, high_freq_factor (positive numbers)
// and original_max_position_embeddings (a positive integer), all required, as transformers
// requires them.
func (p *cfgParser) llama3Scaling(key string, m map[string]any) (model.RopeScaling, bool) {
	num := func(k string) float64 {
		v, ok := m[k]
		if !ok || v == nil {
			p.fail(formatErr(p.name, fmt.Sprintf("%s.%s is missing (llama3 RoPE needs it)", key, k)))
			return 1
		}
		return p.positiveValue(key+"."+k, v)
	}
	s := model.RopeScaling{Type: model.RopeLlama3, Factor: num("factor"), LowFreqFactor: num("low_freq_factor"), HighFreqFactor: num("high_freq_factor")}
	ctx := 1.0
	if v, ok := m["original_max_position_embeddings"]; ok && v != nil {
		n, err := intOf(v)
		if err != nil || n < 1 || n > maxDim {
			p.fail(formatErr(p.name, fmt.Sprintf("%s.original_max_position_embeddings is %s, want an integer from 1 to %d", key, jsonText(v), maxDim)))
		}
		ctx = float64(n)
	} else {
		p.fail(formatErr(p.name, key+".original_max_position_embeddings is missing (llama3 RoPE needs it)"))
	}
	s.OriginalContext = int(ctx)
	if p.err != nil {
		return s, false
	}
	if err := s.Validate(); err != nil {
		p.fail(formatErr(p.name, err.Error()))
		return s, false
	}
	return s, true
}

// putRope writes s into config.json's map m, which starts as raw: untouched when raw already
// says s (so a file read and written back keeps its bytes), else into rope_parameters when m
// has that object, and into rope_scaling when m has it or has no rope_parameters.
func putRope(m, raw map[string]any, s model.RopeScaling) {
	p := cfgParser{raw: raw}
	if _, old := p.rope(); p.err == nil && old == s {
		return
	}
	keys := ropeKeys(s)
	if rp, ok := m["rope_parameters"].(map[string]any); ok {
		out := map[string]any{}
		for k, v := range rp {
			if !isRopeScalingKey(k) {
				out[k] = v
			}
		}
		for k, v := range keys {
			out[k] = v
		}
		m["rope_parameters"] = out
		if m["rope_scaling"] == nil {
			return
		}
	}
	if s.Type == "" {
		m["rope_scaling"] = nil
		return
	}
	m["rope_scaling"] = keys
}

// ropeKeys is s as the keys of a rope_scaling object.
func ropeKeys(s model.RopeScaling) map[string]any {
	if s.Type == "" {
		return map[string]any{"rope_type": "default"}
	}
	return map[string]any{"rope_type": s.Type, "factor": s.Factor, "low_freq_factor": s.LowFreqFactor,
		"high_freq_factor": s.HighFreqFactor, "original_max_position_embeddings": s.OriginalContext}
}

// isRopeScalingKey reports whether k is a key ropeKeys writes (or the old name of the type).
func isRopeScalingKey(k string) bool {
	switch k {
	case "rope_type", "type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings":
		return true
	}
	return false
}
