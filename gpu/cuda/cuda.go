// Package cuda binds the few NVIDIA driver API calls the GPU learner needs, loading
// libcuda.so.1 at run time through github.com/ebitengine/purego: no cgo and no CUDA toolkit
// at build time, so it builds everywhere (CGO_ENABLED=0 included) and only needs the driver
// where it runs.
//
// What the package promises:
//
//   - Init runs once per process (sync.Once). If the library cannot be loaded, a symbol is
//     missing, cuInit fails or no device exists, it returns an *InitError
//     (errors.Is(err, ErrNoCUDA)) whose message is the one-line reason, and nothing ever calls
//     into the driver again: every later Init or Open returns the same error.
//   - Every driver call of a Device runs on one OS thread locked to it, with the device's
//     primary context current, so callers may use a Device from any goroutine (one call at a
//     time; the Device serialises them).
//   - Module loading JIT-compiles the PTX of gpu/kernels; a compile failure returns the JIT's
//     error log inside the error.
//   - A failed Open leaves nothing behind (the module it loaded is unloaded, the primary
//     context it retained is released); Close does the same for an open Device and is
//     idempotent.
//   - Errors carry the driver's error name and string (cuGetErrorName/cuGetErrorString).
package cuda

import (
	"errors"
	"fmt"
)

// ErrNoCUDA is matched (errors.Is) by the error of Init and Open on a machine where the CUDA
// driver cannot be used.
var ErrNoCUDA = errors.New("CUDA driver unavailable")

// InitError says why the CUDA driver is unusable; it is the normal result on a machine
// without an NVIDIA GPU.
type InitError struct {
	Reason string // e.g. "libcuda.so.1 not found"
}

func (e *InitError) Error() string { return "CUDA driver unavailable: " + e.Reason }

// Is makes errors.Is(err, ErrNoCUDA) true.
func (e *InitError) Is(target error) bool { return target == ErrNoCUDA }

// Result is a CUresult, the status of a driver call.
type Result int32

// DriverError is a failed driver call after a successful Init.
type DriverError struct {
	Call   string
	Result Result
	Name   string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Msg    string
}

func (e *DriverError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("cuda: %s: error %d", e.Call, int(e.Result))
	}
	return fmt.Sprintf("cuda: %s: %s (%s)", e.Call, e.Msg, e.Name)
}
