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

// TestGPULoRAEngine: PPO updates of a LoRA adapter through the GPU engine's LoRATrainer (on
// the gpu/ir interpreter) and through the CPU engine from the same adapter agree in their
// statistics and in A and B (AdamW on the host for both; the trainer re-uploads the adapter
// after each step), and the learner picks that engine for a LoRA when a device is there.
func TestGPULoRAEngine(t *testing.T) {
	base := tinyLLM(t)
	adapter := func() *model.LoRA {
		l, err := model.NewLoRA(base, model.LoRAConfig{R: 2, Alpha: 4, Targets: []string{"q_proj", "v_proj", "o_proj", "down_proj"}}, 3)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	lc, lg := adapter(), adapter()
	exs := batchOf(t, lc, 9, 40)
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	learn.SetTestDevice(t, func() gpuengine.Device { return ir.NewInterp(ks) })
	var lines []string
	eng, release, err := learn.EngineFor(stagetest.Config(t, "math"), "lora-under-test", lg, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if len(lines) != 1 || lines[0] != "learner lora-under-test: GPU engine on the test device" || eng == learn.CPU {
		t.Fatalf("engine lines %q", lines)
	}
	hyper := learn.Hyper{ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1, MicroBatch: 4}
	oc, og := lc.NewOptimizer(model.DefaultAdamWConfig()), lg.NewOptimizer(model.DefaultAdamWConfig())
	near := func(a, b, rel float64) bool { return math.Abs(a-b) <= rel*(1e-9+math.Abs(a)) }
	for step := 0; step < 3; step++ { // B = 0 at first: A's gradient starts at the second step
		sc, err := learn.Update(lc, oc, exs, hyper, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		sg, err := learn.UpdateOn(eng, lg, og, exs, hyper, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if sc.GradNorm == 0 || !near(sc.Loss, sg.Loss, 1e-4) || !near(sc.GradNorm, sg.GradNorm, 1e-3) || sc.Tokens != sg.Tokens {
			t.Fatalf("step %d: CPU loss %g grad norm %g, GPU engine %g %g", step, sc.Loss, sc.GradNorm, sg.Loss, sg.GradNorm)
		}
	}
	pc, pg := lc.Params(), lg.Params()
	moved := 0.0
	for i := range pc {
		for j := range pc[i].Data {
			if d := math.Abs(float64(pc[i].Data[j] - pg[i].Data[j])); d > 1e-4 {
				t.Fatalf("%s[%d] differs by %g after three updates", pc[i].Name, j, d)
			}
		}
	}
	fresh := adapter().Params()
	for i := range pc {
		for j := range pc[i].Data {
			moved = max(moved, math.Abs(float64(pc[i].Data[j]-fresh[i].Data[j])))
		}
	}
	if moved == 0 {
		t.Fatal("the updates left the adapter where it started")
	}
}
