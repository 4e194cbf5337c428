package model

import (
	"fmt"
	"math"
	"strings"
)

// RopeLlama3 is the rope_type of Llama 3.1 and later: low frequencies slowed
// by Factor, high ones kept, a smooth blend between.
const RopeLlama3 = "llama3"

// RopeScalingTypes lists the rope_type values the engines compute.
var RopeScalingTypes = []string{"default", RopeLlama3}

// RopeScaling is how config.json's rope_scaling (or rope_parameters) rescales
// the rotary inverse frequencies. The zero value is plain RoPE. Field names
// and JSON keys are transformers'.
type RopeScaling struct {
	Type            string  `json:"rope_type,omitempty"` // "" (plain RoPE) or RopeLlama3
	Factor          float64 `json:"factor,omitempty"`
	LowFreqFactor   float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor  float64 `json:"high_freq_factor,omitempty"`
	OriginalContext int     `json:"original_max_position_embeddings,omitempty"`
}

// Validate reports, in one line, what is wrong with s.
func (s RopeScaling) Validate() error {
	switch s.Type {
	case "", "default":
		if s != (RopeScaling{Type: s.Type}) {
			return fmt.Errorf("rope_scaling: default RoPE takes no factors (got %+v)", s)
		}
		return nil
	case RopeLlama3:
		var bad []string
		if !(s.Factor >= 1) || math.IsInf(s.Factor, 0) {
			bad = append(bad, fmt.Sprintf("factor %v must be finite and >= 1", s.Factor))
		}
		if !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || math.IsInf(s.HighFreqFactor, 0) {
			bad = append(bad, fmt.Sprintf("low_freq_factor %v and high_freq_factor %v must satisfy 0 < low < high < inf", s.LowFreqFactor, s.HighFreqFactor))
		}
		if s.OriginalContext < 1 {
			bad = append(bad, fmt.Sprintf("original_max_position_embeddings %d must be >= 1", s.OriginalContext))
		}
		if len(bad) > 0 {
			return fmt.Errorf("rope_scaling llama3: %s", strings.Join(bad, "; "))
		}
		return nil
	}
	return fmt.Errorf("rope_scaling type %q is not supported (supported: %s)", s.Type, strings.Join(RopeScalingTypes, ", "))
}

// plain reports whether s leaves the frequencies alone.
func (s RopeScaling) plain() bool { return s.Type == "" || s.Type == "default" }

// RopeInvFreq returns the hd/2 rotary inverse frequencies θ^(−2i/hd) of a
// head of hd dimensions, rescaled by s, in float64. s must be valid.
//
// llama3 (transformers' _compute_llama3_parameters): with wavelength
// λ = 2π/f, a frequency whose λ is below OriginalContext/HighFreqFactor is
// kept, one whose λ is above OriginalContext/LowFreqFactor is divided by
// Factor, and between them it is (1−a)·f/Factor + a·f with
// a = (OriginalContext/λ − LowFreqFactor)/(HighFreqFactor − LowFreqFactor).
func RopeInvFreq(hd int, theta float64, s RopeScaling) []float64 {
	inv := make([]float64, hd/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(theta, float64(2*i)/float64(hd))
	}
	if s.plain() {
		return inv
	}
	for i, f := range inv {
		inv[i] = s.llama3(f)
	}
	return inv
}

// llama3 rescales one inverse frequency f.
func (s RopeScaling) llama3(f float64) float64 {
	ctx := float64(s.OriginalContext)
	wavelen := 2 * math.Pi / f
	switch {
	case wavelen < ctx/s.HighFreqFactor:
		return f
	case wavelen > ctx/s.LowFreqFactor:
		return f / s.Factor
	}
	a := (ctx/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
	return (1-a)*f/s.Factor + a*f
}
