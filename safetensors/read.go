package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxHeader bounds a header (the format's own limit): a header lists tensors, so one claiming
// more is a lie, and reading it would cost memory the file does not justify.
const MaxHeader = 100 << 20

// Error is a file that is not a valid safetensors file (or, Unsupported, one with a dtype this
// package does not know). Msg is one line; names from the file in it are escaped and cut.
type Error struct {
	File        string
	Msg         string
	Unsupported bool
}

func (e *Error) Error() string { return e.File + ": " + e.Msg }

func bad(file, format string, a ...any) error {
	return &Error{File: file, Msg: fmt.Sprintf(format, a...)}
}

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64 // byte offsets relative to the data region
}

// File is a validated safetensors file; tensor data is read on demand from the underlying
// reader.
type File struct {
	Metadata  map[string]string
	Tensors   []TensorInfo // sorted by name
	r         io.ReaderAt
	dataStart int64
}

// DataStart is the file offset of the data region (TensorInfo offsets are relative to it).
func (f *File) DataStart() int64 { return f.dataStart }

// entry is one tensor's header entry as written.
type entry struct {
	DType       string   `json:"dtype"`
	Shape       []uint64 `json:"shape"`
	DataOffsets []uint64 `json:"data_offsets"`
}

// Read is Parse with errors naming the file "safetensors".
func Read(r io.ReaderAt, size int64) (*File, error) { return Parse(r, size, "safetensors") }

// Parse reads and validates the header of a safetensors file of size bytes: the header's
// length within the file and at most MaxHeader, one JSON object without duplicate keys or data
// after it, __metadata__ an object of strings, each tensor a known dtype, a shape, and
// data_offsets [begin, end] whose span is shape × element size, the tensors tiling the data
// region exactly, in bounds, without overlap or gap. Anything else is an *Error (io errors
// wrapped) naming the file as name; it never panics. Its memory is proportional to the header
// it reads, never to a size the header merely declares; tensor data is read later, by Tensor.
func Parse(r io.ReaderAt, size int64, name string) (*File, error) {
	if size < 8 {
		return nil, bad(name, "%d bytes: too short for a safetensors file", size)
	}
	var pre [8]byte
	if _, err := r.ReadAt(pre[:], 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n > MaxHeader || n > uint64(size-8) {
		return nil, bad(name, "the header claims %d bytes, but the file has %d after the length and headers are at most %d", n, size-8, MaxHeader)
	}
	if n == 0 { // a reader may answer a read of 0 bytes at its end with io.EOF
		return nil, bad(name, "the header is empty: it must be a JSON object")
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	f := &File{r: r, dataStart: 8 + int64(n)}
	if err := f.decodeHeader(hdr, size-f.dataStart, name); err != nil {
		return nil, err
	}
	if err := checkTiling(f.Tensors, size-f.dataStart, name); err != nil {
		return nil, err
	}
	sort.Slice(f.Tensors, func(i, j int) bool { return f.Tensors[i].Name < f.Tensors[j].Name })
	return f, nil
}

// decodeHeader decodes the header's JSON object into f, refusing duplicate names (a map would
// keep the last silently) and malformed entries.
func (f *File) decodeHeader(hdr []byte, dataLen int64, name string) error {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(name, "the header is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(name, "header: %s", oneLine(err))
		}
		key, _ := tok.(string)
		if seen[key] {
			return bad(name, "header lists %s twice", quote(key))
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return bad(name, "header entry %s: %s", quote(key), oneLine(err))
		}
		if key == "__metadata__" {
			md, err := parseMetadata(raw)
			if err != nil {
				return bad(name, "header __metadata__ is not an object of strings: %s", oneLine(err))
			}
			f.Metadata = md
			continue
		}
		t, err := tensorOf(key, raw, name)
		if err != nil {
			return err
		}
		f.Tensors = append(f.Tensors, t)
	}
	if _, err := dec.Token(); err != nil {
		return bad(name, "header: %s", oneLine(err))
	}
	if rest := bytes.TrimRight(hdr[dec.InputOffset():], " "); len(rest) != 0 {
		return bad(name, "the header has data after its JSON object")
	}
	return nil
}

// tensorOf checks one header entry: a name, no unknown fields, a known dtype, a shape, and
// shape × element size = the byte range.
func tensorOf(key string, raw []byte, name string) (TensorInfo, error) {
	if key == "" {
		return TensorInfo{}, bad(name, "a tensor has an empty name")
	}
	var e entry
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return TensorInfo{}, bad(name, "header entry %s: %s", quote(key), oneLine(err))
	}
	dt := DType(e.DType)
	if dt.Size() == 0 {
		return TensorInfo{}, &Error{File: name, Msg: fmt.Sprintf("tensor %s has dtype %s, which is not a safetensors dtype this reader knows", label(key), quote(e.DType)), Unsupported: true}
	}
	if e.Shape == nil {
		return TensorInfo{}, bad(name, "tensor %s has no shape", label(key))
	}
	if len(e.DataOffsets) != 2 || e.DataOffsets[0] > e.DataOffsets[1] {
		return TensorInfo{}, bad(name, "tensor %s: data_offsets %v are not [begin, end]", label(key), e.DataOffsets)
	}
	n := uint64(dt.Size())
	shape := make([]int, len(e.Shape))
	for i, dim := range e.Shape {
		hi, lo := bits.Mul64(n, dim)
		if hi != 0 || lo > 1<<62 {
			return TensorInfo{}, bad(name, "tensor %s: shape %v is too large", label(key), e.Shape)
		}
		n = lo
		shape[i] = int(dim)
	}
	if got := e.DataOffsets[1] - e.DataOffsets[0]; got != n {
		return TensorInfo{}, bad(name, "tensor %s: shape %v of %s needs %d bytes, data_offsets give %d", label(key), e.Shape, dt, n, got)
	}
	if e.DataOffsets[1] > 1<<62 {
		return TensorInfo{}, bad(name, "tensor %s: data_offsets %v are past any file", label(key), e.DataOffsets)
	}
	return TensorInfo{Name: key, DType: dt, Shape: shape, Begin: int64(e.DataOffsets[0]), End: int64(e.DataOffsets[1])}, nil
}

// checkTiling checks that the tensors cover the dataLen bytes of the data region exactly.
func checkTiling(ts []TensorInfo, dataLen int64, name string) error {
	byOff := slices.Clone(ts)
	sort.Slice(byOff, func(i, j int) bool {
		a, b := byOff[i], byOff[j]
		return a.Begin < b.Begin || a.Begin == b.Begin && a.End < b.End
	})
	pos := int64(0)
	for _, t := range byOff {
		switch {
		case t.Begin < pos:
			return bad(name, "tensor %s overlaps the tensor before it (data_offsets [%d, %d])", label(t.Name), t.Begin, t.End)
		case t.Begin > pos:
			return bad(name, "tensor %s starts at %d, leaving a gap after %d", label(t.Name), t.Begin, pos)
		case t.End > dataLen:
			return bad(name, "tensor %s ends at %d, past the %d data bytes of the file", label(t.Name), t.End, dataLen)
		}
		pos = t.End
	}
	if pos != dataLen {
		return bad(name, "the tensors end at %d, but the file has %d data bytes", pos, dataLen)
	}
	return nil
}

// parseMetadata decodes the __metadata__ object, refusing duplicate keys (json.Unmarshal
// would keep the last one silently) and non-string values.
func parseMetadata(raw []byte) (map[string]string, error) {
	md := map[string]string{}
	if string(raw) == "null" {
		return md, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		if _, dup := md[k]; dup {
			return nil, fmt.Errorf("duplicate key %s", quote(k))
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("value of %s is not a string", quote(k))
		}
		md[k] = v
	}
	return md, nil
}

// maxQuoted bounds a name from a file in a message.
const maxQuoted = 200

// cut is s cut to maxQuoted bytes at a rune boundary, with "…" and its length when cut.
func cut(s string) (string, string) {
	if len(s) <= maxQuoted {
		return s, ""
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], fmt.Sprintf("… (%d bytes)", len(s))
}

// quote is s quoted, cut short: for a key or a value from the file.
func quote(s string) string {
	c, more := cut(s)
	return strconv.Quote(c) + more
}

// label is a tensor name in a message: as is when short and printable, else quoted and cut.
func label(s string) string {
	c, more := cut(s)
	for _, r := range c {
		if r == utf8.RuneError || !unicode.IsPrint(r) || r == '"' {
			return strconv.Quote(c) + more
		}
	}
	return c + more
}

// oneLine is err's message without line breaks.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// Info returns the named tensor's description.
func (f *File) Info(name string) (TensorInfo, bool) {
	i, ok := slices.BinarySearchFunc(f.Tensors, name, func(t TensorInfo, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Tensor reads the named tensor's data.
func (f *File) Tensor(name string) (Tensor, error) {
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
func (f *File) Float32s(name string, want []int) ([]float32, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, err
	}
	if want != nil && !slices.Equal(t.Shape, want) {
		return nil, fmt.Errorf("safetensors: tensor %q has shape %v, want %v", name, t.Shape, want)
	}
	return t.Float32s()
}
