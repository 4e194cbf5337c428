//go:build linux && cgo

package gpu

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/devices"
	"github.com/drmas-dev/drmas/internal/nvidiatest"
)

// TestRealDriverLibsWithoutGPU is a machine that has NVIDIA's user-space driver libraries
// (libnvidia-ml.so.1 and libcuda.so.1 of the 535 driver, installed by
// gpu/tools/install-nvidia-tools.sh) but no GPU, as a container with the driver libraries
// mounted and no device passed: in a child process whose loader finds them, NVML's real
// init must fail with its own code, the learner must choose the CPU engine with that reason
// in one line, DRMAS_LEARNER_ENGINE=gpu must be refused with it, and after NVML failed
// nothing may call into CUDA (libcuda.so.1 is never even loaded).
func TestRealDriverLibsWithoutGPU(t *testing.T) {
	if os.Getenv("DRMAS_REAL_NVML_CHILD") == "1" {
		realLibsChild(t)
		return
	}
	if nvidiatest.HasGPU() {
		t.Skip("this machine has an NVIDIA kernel driver: TestOpenLearner covers it")
	}
	dir, err := nvidiatest.DriverLibs()
	if err != nil {
		nvidiatest.Missing(t, err)
	}
	nvidiatest.RunTestChild(t, "TestRealDriverLibsWithoutGPU", "real driver library checks passed",
		"DRMAS_REAL_NVML_CHILD=1", "LD_LIBRARY_PATH="+dir, EngineEnv+"=")
}

func realLibsChild(t *testing.T) {
	cfg := testConfig(t)
	_, err := devices.Discover()
	var nd *devices.NoDriverError
	if !errors.As(err, &nd) || nd.Code == 0 {
		t.Fatalf("Discover with NVIDIA's NVML and no GPU: %v, want a *NoDriverError with NVML's code", err)
	}
	t.Logf("Discover: %v (NVML code %d)", err, nd.Code)
	if strings.Contains(nd.Reason, "not found") {
		t.Fatalf("the real NVML was not loaded: %v", err)
	}
	if libs, _ := nvidiatest.MappedLibs("libnvidia-ml.so"); len(libs) == 0 {
		t.Fatal("libnvidia-ml.so.1 is not mapped: NVML was not the real library")
	}
	c, err := OpenLearner(cfg, "m1")
	if err != nil {
		t.Fatal(err)
	}
	line := c.Line("m1")
	t.Log(line)
	if c.Device != nil || line != "learner m1: CPU engine ("+nd.Error()+")" || strings.Contains(line, "\n") {
		t.Fatalf("engine line %q: want the CPU engine with NVML's reason %q", line, nd.Error())
	}
	t.Setenv(EngineEnv, "gpu")
	if _, err := OpenLearner(cfg, "m1"); err == nil || !strings.Contains(err.Error(), nd.Reason) {
		t.Fatalf("%s=gpu without a GPU: %v, want an error naming %q", EngineEnv, err, nd.Reason)
	}
	if libs, _ := nvidiatest.MappedLibs("libcuda.so"); len(libs) != 0 {
		t.Fatalf("CUDA was loaded after NVML failed: %v", libs)
	}
	t.Log("real driver library checks passed")
}
