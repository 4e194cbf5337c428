package learn

import (
	"errors"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/gpu"
)

// TestGPUStartFailure: a GPU engine that fails to start falls back to the CPU engine with the
// reason, unless DRMAS_LEARNER_ENGINE=gpu requires the GPU: then it is an error.
func TestGPUStartFailure(t *testing.T) {
	boom := errors.New("module load failed")
	c, err := startFailed(false, boom)
	if err != nil || c.Device != nil || !strings.Contains(c.Reason, "GPU engine failed to start: module load failed") {
		t.Fatalf("auto: %+v %v", c, err)
	}
	if _, err := startFailed(true, boom); !errors.Is(err, boom) || !strings.Contains(err.Error(), "DRMAS_LEARNER_ENGINE=gpu but the GPU engine failed to start") {
		t.Fatalf("required: %v", err)
	}
	t.Setenv(gpu.EngineEnv, " GPU ")
	if !gpu.Required() {
		t.Fatal("DRMAS_LEARNER_ENGINE=' GPU ' is not read as gpu")
	}
	t.Setenv(gpu.EngineEnv, "auto")
	if gpu.Required() {
		t.Fatal("auto read as gpu")
	}
}
