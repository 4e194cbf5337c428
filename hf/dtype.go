package hf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// Dtypes of safetensors data drmas reads and writes, as the header spells them.
const (
	BF16 = "BF16"
	F16  = "F16"
	F32  = "F32"
)

// dtypeSize is the byte size of an element of each supported dtype.
var dtypeSize = map[string]int{BF16: 2, F16: 2, F32: 4}

// torchDtypes maps a safetensors dtype to config.json's torch_dtype.
var torchDtypes = map[string]string{BF16: "bfloat16", F16: "float16", F32: "float32"}

// ParseDtype accepts bf16, f16, f32 (any case) or the torch names bfloat16, float16, float32,
// and returns the safetensors spelling.
func ParseDtype(s string) (string, error) {
	switch strings.ToLower(s) {
	case "bf16", "bfloat16":
		return BF16, nil
	case "f16", "fp16", "float16":
		return F16, nil
	case "f32", "fp32", "float32":
		return F32, nil
	}
	return "", fmt.Errorf("dtype %q is not supported (want bf16, f16 or f32): %w", s, ErrUnsupported)
}

// BF16FromFloat32 rounds f to the nearest bfloat16, ties to even, as PyTorch does; every NaN
// becomes the quiet NaN 0x7FC0.
func BF16FromFloat32(f float32) uint16 {
	if f != f {
		return 0x7FC0
	}
	b := math.Float32bits(f)
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// Float32FromBF16 is exact: a bfloat16 is the top half of a float32.
func Float32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16FromFloat32 rounds f to the nearest IEEE half, ties to even, with subnormals; values past
// the largest half become infinities and a NaN stays a (quiet) NaN of the same sign.
func F16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xFF
	man := b & 0x7FFFFF
	switch {
	case exp == 0xFF && man != 0:
		return sign | 0x7E00
	case exp == 0xFF:
		return sign | 0x7C00
	case exp > 127+15:
		return sign | 0x7C00
	case exp >= 127-14: // a normal half
		h := uint32(exp-127+15)<<10 | man>>13
		return sign | uint16(roundShifted(h, man&0x1FFF, 13))
	}
	// A half subnormal (or zero): the value in units of 2^-24 is (1.man) × 2^(exp-127+24).
	shift := uint(126 - exp)
	if exp == 0 || shift > 24 {
		return sign
	}
	m := man | 0x800000
	return sign | uint16(roundShifted(m>>shift, m&(1<<shift-1), shift))
}

// roundShifted rounds q, the result of shifting a value right by shift bits of which rem were
// dropped, to nearest, ties to even. A carry out of the mantissa moves into the exponent,
// which is the correct result (up to infinity).
func roundShifted(q, rem uint32, shift uint) uint32 {
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}

// Float32FromF16 is exact: every half is a float32.
func Float32FromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	man := uint32(h & 0x3FF)
	switch {
	case exp == 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | man<<13)
	case exp == 0:
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// decode converts raw little-endian elements of dtype into dst (len(raw) = len(dst) × size).
func decode(dtype string, raw []byte, dst []float32) {
	switch dtype {
	case BF16:
		raw = raw[:2*len(dst)]
		for i := range dst {
			dst[i] = Float32FromBF16(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case F16:
		raw = raw[:2*len(dst)]
		for i := range dst {
			dst[i] = Float32FromF16(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case F32:
		raw = raw[:4*len(dst)]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	}
}

// encode appends src in dtype, little-endian, to out.
func encode(dtype string, src []float32, out []byte) []byte {
	for _, f := range src {
		switch dtype {
		case BF16:
			h := BF16FromFloat32(f)
			out = append(out, byte(h), byte(h>>8))
		case F16:
			h := F16FromFloat32(f)
			out = append(out, byte(h), byte(h>>8))
		default:
			b := math.Float32bits(f)
			out = append(out, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
		}
	}
	return out
}
