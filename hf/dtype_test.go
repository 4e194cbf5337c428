package hf

import (
	"math"
	"testing"
)

// TestBF16HandWorked: float32 bit patterns rounded to bfloat16 by hand: the low 16 bits are
// dropped, rounding to nearest with ties to the even result.
func TestBF16HandWorked(t *testing.T) {
	cases := []struct {
		f32  uint32
		bf16 uint16
		why  string
	}{
		{0x3F800000, 0x3F80, "1.0 is exact"},
		{0xBF800000, 0xBF80, "-1.0 is exact"},
		{0x3F807FFF, 0x3F80, "below half an ulp rounds down"},
		{0x3F808000, 0x3F80, "a tie to the even 0x3F80"},
		{0x3F808001, 0x3F81, "above half rounds up"},
		{0x3F818000, 0x3F82, "a tie from the odd 0x3F81 goes up to even"},
		{0x3F81FFFF, 0x3F82, "carry within the mantissa"},
		{0x3FFF8000, 0x4000, "a tie carries into the exponent: 1.99… → 2"},
		{0x7F7FFFFF, 0x7F80, "the largest float32 rounds to +Inf"},
		{0x7F7F7FFF, 0x7F7F, "just below the rounding point stays finite"},
		{0x7F800000, 0x7F80, "+Inf"},
		{0xFF800000, 0xFF80, "-Inf"},
		{0x7FC00000, 0x7FC0, "quiet NaN"},
		{0x7F800001, 0x7FC0, "a signalling NaN stays NaN (plain rounding would make it Inf)"},
		{0xFFFFFFFF, 0x7FC0, "a negative NaN with every payload bit becomes the canonical NaN"},
		{0x00000000, 0x0000, "+0"},
		{0x80000000, 0x8000, "-0"},
		{0x00000001, 0x0000, "the smallest subnormal rounds to 0"},
		{0x00008000, 0x0000, "a subnormal tie to the even 0"},
		{0x00018000, 0x0002, "a subnormal tie from the odd 1 up to 2"},
		{0x00008001, 0x0001, "a subnormal above half"},
		{0x007FFFFF, 0x0080, "the largest subnormal rounds up to the smallest normal"},
		{0x3DCCCCCD, 0x3DCD, "0.1"},
	}
	for _, c := range cases {
		if got := BF16FromFloat32(math.Float32frombits(c.f32)); got != c.bf16 {
			t.Errorf("%08X (%s): got %04X, want %04X", c.f32, c.why, got, c.bf16)
		}
	}
}

// TestBF16AllValues: every bfloat16 converts to float32 exactly (its bits shifted up) and back
// to itself; NaNs come back as the canonical NaN.
func TestBF16AllValues(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float32FromBF16(uint16(h))
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("%04X: float32 bits %08X", h, math.Float32bits(f))
		}
		want := uint16(h)
		if f != f {
			want = 0x7FC0
		}
		if got := BF16FromFloat32(f); got != want {
			t.Fatalf("%04X: round trip %04X", h, got)
		}
	}
}

// TestF16HandWorked: float32 values rounded to IEEE half by hand, through the normal range,
// its top (65504, overflow to Inf by a tie), the subnormals and the specials.
func TestF16HandWorked(t *testing.T) {
	cases := []struct {
		f   float32
		f16 uint16
	}{
		{1, 0x3C00}, {-2, 0xC000}, {0.5, 0x3800}, {65504, 0x7BFF},
		{65519, 0x7BFF}, // below the tie between 65504 and 65536
		{65520, 0x7C00}, // the tie: from the odd 0x7BFF up to Inf
		{1e6, 0x7C00}, {-1e6, 0xFC00},
		{1 + 1.0/2048, 0x3C00},                   // a tie to the even 0x3C00
		{1 + 3.0/2048, 0x3C02},                   // a tie from the odd 0x3C01 up
		{1 + 1.0/1024, 0x3C01},                   // exact
		{float32(math.Ldexp(1, -14)), 0x0400},    // the smallest normal
		{float32(math.Ldexp(1023, -24)), 0x03FF}, // the largest subnormal
		{float32(math.Ldexp(1, -24)), 0x0001},    // the smallest subnormal
		{float32(math.Ldexp(1, -25)), 0x0000},    // a tie to the even 0
		{float32(math.Ldexp(3, -25)), 0x0002},    // a tie from the odd 1 up
		{float32(math.Ldexp(1.0001, -25)), 0x0001},
		{float32(math.Ldexp(1, -30)), 0x0000},
		{float32(math.Ldexp(-1, -24)), 0x8001},
		{float32(math.Ldexp(2047, -25)), 0x0400}, // the largest subnormal + ½ ulp rounds into the normals
		{0.1, 0x2E66},
		{float32(math.Inf(1)), 0x7C00}, {float32(math.Inf(-1)), 0xFC00},
		{float32(math.NaN()), 0x7E00}, {math.Float32frombits(0x80000000), 0x8000},
		{math.Float32frombits(1), 0x0000}, // a float32 subnormal
	}
	for _, c := range cases {
		if got := F16FromFloat32(c.f); got != c.f16 {
			t.Errorf("%g (%08X): got %04X, want %04X", c.f, math.Float32bits(c.f), got, c.f16)
		}
	}
}

// TestF16AllValues: every half converts to float32 exactly and back to itself.
func TestF16AllValues(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float32FromF16(uint16(h))
		exp, man := h>>10&0x1F, h&0x3FF
		var want float64
		switch {
		case exp == 0x1F && man != 0:
			if f == f {
				t.Fatalf("%04X is a NaN, got %g", h, f)
			}
			if got := F16FromFloat32(f); got != uint16(h)&0x8000|0x7E00 {
				t.Fatalf("%04X: NaN round trip %04X", h, got)
			}
			continue
		case exp == 0x1F:
			want = math.Inf(1)
		case exp == 0:
			want = math.Ldexp(float64(man), -24)
		default:
			want = math.Ldexp(float64(1024+man), exp-15-10)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("%04X: got %g, want %g", h, f, want)
		}
		if got := F16FromFloat32(f); got != uint16(h) {
			t.Fatalf("%04X: round trip %04X", h, got)
		}
	}
}

func TestParseDtype(t *testing.T) {
	for in, want := range map[string]string{"bf16": BF16, "BFLOAT16": BF16, "f16": F16, "float16": F16, "f32": F32, "fp32": F32} {
		if got, err := ParseDtype(in); got != want || err != nil {
			t.Errorf("%s: %s %v", in, got, err)
		}
	}
	if _, err := ParseDtype("int8"); err == nil {
		t.Error("int8 accepted")
	}
}
