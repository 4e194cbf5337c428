package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func file(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

// TestParseRefuses: each header that does not describe its file is one *Error line naming the
// file and the problem; an unknown dtype is marked Unsupported; a hostile name comes back
// escaped and cut.
func TestParseRefuses(t *testing.T) {
	d16 := make([]byte, 16)
	for _, c := range []struct {
		name, header, want string
		unsupported        bool
	}{
		{"unknown field", `{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1}}`, `header entry "a": json: unknown field "x"`, false},
		{"no shape", `{"a":{"dtype":"F32","data_offsets":[0,16]}}`, "tensor a has no shape", false},
		{"empty name", `{"":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, "a tensor has an empty name", false},
		{"dtype", `{"a":{"dtype":"Q4_K","shape":[16],"data_offsets":[0,16]}}`, `tensor a has dtype "Q4_K", which is not a safetensors dtype`, true},
		{"metadata", `{"__metadata__":{"a":"1","a":"2"},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, `__metadata__ is not an object of strings: duplicate key "a"`, false},
		{"metadata value", `{"__metadata__":{"a":1},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, `value of "a" is not a string`, false},
		{"hostile name", `{"e\u001b[2J\nx` + strings.Repeat("n", 4000) + `":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}}`, `tensor "e\x1b[2J\nx`, false},
		{"gap", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}`, "tensor b starts at 12, leaving a gap after 8", false},
	} {
		_, err := Parse(bytes.NewReader(file(c.header, d16)), int64(len(c.header)+24), "f.safetensors")
		var se *Error
		if !errors.As(err, &se) || se.Unsupported != c.unsupported || !strings.HasPrefix(err.Error(), "f.safetensors: ") ||
			!strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || len(err.Error()) > 512 {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestWriteParse: Write's bytes parse back to the same tensors, metadata and values, and the
// data region starts after the 8-byte length and the space-padded header.
func TestWriteParse(t *testing.T) {
	var b bytes.Buffer
	ts := []Tensor{F32Tensor("w", []int{2, 2}, []float32{1, -2, 3.5, 4}), I64Tensor("step", []int{1}, []int64{-7})}
	if err := Write(&b, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if f.DataStart() != int64(b.Len()-24) || (f.DataStart()-8)%8 != 0 || f.Metadata["format"] != "pt" || len(f.Tensors) != 2 || f.Tensors[0].Name != "step" {
		t.Fatalf("%+v start %d of %d", f, f.DataStart(), b.Len())
	}
	w, err := f.Float32s("w", []int{2, 2})
	if err != nil || w[1] != -2 || w[2] != 3.5 {
		t.Fatalf("w: %v %v", w, err)
	}
	st, _ := f.Tensor("step")
	if v, err := st.Int64s(); err != nil || v[0] != -7 {
		t.Fatalf("step: %v %v", v, err)
	}
}
