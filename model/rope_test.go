package model

import (
	"math"
	"strings"
	"testing"
)

// TestRopeInvFreqLlama3ByHand: head dim 6 and θ 10⁶ give the frequencies 1, 10⁻² and 10⁻⁴
// (wavelengths 2π ≈ 6.28, 200π ≈ 628.3 and 20000π ≈ 62832). With llama3 scaling of factor 8,
// low_freq_factor 1, high_freq_factor 4 and an original context of 1024, the bands are
// λ < 1024/4 = 256 (kept), λ > 1024/1 = 1024 (divided by 8), and between them the blend
// a = (1024/628.3185 − 1)/(4 − 1) = 0.2099155, 0.01·((1 − a)/8 + a) = 0.0030867610.
func TestRopeInvFreqLlama3ByHand(t *testing.T) {
	s := RopeScaling{Type: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 1024}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got := RopeInvFreq(6, 1e6, s)
	want := []float64{1, 0.0030867609670112745, 1.25e-5}
	if len(got) != len(want) {
		t.Fatalf("%d frequencies, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12*want[i] {
			t.Errorf("frequency %d: %.17g, worked by hand %.17g", i, got[i], want[i])
		}
	}
	// The blend meets the kept band at λ = 256 and the divided one at λ = 1024.
	for _, c := range []struct{ wavelen, want float64 }{{256, 1}, {1024, 1.0 / 8}} {
		f := 2 * math.Pi / c.wavelen
		if r := s.llama3(f) / f; math.Abs(r-c.want) > 1e-12 {
			t.Errorf("at wavelength %v: scaled by %v, want %v", c.wavelen, r, c.want)
		}
	}
}

// TestRopeDefaultUnchanged: without scaling (zero value or "default") the frequencies are
// bit for bit 1/θ^(2i/hd), the formula the tables always used.
func TestRopeDefaultUnchanged(t *testing.T) {
	for _, s := range []RopeScaling{{}, {Type: "default"}} {
		for _, hd := range []int{2, 12, 64, 128} {
			got := RopeInvFreq(hd, 5e5, s)
			for i, f := range got {
				if want := 1 / math.Pow(5e5, float64(2*i)/float64(hd)); math.Float64bits(f) != math.Float64bits(want) {
					t.Fatalf("%+v hd %d frequency %d: %v, want %v", s, hd, i, f, want)
				}
			}
		}
	}
	c := ArchConfig{RopeScaling: RopeScaling{Type: "default"}}.WithDefaults()
	if c.RopeScaling != (RopeScaling{}) {
		t.Errorf(`WithDefaults keeps "default" as %+v, want the zero value`, c.RopeScaling)
	}
}

// TestRopeScalingRefused: other scaling types are refused by name with the supported list,
// and llama3's numbers must make sense.
func TestRopeScalingRefused(t *testing.T) {
	for _, c := range []struct {
		s    RopeScaling
		want string
	}{
		{RopeScaling{Type: "yarn", Factor: 4}, `rope_scaling type "yarn" is not supported (supported: default, llama3)`},
		{RopeScaling{Type: "linear", Factor: 2}, `type "linear" is not supported`},
		{RopeScaling{Type: "default", Factor: 2}, "default RoPE takes no factors"},
		{RopeScaling{Type: RopeLlama3, Factor: 0.5, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}, "factor 0.5 must be finite and >= 1"},
		{RopeScaling{Type: RopeLlama3, Factor: 8, LowFreqFactor: 4, HighFreqFactor: 4, OriginalContext: 8192}, "0 < low < high"},
		{RopeScaling{Type: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4}, "original_max_position_embeddings 0 must be >= 1"},
	} {
		err := c.s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
		ac := ArchConfig{Arch: "llama", Hidden: 8, Layers: 1, Heads: 2, KVHeads: 1, Intermediate: 8, Vocab: 4, RopeScaling: c.s}.WithDefaults()
		if err := ac.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ArchConfig with %+v: %v, want %q", c.s, err, c.want)
		}
	}
}
