package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
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

// MaxSafetensorsHeader caps the JSON header ReadSafetensors accepts.
const MaxSafetensorsHeader = 100 << 20

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
	if t.DType != F32 {
		return nil, fmt.Errorf("safetensors: tensor %q is %s, want F32", t.Name, t.DType)
	}
	if len(t.Data)%4 != 0 {
		return nil, fmt.Errorf("safetensors: F32 tensor %q has %d data bytes, not a multiple of 4", t.Name, len(t.Data))
	}
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// Int64s decodes an I64 tensor.
func (t Tensor) Int64s() ([]int64, error) {
	if t.DType != I64 {
		return nil, fmt.Errorf("safetensors: tensor %q is %s, want I64", t.Name, t.DType)
	}
	if len(t.Data)%8 != 0 {
		return nil, fmt.Errorf("safetensors: I64 tensor %q has %d data bytes, not a multiple of 8", t.Name, len(t.Data))
	}
	out := make([]int64, len(t.Data)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
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

// WriteSafetensors writes tensors in the safetensors format: tensors sorted
// by name with contiguous data offsets, the JSON header with sorted keys
// ("__metadata__" first) padded with spaces to a multiple of 8 bytes. The
// output depends only on the arguments, never on map iteration order.
// Tensor names and metadata keys and values must be valid UTF-8 (JSON would
// replace invalid bytes with U+FFFD: the file would not read back as written).
func WriteSafetensors(w io.Writer, tensors []Tensor, metadata map[string]string) error {
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

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64 // byte offsets relative to the data region
}

// SafetensorsFile is a validated safetensors file; tensor data is read on
// demand from the underlying reader.
type SafetensorsFile struct {
	Metadata  map[string]string
	Tensors   []TensorInfo // sorted by name
	r         io.ReaderAt
	dataStart int64
}

type stEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// ReadSafetensors parses and validates the header of a safetensors file of
// the given size: header length within the file and ≤ MaxSafetensorsHeader,
// valid JSON without duplicate keys, known dtypes, shape × dtype size equal to
// each offset span, offsets in range, non-overlapping and exactly covering
// the data region. It returns an error (never panics) on anything else. It
// never allocates for a size the header merely declares: its memory is
// proportional to the header it reads (parsing costs a few tens of bytes per
// header byte, the header being at most MaxSafetensorsHeader), and tensor
// data is read later, by Tensor, within the validated data region.
func ReadSafetensors(r io.ReaderAt, size int64) (*SafetensorsFile, error) {
	if size < 8 {
		return nil, fmt.Errorf("safetensors: file of %d bytes is too short", size)
	}
	var lb [8]byte
	if _, err := r.ReadAt(lb[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: reading header length: %w", err)
	}
	hl := binary.LittleEndian.Uint64(lb[:])
	if hl > uint64(size-8) {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the %d bytes after it", hl, size-8)
	}
	if hl > MaxSafetensorsHeader {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the cap %d", hl, MaxSafetensorsHeader)
	}
	if hl < 2 {
		return nil, fmt.Errorf("safetensors: header length %d too small", hl)
	}
	hdr := make([]byte, hl)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("safetensors: reading header: %w", err)
	}
	if hdr[0] != '{' {
		return nil, errors.New("safetensors: header is not a JSON object")
	}
	f := &SafetensorsFile{r: r, dataStart: 8 + int64(hl)}
	dataLen := size - f.dataStart
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("safetensors: header: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("safetensors: header: non-string key")
		}
		if seen[key] {
			return nil, fmt.Errorf("safetensors: header: duplicate key %q", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("safetensors: header: value of %q: %w", key, err)
		}
		if key == "__metadata__" {
			md, err := parseMetadata(raw)
			if err != nil {
				return nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %w", err)
			}
			f.Metadata = md
			continue
		}
		var e stEntry
		d2 := json.NewDecoder(bytes.NewReader(raw))
		d2.DisallowUnknownFields()
		if err := d2.Decode(&e); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", key, err)
		}
		if key == "" {
			return nil, errors.New("safetensors: empty tensor name")
		}
		dt := DType(e.DType)
		if dt.Size() == 0 {
			return nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", key, e.DType)
		}
		if e.Shape == nil {
			return nil, fmt.Errorf("safetensors: tensor %q: missing shape", key)
		}
		if len(e.DataOffsets) != 2 {
			return nil, fmt.Errorf("safetensors: tensor %q: data_offsets must have 2 entries", key)
		}
		b, en := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || en < b || en > dataLen {
			return nil, fmt.Errorf("safetensors: tensor %q: data_offsets [%d,%d] outside the %d-byte data region", key, b, en, dataLen)
		}
		n, err := numElements(e.Shape, dataLen)
		if err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", key, err)
		}
		if n*int64(dt.Size()) != en-b {
			return nil, fmt.Errorf("safetensors: tensor %q: shape %v of %s needs %d bytes, offsets span %d", key, e.Shape, dt, n*int64(dt.Size()), en-b)
		}
		f.Tensors = append(f.Tensors, TensorInfo{Name: key, DType: dt, Shape: e.Shape, Begin: b, End: en})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	if rest := strings.TrimRight(string(hdr[dec.InputOffset():]), " "); rest != "" {
		return nil, errors.New("safetensors: trailing bytes after the header JSON")
	}
	// Offsets must tile the data region exactly.
	byOff := slices.Clone(f.Tensors)
	sort.SliceStable(byOff, func(i, j int) bool {
		if byOff[i].Begin != byOff[j].Begin {
			return byOff[i].Begin < byOff[j].Begin
		}
		return byOff[i].End < byOff[j].End
	})
	var pos int64
	for _, t := range byOff {
		if t.Begin != pos {
			if t.Begin < pos {
				return nil, fmt.Errorf("safetensors: tensor %q overlaps the previous tensor", t.Name)
			}
			return nil, fmt.Errorf("safetensors: gap before tensor %q (bytes %d..%d unused)", t.Name, pos, t.Begin)
		}
		pos = t.End
	}
	if pos != dataLen {
		return nil, fmt.Errorf("safetensors: tensors cover %d of %d data bytes", pos, dataLen)
	}
	sort.Slice(f.Tensors, func(i, j int) bool { return f.Tensors[i].Name < f.Tensors[j].Name })
	return f, nil
}

// parseMetadata decodes the __metadata__ object, refusing duplicate keys
// (json.Unmarshal would keep the last one silently) and non-string values.
func parseMetadata(raw []byte) (map[string]string, error) {
	md := map[string]string{}
	if string(raw) == "null" {
		return md, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		if _, dup := md[k]; dup {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("value of %q is not a string", k)
		}
		md[k] = v
	}
	return md, nil
}

// Info returns the named tensor's description.
func (f *SafetensorsFile) Info(name string) (TensorInfo, bool) {
	i, ok := slices.BinarySearchFunc(f.Tensors, name, func(t TensorInfo, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Tensor reads the named tensor's data.
func (f *SafetensorsFile) Tensor(name string) (Tensor, error) {
	ti, ok := f.Info(name)
	if !ok {
		return Tensor{}, fmt.Errorf("safetensors: no tensor %q", name)
	}
	data := make([]byte, ti.End-ti.Begin)
	if len(data) > 0 {
		if _, err := f.r.ReadAt(data, f.dataStart+ti.Begin); err != nil {
			return Tensor{}, fmt.Errorf("safetensors: reading %q: %w", name, err)
		}
	}
	return Tensor{Name: ti.Name, DType: ti.DType, Shape: slices.Clone(ti.Shape), Data: data}, nil
}

// Float32s reads the named F32 tensor, checking its shape when want != nil.
func (f *SafetensorsFile) Float32s(name string, want []int) ([]float32, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, err
	}
	if want != nil && !slices.Equal(t.Shape, want) {
		return nil, fmt.Errorf("safetensors: tensor %q has shape %v, want %v", name, t.Shape, want)
	}
	return t.Float32s()
}
