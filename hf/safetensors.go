package hf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"sort"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// maxHeaderBytes bounds a safetensors header (the format's own limit): a header lists tensors,
// so one claiming more is a lie, and reading it would cost memory the file does not justify.
const maxHeaderBytes = 100 << 20

// tensorInfo is one tensor of a safetensors file.
type tensorInfo struct {
	Name   string
	Dtype  string
	Shape  []int
	Begin  int64 // absolute file offsets of the data
	End    int64
	Source string // the file
}

// stHeader is a parsed and validated safetensors header.
type stHeader struct {
	Tensors  []tensorInfo // sorted by Begin
	Metadata map[string]string
}

type rawTensor struct {
	Dtype       string   `json:"dtype"`
	Shape       []uint64 `json:"shape"`
	DataOffsets []uint64 `json:"data_offsets"`
}

// parseSafetensors reads and validates the header of a safetensors file of size bytes: every
// tensor's dtype is BF16, F16 or F32, its shape × element size is its byte range, and the
// ranges cover the data after the header exactly, in bounds and without overlap or gap. name
// is used in errors.
func parseSafetensors(r io.ReaderAt, size int64, name string) (*stHeader, error) {
	var pre [8]byte
	if size < 8 {
		return nil, formatErr(name, fmt.Sprintf("%d bytes: too short for a safetensors file", size))
	}
	if _, err := r.ReadAt(pre[:], 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n > maxHeaderBytes || n > uint64(size-8) {
		return nil, formatErr(name, fmt.Sprintf("the header claims %d bytes, but the file has %d after the length and headers are at most %d", n, size-8, maxHeaderBytes))
	}
	if n == 0 { // a reader may answer a read of 0 bytes at its end with io.EOF
		return nil, formatErr(name, "the header is empty: it must be a JSON object")
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	h, err := decodeHeader(hdr, name)
	if err != nil {
		return nil, err
	}
	return h, checkLayout(h, 8+int64(n), size, name)
}

// decodeHeader decodes the header's JSON object, refusing duplicate names (a map would keep
// the last silently) and malformed entries.
func decodeHeader(hdr []byte, name string) (*stHeader, error) {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, formatErr(name, "the header is not a JSON object")
	}
	h := &stHeader{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, formatErr(name, "header: "+err.Error())
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, formatErr(name, fmt.Sprintf("header lists %s twice", excerpt.Quote(key)))
		}
		seen[key] = true
		if key == "__metadata__" {
			if err := dec.Decode(&h.Metadata); err != nil {
				return nil, formatErr(name, "header __metadata__ is not an object of strings")
			}
			continue
		}
		var rt rawTensor
		if err := dec.Decode(&rt); err != nil {
			return nil, formatErr(name, fmt.Sprintf("header entry %s: %v", excerpt.Quote(key), err))
		}
		t, err := tensorOf(key, rt, name)
		if err != nil {
			return nil, err
		}
		h.Tensors = append(h.Tensors, t)
	}
	if _, err := dec.Token(); err != nil {
		return nil, formatErr(name, "header: "+err.Error())
	}
	rest := bytes.TrimRight(hdr[dec.InputOffset():], " ")
	if len(rest) != 0 {
		return nil, formatErr(name, "the header has data after its JSON object")
	}
	return h, nil
}

// tensorOf checks one header entry: a supported dtype and shape × element size = byte range.
func tensorOf(key string, rt rawTensor, name string) (tensorInfo, error) {
	size, ok := dtypeSize[rt.Dtype]
	if !ok {
		return tensorInfo{}, unsupported(name, fmt.Sprintf("tensor %s has dtype %s (supported: BF16, F16, F32)", excerpt.Name(key), excerpt.Quote(rt.Dtype)))
	}
	if len(rt.DataOffsets) != 2 || rt.DataOffsets[0] > rt.DataOffsets[1] {
		return tensorInfo{}, formatErr(name, fmt.Sprintf("tensor %s: data_offsets %v are not [begin, end]", excerpt.Name(key), rt.DataOffsets))
	}
	bytes := uint64(size)
	shape := make([]int, len(rt.Shape))
	for i, d := range rt.Shape {
		hi, lo := bits.Mul64(bytes, d)
		if hi != 0 || lo > 1<<62 {
			return tensorInfo{}, formatErr(name, fmt.Sprintf("tensor %s: shape %v is too large", excerpt.Name(key), rt.Shape))
		}
		bytes = lo
		shape[i] = int(d)
	}
	if got := rt.DataOffsets[1] - rt.DataOffsets[0]; got != bytes {
		return tensorInfo{}, formatErr(name, fmt.Sprintf("tensor %s: shape %v of %s needs %d bytes, data_offsets give %d", excerpt.Name(key), rt.Shape, rt.Dtype, bytes, got))
	}
	if rt.DataOffsets[1] > 1<<62 {
		return tensorInfo{}, formatErr(name, fmt.Sprintf("tensor %s: data_offsets %v are past any file", excerpt.Name(key), rt.DataOffsets))
	}
	return tensorInfo{Name: key, Dtype: rt.Dtype, Shape: shape, Begin: int64(rt.DataOffsets[0]), End: int64(rt.DataOffsets[1]), Source: name}, nil
}

// checkLayout makes offsets absolute and checks that the tensors tile [start, size) exactly.
func checkLayout(h *stHeader, start, size int64, name string) error {
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		return a.Begin < b.Begin || a.Begin == b.Begin && a.End < b.End
	})
	pos := int64(0)
	for i := range h.Tensors {
		t := &h.Tensors[i]
		switch {
		case t.Begin < pos:
			return formatErr(name, fmt.Sprintf("tensor %s overlaps the tensor before it (data_offsets [%d, %d])", excerpt.Name(t.Name), t.Begin, t.End))
		case t.Begin > pos:
			return formatErr(name, fmt.Sprintf("tensor %s starts at %d, leaving a gap after %d", excerpt.Name(t.Name), t.Begin, pos))
		case t.End > size-start:
			return formatErr(name, fmt.Sprintf("tensor %s ends at %d, past the %d data bytes of the file", excerpt.Name(t.Name), t.End, size-start))
		}
		pos = t.End
		t.Begin += start
		t.End += start
	}
	if pos != size-start {
		return formatErr(name, fmt.Sprintf("the tensors end at %d, but the file has %d data bytes", pos, size-start))
	}
	return nil
}
