// Package safetensors reads and writes the safetensors format (an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the data). It is the one parser of the format
// in drmas: the built-in model's checkpoints, Hugging Face folders and
// adapters all read through Parse, which validates everything against the
// file's size before any tensor is read. It imports nothing of drmas.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"unicode/utf8"
)

// DType is a safetensors element type name ("F32", "I64", ...).
type DType string

// Supported element types.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U64  DType = "U64"
	U32  DType = "U32"
	U16  DType = "U16"
	U8   DType = "U8"
	Bool DType = "BOOL"
)

// Size is the element size in bytes, 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case I8, U8, Bool:
		return 1
	}
	return 0
}

// Tensor is one named tensor with its raw little-endian bytes.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
	// F32, when set (DType F32, Data nil), holds the values themselves: WriteSafetensors
	// encodes them in small chunks as it writes, so a large tensor (an LLM optimizer's
	// moments) is never copied whole.
	F32 []float32
}

// byteLen is the size of the tensor's data in the file.
func (t Tensor) byteLen() int64 {
	if t.F32 != nil {
		return 4 * int64(len(t.F32))
	}
	return int64(len(t.Data))
}

// F32View is a float32 tensor that refers to data (no copy; see Tensor.F32).
func F32View(name string, shape []int, data []float32) Tensor {
	return Tensor{Name: name, DType: F32, Shape: slices.Clone(shape), F32: data}
}

// writeData writes t's bytes, encoding F32 values 64 Ki at a time.
func (t Tensor) writeData(w io.Writer) error {
	if t.F32 == nil {
		_, err := w.Write(t.Data)
		return err
	}
	buf := make([]byte, 4<<16)
	for off := 0; off < len(t.F32); off += 1 << 16 {
		chunk := t.F32[off:min(len(t.F32), off+1<<16)]
		for i, v := range chunk {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if _, err := w.Write(buf[:4*len(chunk)]); err != nil {
			return err
		}
	}
	return nil
}

// F32Tensor encodes a float32 tensor.
func F32Tensor(name string, shape []int, data []float32) Tensor {
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return Tensor{Name: name, DType: F32, Shape: slices.Clone(shape), Data: b}
}

// I64Tensor encodes an int64 tensor.
func I64Tensor(name string, shape []int, data []int64) Tensor {
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return Tensor{Name: name, DType: I64, Shape: slices.Clone(shape), Data: b}
}

// Float32s decodes an F32 tensor.
func (t Tensor) Float32s() ([]float32, error) {
	return decode(t, F32, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
}

// Int64s decodes an I64 tensor.
func (t Tensor) Int64s() ([]int64, error) {
	return decode(t, I64, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
}

// decode decodes t's elements, which must be of dtype want, with one, which reads an element
// from its want.Size() bytes.
func decode[T any](t Tensor, want DType, one func([]byte) T) ([]T, error) {
	if t.DType != want {
		return nil, fmt.Errorf("safetensors: tensor %q is %s, want %s", t.Name, t.DType, want)
	}
	n := want.Size()
	if len(t.Data)%n != 0 {
		return nil, fmt.Errorf("safetensors: %s tensor %q has %d data bytes, not a multiple of %d", want, t.Name, len(t.Data), n)
	}
	out := make([]T, len(t.Data)/n)
	for i := range out {
		out[i] = one(t.Data[n*i:])
	}
	return out, nil
}

// numElements returns the product of shape, or an error on negative
// dimensions or overflow beyond limit.
func numElements(shape []int, limit int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d", d)
		}
		if d != 0 && n > limit/int64(d) {
			return 0, fmt.Errorf("shape %v too large", shape)
		}
		n *= int64(d)
	}
	return n, nil
}

// Write writes tensors in the safetensors format: tensors sorted
// by name with contiguous data offsets, the JSON header with sorted keys
// ("__metadata__" first) padded with spaces to a multiple of 8 bytes. The
// output depends only on the arguments, never on map iteration order.
// Tensor names and metadata keys and values must be valid UTF-8 (JSON would
// replace invalid bytes with U+FFFD: the file would not read back as written).
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	ts := slices.Clone(tensors)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	first := true
	writeKey := func(k string) {
		if !first {
			hdr.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		hdr.Write(kb)
		hdr.WriteByte(':')
	}
	if len(metadata) > 0 {
		writeKey("__metadata__")
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hdr.WriteByte('{')
		for i, k := range keys {
			if !utf8.ValidString(k) || !utf8.ValidString(metadata[k]) {
				return fmt.Errorf("safetensors: metadata %q: key and value must be valid UTF-8", k)
			}
			if i > 0 {
				hdr.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			vb, _ := json.Marshal(metadata[k])
			hdr.Write(kb)
			hdr.WriteByte(':')
			hdr.Write(vb)
		}
		hdr.WriteByte('}')
	}
	var off int64
	for i, t := range ts {
		if t.Name == "" || t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: invalid tensor name %q", t.Name)
		}
		if !utf8.ValidString(t.Name) {
			return fmt.Errorf("safetensors: tensor name %q is not valid UTF-8", t.Name)
		}
		if i > 0 && ts[i-1].Name == t.Name {
			return fmt.Errorf("safetensors: duplicate tensor %q", t.Name)
		}
		if t.DType.Size() == 0 {
			return fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		n, err := numElements(t.Shape, math.MaxInt64/8)
		if err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
		if t.F32 != nil && (t.DType != F32 || t.Data != nil) {
			return fmt.Errorf("safetensors: tensor %q: F32 values need DType F32 and no Data", t.Name)
		}
		if n*int64(t.DType.Size()) != t.byteLen() {
			return fmt.Errorf("safetensors: tensor %q: shape %v × %d bytes != %d data bytes", t.Name, t.Shape, t.DType.Size(), t.byteLen())
		}
		writeKey(t.Name)
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		sb, _ := json.Marshal(shape)
		fmt.Fprintf(&hdr, `{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, t.DType, sb, off, off+t.byteLen())
		off += t.byteLen()
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	for _, t := range ts {
		if err := t.writeData(w); err != nil {
			return err
		}
	}
	return nil
}
