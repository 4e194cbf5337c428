package learn_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/gpu"
	"github.com/drmas-dev/drmas/gpu/cuda"
	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/stagetest"
)

// TestGPUEngineSeam runs two PPO updates through the GPU engine (on the gpu/ir interpreter,
// so it runs everywhere) and through the CPU engine from the same weights, and compares the
// statistics and the updated weights: the seam (Forward, Backward, Score, re-upload after
// each optimizer step) behaves like the CPU path.
func TestGPUEngineSeam(t *testing.T) {
	mc := tinyModel(t)
	mg := mc.Clone()
	exs := batch(t, mc, 6)
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := gpuengine.New(ir.NewInterp(ks), mg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	eng := learn.GPUEngine(tr)
	seqs := make([]model.Sequence, len(exs))
	for i := range exs {
		seqs[i] = exs[i].Seq
	}
	lp, err := eng.Score(mg, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lp {
		for j := range lp[i] {
			if d := math.Abs(float64(lp[i][j] - exs[i].Old[j])); d > 1e-4 {
				t.Fatalf("Score[%d][%d] differs by %g", i, j, d)
			}
		}
	}
	oc, og := model.NewAdamW(mc, model.DefaultAdamWConfig()), model.NewAdamW(mg, model.DefaultAdamWConfig())
	for step := 0; step < 2; step++ {
		sc, err := learn.Update(mc, oc, exs, hyper, 1)
		if err != nil {
			t.Fatal(err)
		}
		sg, err := learn.UpdateOn(eng, mg, og, exs, hyper, 1)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(sc.Loss-sg.Loss) > 1e-4*(1+math.Abs(sc.Loss)) || math.Abs(sc.GradNorm-sg.GradNorm) > 1e-3*sc.GradNorm {
			t.Fatalf("step %d: CPU loss %g grad norm %g, GPU engine %g %g", step, sc.Loss, sc.GradNorm, sg.Loss, sg.GradNorm)
		}
	}
	pc, pg := mc.Params(), mg.Params()
	for i := range pc {
		for j := range pc[i].Data {
			// Two AdamW steps of lr 1e-3 move a weight by ≤ 2e-3; the engines agree far closer.
			if d := math.Abs(float64(pc[i].Data[j] - pg[i].Data[j])); d > 1e-4 {
				t.Fatalf("%s[%d] differs by %g after two updates", pc[i].Name, j, d)
			}
		}
	}
}

// TestEngineChoice checks the learner's engine choice and its one line. Without a GPU (CI) it
// is the CPU engine with the reason; DRMAS_LEARNER_ENGINE overrides.
func TestEngineChoice(t *testing.T) {
	cfg := stagetest.Config(t, "math")
	m := tinyModel(t)
	var lines []string
	logf := func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }

	t.Setenv(gpu.EngineEnv, "cpu")
	eng, release, err := learn.EngineFor(cfg, "m1", m, logf)
	if err != nil || eng != learn.CPU {
		t.Fatalf("forced cpu: %v %v", eng, err)
	}
	release()
	if len(lines) != 1 || lines[0] != "learner m1: CPU engine ("+gpu.EngineEnv+"=cpu)" {
		t.Fatalf("lines %q", lines)
	}
	t.Setenv(gpu.EngineEnv, "tpu")
	if _, _, err := learn.EngineFor(cfg, "m1", m, logf); err == nil {
		t.Fatal("bad engine setting accepted")
	}
	t.Setenv(gpu.EngineEnv, "")
	lines = nil
	eng, release, err = learn.EngineFor(cfg, "m1", m, logf)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if len(lines) != 1 {
		t.Fatalf("lines %q", lines)
	}
	t.Log(lines[0])
	if cuda.Init() != nil {
		if eng != learn.CPU || !strings.HasPrefix(lines[0], "learner m1: CPU engine (") || strings.Count(lines[0], "\n") > 0 {
			t.Fatalf("without CUDA: engine %v, line %q", eng, lines[0])
		}
		t.Setenv(gpu.EngineEnv, "gpu")
		if _, _, err := learn.EngineFor(cfg, "m1", m, logf); err == nil {
			t.Fatal("DRMAS_LEARNER_ENGINE=gpu without a GPU succeeded")
		} else if !strings.Contains(err.Error(), "cannot use a GPU") {
			t.Fatalf("error %v", err)
		}
	} else if eng == learn.CPU || !strings.HasPrefix(lines[0], "learner m1: GPU engine on ") {
		t.Fatalf("with CUDA: engine %v, line %q", eng, lines[0])
	}
	// The line is printed once per process and model while it does not change.
	t.Setenv(gpu.EngineEnv, "")
	before := len(lines)
	if _, release, err := learn.EngineFor(cfg, "m1", m, logf); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
	if len(lines) != before {
		t.Fatalf("engine line repeated: %q", lines)
	}
}
