package model

import (
	"io"

	"github.com/drmas-dev/drmas/safetensors"
)

// The safetensors container is package safetensors; model's checkpoints
// and tensors are its types under these names.
type (
	// DType is a safetensors element type name ("F32", "I64", ...).
	DType = safetensors.DType
	// Tensor is one named tensor with its raw little-endian bytes.
	Tensor = safetensors.Tensor
	// TensorInfo describes one tensor of a safetensors file.
	TensorInfo = safetensors.TensorInfo
	// SafetensorsFile is a validated safetensors file.
	SafetensorsFile = safetensors.File
)

// Element types model's checkpoints use.
const (
	F32 = safetensors.F32
	I64 = safetensors.I64
)

// F32Tensor encodes a float32 tensor.
func F32Tensor(name string, shape []int, data []float32) Tensor {
	return safetensors.F32Tensor(name, shape, data)
}

// F32View is a float32 tensor that refers to data (no copy).
func F32View(name string, shape []int, data []float32) Tensor {
	return safetensors.F32View(name, shape, data)
}

// I64Tensor encodes an int64 tensor.
func I64Tensor(name string, shape []int, data []int64) Tensor {
	return safetensors.I64Tensor(name, shape, data)
}

// WriteSafetensors is safetensors.Write.
func WriteSafetensors(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	return safetensors.Write(w, tensors, metadata)
}

// ReadSafetensors is safetensors.Read: the header validated against size,
// tensor data read on demand.
func ReadSafetensors(r io.ReaderAt, size int64) (*SafetensorsFile, error) {
	return safetensors.Read(r, size)
}
