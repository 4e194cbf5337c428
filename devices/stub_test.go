//go:build linux && cgo

package devices

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/nvidiatest"
)

// TestStubNVMLLibrary: a libnvidia-ml.so.1 that lacks NVML's functions (a stub, a broken
// install) is "no NVIDIA driver" naming what is missing, not the loader ending the process
// with "undefined symbol" at the first NVML call (which go-nvml makes without looking first).
func TestStubNVMLLibrary(t *testing.T) {
	if os.Getenv("DRMAS_STUB_NVML_CHILD") == "1" {
		_, err := Discover()
		var nd *NoDriverError
		if !errors.As(err, &nd) || !strings.Contains(nd.Reason, "libnvidia-ml.so.1 lacks nvmlInit_v2") {
			t.Fatalf("Discover with a stub NVML: %v", err)
		}
		if _, err := Discover(); !errors.As(err, &nd) { // later calls: the same error, no NVML call
			t.Fatalf("second Discover: %v", err)
		}
		t.Log("stub nvml checks passed")
		return
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "stub.c")
	if err := os.WriteFile(src, []byte("int drmas_stub_nvml;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(dir, "libnvidia-ml.so.1"), src).CombinedOutput(); err != nil {
		t.Fatalf("build the stub library with %s (a C compiler is needed, as for cgo): %v\n%s", cc, err, out)
	}
	nvidiatest.RunTestChild(t, "TestStubNVMLLibrary", "stub nvml checks passed", "DRMAS_STUB_NVML_CHILD=1", "LD_LIBRARY_PATH="+dir)
}
