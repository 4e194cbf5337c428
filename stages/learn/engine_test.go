package learn_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"

	"github.com/drmas-dev/drmas/gpu"
	"github.com/drmas-dev/drmas/gpu/cuda"
	gpuengine "github.com/drmas-dev/drmas/gpu/engine"
	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

// TestGPUEngineSeam runs PPO updates through the GPU engine (on the gpu/ir interpreter, so it
// runs everywhere), with the optimizer on the device and on the host, and through the CPU
// engine from the same weights, and compares the statistics (per-agent gradient norms
// included), the updated weights and the optimizer moments. Two agents, one of them over two
// micro-batches, and a clip norm below the gradient's, so accumulation, the agents' sum and
// clipping all run.
func TestGPUEngineSeam(t *testing.T) {
	// The objective's options reach the engines as per-token weights of the log-probs and, with
	// an entropy bonus, of the entropies: the device's entropy backward runs too.
	withEntropy := hyper
	withEntropy.Objective = learn.Objective{LossAgg: "seq-mean-token-mean", EntropyCoef: 0.05, ClipC: 3}
	for _, c := range []struct {
		name    string
		hostOpt bool
		hyper   learn.Hyper
	}{
		{"device optimizer", false, hyper},
		{"host optimizer", true, hyper},
		{"device optimizer, entropy bonus", false, withEntropy},
	} {
		hostOpt, hyper := c.hostOpt, c.hyper
		t.Run(c.name, func(t *testing.T) {
			mc := tinyModel(t)
			mg := mc.Clone()
			m0 := mc.Clone()
			exs := batch(t, mc, 11) // agent a: 7 rows (2 micro-batches of 4), agent b: 4
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
			if hostOpt {
				eng = learn.GPUEngineHostOptimizer(tr)
			}
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
			_, _, st0, err := learn.Gradients(mc, exs, hyper)
			if err != nil {
				t.Fatal(err)
			}
			clip := st0.GradNorm / 2
			oc, og := model.NewAdamW(mc, model.DefaultAdamWConfig()), model.NewAdamW(mg, model.DefaultAdamWConfig())
			near := func(a, b, rel float64) bool { return math.Abs(a-b) <= rel*(1e-9+math.Abs(a)) }
			for step := 0; step < 3; step++ {
				sc, err := learn.Update(mc, oc, exs, hyper, clip)
				if err != nil {
					t.Fatal(err)
				}
				sg, err := learn.UpdateOn(eng, mg, og, exs, hyper, clip)
				if err != nil {
					t.Fatal(err)
				}
				if !near(sc.Loss, sg.Loss, 1e-4) || !near(sc.GradNorm, sg.GradNorm, 1e-3) || sc.Tokens != sg.Tokens {
					t.Fatalf("step %d: CPU loss %g grad norm %g, GPU engine %g %g", step, sc.Loss, sc.GradNorm, sg.Loss, sg.GradNorm)
				}
				for a, ac := range sc.Agents {
					ag := sg.Agents[a]
					if ag == nil || !near(ac.GradNorm, ag.GradNorm, 1e-3) || ac.Tokens != ag.Tokens || ac.ClipTokens != ag.ClipTokens {
						t.Fatalf("step %d agent %s: CPU %+v, GPU engine %+v", step, a, ac, ag)
					}
				}
			}
			if og.Steps != 3 {
				t.Fatalf("optimizer steps %d, want 3", og.Steps)
			}
			// With the device optimizer the host weights are stale until Sync.
			stale := true
			for i, p := range mg.Params() {
				for j := range p.Data {
					stale = stale && p.Data[j] == m0.Params()[i].Data[j]
				}
			}
			if stale != !hostOpt {
				t.Fatalf("host weights unchanged before Sync: %v (host optimizer %v)", stale, hostOpt)
			}
			if err := eng.Sync(); err != nil {
				t.Fatal(err)
			}
			pc, pg := mc.Params(), mg.Params()
			for i := range pc {
				for j := range pc[i].Data {
					// Three AdamW steps of lr 1e-3 move a weight by ≤ 3e-3; the engines agree far closer.
					if d := math.Abs(float64(pc[i].Data[j] - pg[i].Data[j])); d > 1e-4 {
						t.Fatalf("%s[%d] differs by %g after three updates", pc[i].Name, j, d)
					}
				}
			}
			m1c, m2c := oc.Moments()
			m1g, m2g := og.Moments()
			for j := range m1c {
				if math.Abs(float64(m1c[j]-m1g[j])) > 1e-4 || math.Abs(float64(m2c[j]-m2g[j])) > 1e-6 {
					t.Fatalf("moments[%d]: CPU (%g, %g), GPU engine (%g, %g)", j, m1c[j], m2c[j], m1g[j], m2g[j])
				}
			}
		})
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

// TestLearnStageOnGPUEngine runs the learn stage end to end (2 epochs × 2 mini-batches, two
// agents on one model) with the CPU engine and with the GPU engine (on the GPU where CUDA
// initialises, else on the interpreter), from the same rollout: the GPU engine's device optimizer must publish a checkpoint that moved
// away from step 0 (its Sync ran before publishing) and agrees with the CPU engine's weights,
// optimizer state and metrics.
func TestLearnStageOnGPUEngine(t *testing.T) {
	ctx := context.Background()
	type out struct {
		step0, step1 *checkpoints.Set
		metrics      []learn.MetricsRow
		log          string
	}
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 2, 2
	// The barely warmed-up test policy scores every sample alike (all advantages 0, no
	// gradient), so the rollout's scores are replaced by varied ones.
	var parts [][]shards.Row
	{
		env := stagetest.Env(t, cfg)
		if _, err := warmup.Run(ctx, env); err != nil {
			t.Fatal(err)
		}
		if _, err := rollout.Run(ctx, env, rollout.Options{Step: stages.LatestStep}); err != nil {
			t.Fatal(err)
		}
		_, parts = stagetest.ReadRollout(t, env, 0)
		stagetest.VaryScores(parts, 0)
	}
	run := func() out {
		env := withRollout(t, cfg, parts)
		var o out
		var log strings.Builder
		env.Log = &log
		res, err := learn.Run(ctx, env, learn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		o.log, o.metrics = log.String(), res.Metrics
		if o.step0, err = checkpoints.LoadStep(ctx, env.Bucket, "t", 0, true); err != nil {
			t.Fatal(err)
		}
		if o.step1, err = checkpoints.LoadStep(ctx, env.Bucket, "t", 1, true); err != nil {
			t.Fatal(err)
		}
		return o
	}
	t.Setenv(gpu.EngineEnv, "cpu")
	cpu := run()
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	if cuda.Init() == nil {
		t.Setenv(gpu.EngineEnv, "gpu") // a GPU machine: the real engine choice, on the GPU
	} else {
		learn.SetTestDevice(t, func() gpuengine.Device { return ir.NewInterp(ks) })
	}
	dev := run()
	if !strings.Contains(dev.log, "learner m1: GPU engine on ") {
		t.Fatalf("the learn stage did not use the GPU engine:\n%s", dev.log)
	}

	p0, pc, pd := cpu.step0.Models["m1"].Params(), cpu.step1.Models["m1"].Params(), dev.step1.Models["m1"].Params()
	moved, worst := 0.0, 0.0
	for i := range pd {
		for j := range pd[i].Data {
			moved = max(moved, math.Abs(float64(pd[i].Data[j]-p0[i].Data[j])))
			worst = max(worst, math.Abs(float64(pd[i].Data[j]-pc[i].Data[j])))
		}
	}
	oc, od := cpu.step1.Optims["m1"], dev.step1.Optims["m1"]
	t.Logf("GPU engine vs CPU engine: weights moved up to %.3g from step 0, differ by up to %.3g; %d optimizer steps", moved, worst, od.Steps)
	if moved < 1e-4 {
		t.Fatalf("the GPU engine published step 1 with the step-0 weights (moved %g): updates not synced", moved)
	}
	if worst > 1e-4 {
		t.Fatalf("GPU and CPU engines' step-1 weights differ by %g", worst)
	}
	if oc.Steps != od.Steps || od.Steps != 4 {
		t.Fatalf("optimizer steps: CPU %d, GPU engine %d, want 4", oc.Steps, od.Steps)
	}
	mc, vc := oc.Moments()
	md, vd := od.Moments()
	for j := range mc {
		if math.Abs(float64(mc[j]-md[j])) > 1e-4 || math.Abs(float64(vc[j]-vd[j])) > 1e-6 {
			t.Fatalf("moments[%d]: CPU (%g, %g), GPU engine (%g, %g)", j, mc[j], vc[j], md[j], vd[j])
		}
	}
	if len(cpu.metrics) != len(dev.metrics) {
		t.Fatalf("metrics rows: CPU %d, GPU engine %d", len(cpu.metrics), len(dev.metrics))
	}
	for i, c := range cpu.metrics {
		d := dev.metrics[i]
		if c.Agent != d.Agent || c.Tokens != d.Tokens || c.Updates != d.Updates ||
			math.Abs(c.Loss-d.Loss) > 1e-4*(1+math.Abs(c.Loss)) || math.Abs(c.GradNorm-d.GradNorm) > 1e-3*(1e-6+c.GradNorm) {
			t.Fatalf("metrics row %d: CPU %+v\nGPU engine %+v", i, c, d)
		}
	}
}
