//go:build linux

package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/nvidiatest"
)

// TestRealDriverWithoutGPU loads NVIDIA's own libcuda.so.1 (the 535 driver's user-space
// library, installed by gpu/tools/install-nvidia-tools.sh) in a child process on a machine
// without a GPU: every symbol the binding resolves must exist in the real library (a missing
// one would be reported as "has no ..."), cuInit must fail with the driver's own
// CUDA_ERROR_NO_DEVICE name and message in one line, and every later entry point must return
// that same error.
func TestRealDriverWithoutGPU(t *testing.T) {
	if os.Getenv("DRMAS_REAL_CUDA_CHILD") == "1" {
		realDriverChild(t)
		return
	}
	if nvidiatest.HasGPU() {
		t.Skip("this machine has an NVIDIA kernel driver: the GPU tests cover it")
	}
	dir, err := nvidiatest.DriverLibs()
	if err != nil {
		nvidiatest.Missing(t, err)
	}
	nvidiatest.RunTestChild(t, "TestRealDriverWithoutGPU", "real driver checks passed",
		"DRMAS_REAL_CUDA_CHILD=1", "DRMAS_REAL_CUDA_DIR="+dir, "LD_LIBRARY_PATH="+dir)
}

func realDriverChild(t *testing.T) {
	err := Init()
	var ie *InitError
	if !errors.As(err, &ie) || !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("Init with the real driver library and no GPU: %v, want an *InitError", err)
	}
	t.Logf("Init: %v", err)
	if strings.Contains(ie.Reason, "not found") || strings.Contains(ie.Reason, "has no") {
		t.Fatalf("the real library was not loaded or lacks a symbol: %v", err)
	}
	if !strings.Contains(ie.Reason, "CUDA_ERROR_NO_DEVICE") || !strings.Contains(ie.Reason, "no CUDA-capable device") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Init error %q: want the driver's one-line CUDA_ERROR_NO_DEVICE", err)
	}
	libs, merr := nvidiatest.MappedLibs("libcuda.so")
	if merr != nil {
		t.Fatal(merr)
	}
	want := filepath.Join(os.Getenv("DRMAS_REAL_CUDA_DIR"), "libcuda.so.1")
	if len(libs) != 1 || libs[0] != want {
		t.Fatalf("mapped libcuda: %v, want only %s", libs, want)
	}
	if DeviceCount() != 0 {
		t.Fatal("DeviceCount > 0 after a failed Init")
	}
	if _, e := Open(0); e != err {
		t.Fatalf("Open after a failed Init: %v, want the Init error", e)
	}
	if _, e := DeviceUUIDs(); e != err {
		t.Fatalf("DeviceUUIDs after a failed Init: %v", e)
	}
	if Init() != err {
		t.Fatal("Init changed its result")
	}
	t.Log("real driver checks passed")
}
