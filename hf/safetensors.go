package hf

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/safetensors"
)

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

// parseSafetensors reads and validates the header of a safetensors file of size bytes
// (safetensors.Parse: the tensors tile the data after the header exactly) and checks that
// every tensor's dtype is BF16, F16 or F32. name is used in errors, which are *Error with
// ErrFormat, or ErrUnsupported for a dtype.
func parseSafetensors(r io.ReaderAt, size int64, name string) (*stHeader, error) {
	f, err := safetensors.Parse(r, size, name)
	var se *safetensors.Error
	if errors.As(err, &se) {
		if se.Unsupported {
			return nil, unsupported(se.File, se.Msg)
		}
		return nil, formatErr(se.File, se.Msg)
	}
	if err != nil {
		return nil, err
	}
	h := &stHeader{Metadata: f.Metadata, Tensors: make([]tensorInfo, len(f.Tensors))}
	for i, t := range f.Tensors {
		if _, ok := dtypeSize[string(t.DType)]; !ok {
			return nil, unsupported(name, fmt.Sprintf("tensor %s has dtype %s (supported: BF16, F16, F32)", excerpt.Name(t.Name), excerpt.Quote(string(t.DType))))
		}
		h.Tensors[i] = tensorInfo{Name: t.Name, Dtype: string(t.DType), Shape: t.Shape, Begin: f.DataStart() + t.Begin, End: f.DataStart() + t.End, Source: name}
	}
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		return a.Begin < b.Begin || a.Begin == b.Begin && a.End < b.End
	})
	return h, nil
}
