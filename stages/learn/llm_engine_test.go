package learn_test

import (
	"fmt"
	"math"
	"testing"

	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

func tinyLLM(t *testing.T) *model.LLM { return learn.TinyLLM(t, 40) }

// TestGPULLMEngine: PPO updates of an LLM through the GPU engine's LLMTrainer (on the gpu/ir
// interpreter) and through the CPU engine from the same weights agree in their statistics and
// weights (AdamW on the host for both; the trainer re-uploads after each step), and the
// learner picks that engine for an LLM when a device is there.
func TestGPULLMEngine(t *testing.T) {
	mc := tinyLLM(t)
	mg := tinyLLM(t)
	exs := batchOf(t, mc, 9, 40)
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	learn.SetTestDevice(t, func() gpuengine.Device { return ir.NewInterp(ks) })
	var lines []string
	eng, release, err := learn.EngineFor(stagetest.Config(t, "math"), "llm-under-test", mg, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if len(lines) != 1 || lines[0] != "learner llm-under-test: GPU engine on the test device" || eng == learn.CPU {
		t.Fatalf("engine lines %q", lines)
	}
	hyper := learn.Hyper{ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1, MicroBatch: 4}
	oc, og := mc.NewOptimizer(model.DefaultAdamWConfig()), mg.NewOptimizer(model.DefaultAdamWConfig())
	near := func(a, b, rel float64) bool { return math.Abs(a-b) <= rel*(1e-9+math.Abs(a)) }
	for step := 0; step < 2; step++ {
		sc, err := learn.Update(mc, oc, exs, hyper, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		sg, err := learn.UpdateOn(eng, mg, og, exs, hyper, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if sc.GradNorm == 0 || !near(sc.Loss, sg.Loss, 1e-4) || !near(sc.GradNorm, sg.GradNorm, 1e-3) || sc.Tokens != sg.Tokens {
			t.Fatalf("step %d: CPU loss %g grad norm %g, GPU engine %g %g", step, sc.Loss, sc.GradNorm, sg.Loss, sg.GradNorm)
		}
	}
	pc, pg := mc.Params(), mg.Params()
	for i := range pc {
		for j := range pc[i].Data {
			if d := math.Abs(float64(pc[i].Data[j] - pg[i].Data[j])); d > 1e-4 {
				t.Fatalf("%s[%d] differs by %g after two updates", pc[i].Name, j, d)
			}
		}
	}
}
