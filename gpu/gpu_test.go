package gpu

import (
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/gpu/cuda"
)

func testConfig(t *testing.T) *configs.Config {
	t.Helper()
	c := configs.Default()
	c.Run = "t"
	c.Models = map[string]configs.Model{"m1": {Dim: 16, Layers: 1, Heads: 2, Context: 96, FFMult: 2, TiedHead: true}}
	c.Agents = map[string]configs.Agent{"solver": {Model: "m1"}, "verifier": {Model: "m1"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOpenLearner checks the engine choice on whatever machine runs it: the CPU engine with a
// one-line reason without a GPU, the placed GPU with one.
func TestOpenLearner(t *testing.T) {
	cfg := testConfig(t)
	t.Setenv(EngineEnv, "")
	c, err := OpenLearner(cfg, "m1")
	if err != nil {
		t.Fatal(err)
	}
	line := c.Line("m1")
	t.Log(line)
	if strings.Contains(line, "\n") {
		t.Fatalf("engine line spans lines: %q", line)
	}
	if cuda.Init() != nil {
		if c.Device != nil || c.Where != "cpu" || !strings.HasPrefix(line, "learner m1: CPU engine (") {
			t.Fatalf("without CUDA: %+v %q", c, line)
		}
		if _, err := OpenLearner(cfg, "m1"); err != nil {
			t.Fatal(err)
		}
		t.Setenv(EngineEnv, "gpu")
		if _, err := OpenLearner(cfg, "m1"); err == nil {
			t.Fatal("DRMAS_LEARNER_ENGINE=gpu succeeded without a GPU")
		}
	} else {
		if c.Device == nil || !strings.HasPrefix(line, "learner m1: GPU engine on ") {
			t.Fatalf("with CUDA: %+v %q", c, line)
		}
		again, err := OpenLearner(cfg, "m1")
		if err != nil || again.Device != c.Device {
			t.Fatalf("device not shared: %v %v", again.Device, err)
		}
	}
	t.Setenv(EngineEnv, "CPU")
	if c, err := OpenLearner(cfg, "m1"); err != nil || c.Device != nil || c.Line("m1") != "learner m1: CPU engine (DRMAS_LEARNER_ENGINE=cpu)" {
		t.Fatalf("forced cpu: %+v %v", c, err)
	}
	t.Setenv(EngineEnv, "fpga")
	if _, err := OpenLearner(cfg, "m1"); err == nil {
		t.Fatal("unknown engine accepted")
	}
	t.Setenv(EngineEnv, "")
	if c, err := OpenLearner(cfg, "nope"); err != nil || c.Device != nil {
		t.Fatal("unknown model placed on a GPU")
	}
}
