package safetensors

import (
	"bytes"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// FuzzParse: any bytes are either refused with one line naming the file, or a header whose
// tensors tile the data exactly, each readable, and which Write writes back to a file that
// parses to the same tensors and metadata; memory stays proportional to the input. The
// corpus holds model checkpoints' and Hugging Face folders' files and lying headers.
func FuzzParse(f *testing.F) {
	var b bytes.Buffer
	_ = Write(&b, []Tensor{F32Tensor("w", []int{2}, []float32{1, 2})}, map[string]string{"k": "v"})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		before := allocated()
		sf, err := Parse(bytes.NewReader(data), int64(len(data)), "fuzz.safetensors")
		if got := allocated() - before; got > 16<<20+200*uint64(len(data)) {
			t.Fatalf("allocated %d bytes for %d", got, len(data))
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.safetensors: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error not one line naming the file: %q", err)
			}
			return
		}
		checkTiles(t, sf, int64(len(data)))
		var ts []Tensor
		for _, ti := range sf.Tensors {
			tt, err := sf.Tensor(ti.Name)
			if err != nil {
				t.Fatalf("validated tensor %q unreadable: %v", ti.Name, err)
			}
			ts = append(ts, tt)
		}
		var out bytes.Buffer
		if err := Write(&out, ts, sf.Metadata); err != nil {
			t.Fatalf("re-write: %v", err)
		}
		sf2, err := Read(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if len(sf2.Tensors) != len(sf.Tensors) || len(sf2.Metadata) != len(sf.Metadata) {
			t.Fatalf("written back: %d tensors %d metadata, had %d %d", len(sf2.Tensors), len(sf2.Metadata), len(sf.Tensors), len(sf.Metadata))
		}
		for i, ti := range sf2.Tensors {
			if ti.Name != sf.Tensors[i].Name || ti.DType != sf.Tensors[i].DType || !slices.Equal(ti.Shape, sf.Tensors[i].Shape) {
				t.Fatalf("tensor %d written back as %+v, was %+v", i, ti, sf.Tensors[i])
			}
		}
	})
}

// checkTiles checks that f's tensors cover its data region exactly.
func checkTiles(t *testing.T, f *File, size int64) {
	t.Helper()
	byOff := slices.Clone(f.Tensors)
	slices.SortFunc(byOff, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			return int(a.Begin - b.Begin)
		}
		return int(a.End - b.End)
	})
	pos := int64(0)
	for _, ti := range byOff {
		if ti.Begin != pos || ti.End < ti.Begin {
			t.Fatalf("tensor %s [%d, %d) does not follow %d", ti.Name, ti.Begin, ti.End, pos)
		}
		pos = ti.End
	}
	if f.DataStart()+pos != size {
		t.Fatalf("tensors end at %d of %d", f.DataStart()+pos, size)
	}
}
