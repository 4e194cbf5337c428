package learn_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/devices"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/learn"
	"github.com/drmas-dev/drmas/stages/normalize"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/stages/stagetest"
	"github.com/drmas-dev/drmas/stages/warmup"
)

func tinyModel(t *testing.T) *model.Model {
	t.Helper()
	cfg := model.DefaultConfig()
	cfg.Dim, cfg.Layers, cfg.Heads, cfg.Context, cfg.FFMult = 16, 1, 2, 32, 2
	m, err := model.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// batch builds examples for agents a and b with random sequences and advantages, with old
// log-probs from the model itself (so the first ratio is 1).
func batch(t *testing.T, m *model.Model, n int) []learn.Example {
	t.Helper()
	return batchOf(t, m, n, 256)
}

// batchOf is batch for any policy, with token ids below vocab.
func batchOf(t *testing.T, m model.Policy, n, vocab int) []learn.Example {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var exs []learn.Example
	for i := 0; i < n; i++ {
		seq := model.Sequence{Prompt: make([]int32, 1+rng.IntN(8)), Response: make([]int32, 1+rng.IntN(8))}
		for j := range seq.Prompt {
			seq.Prompt[j] = int32(rng.IntN(vocab))
		}
		for j := range seq.Response {
			seq.Response[j] = int32(rng.IntN(vocab))
		}
		agent := "a"
		if i%3 == 0 {
			agent = "b"
		}
		exs = append(exs, learn.Example{Agent: agent, Seq: seq, Advantage: float32(rng.NormFloat64())})
	}
	seqs := make([]model.Sequence, len(exs))
	for i := range exs {
		seqs[i] = exs[i].Seq
	}
	old, _, err := m.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range exs {
		exs[i].Old = old[i]
	}
	return exs
}

var hyper = learn.Hyper{ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1, MicroBatch: 4}

func TestFirstUpdateRatioIsExactlyOne(t *testing.T) {
	m := tinyModel(t)
	exs := batch(t, m, 12)
	_, _, st, err := learn.Gradients(m, exs, hyper)
	if err != nil {
		t.Fatal(err)
	}
	for a, as := range st.Agents {
		if as.SumRatio != float64(as.Tokens) || as.MaxRatio != 1 || as.ClipTokens != 0 || as.SumLogRatioSq != 0 {
			t.Fatalf("agent %s: ratios not exactly 1 before any update: sum %v over %d tokens, max %v, clipped %d",
				a, as.SumRatio, as.Tokens, as.MaxRatio, as.ClipTokens)
		}
	}
	// The loss at ratio 1 is −Σ A over tokens / N.
	want, n := 0.0, 0
	for _, ex := range exs {
		want -= float64(ex.Advantage) * float64(len(ex.Seq.Response))
		n += len(ex.Seq.Response)
	}
	if want /= float64(n); math.Abs(st.Loss-want) > 1e-9 {
		t.Fatalf("loss %v, want %v", st.Loss, want)
	}
}

// TestPerAgentGradNorms checks each agent's reported gradient norm against the gradient of that
// agent's loss computed on its own (rescaled from its token mean to the batch's token mean), and
// that the total is their sum.
func TestPerAgentGradNorms(t *testing.T) {
	m := tinyModel(t)
	exs := batch(t, m, 12)
	total, per, st, err := learn.Gradients(m, exs, hyper)
	if err != nil {
		t.Fatal(err)
	}
	sum := m.NewGrads()
	for _, agent := range []string{"a", "b"} {
		var own []learn.Example
		for _, ex := range exs {
			if ex.Agent == agent {
				own = append(own, ex)
			}
		}
		g, _, ost, err := learn.Gradients(m, own, hyper)
		if err != nil {
			t.Fatal(err)
		}
		g.Scale(float32(float64(ost.Tokens) / float64(st.Tokens)))
		want := g.Norm()
		if got := st.Agents[agent].GradNorm; math.Abs(got-want) > 1e-5*want || want == 0 {
			t.Fatalf("agent %s: grad norm %v, separately computed %v", agent, got, want)
		}
		if got := per[agent].Norm(); got != st.Agents[agent].GradNorm {
			t.Fatalf("agent %s: returned grads norm %v != reported %v", agent, got, st.Agents[agent].GradNorm)
		}
		sum.Add(per[agent])
	}
	if d := math.Abs(sum.Norm() - total.Norm()); d > 1e-6*total.Norm() {
		t.Fatalf("total grad norm %v != norm of the agents' sum %v", total.Norm(), sum.Norm())
	}
	if st.GradNorm != total.Norm() || st.GradNorm <= math.Max(st.Agents["a"].GradNorm, st.Agents["b"].GradNorm)*0.5 {
		t.Fatalf("grad norm %v vs agents %v %v", st.GradNorm, st.Agents["a"].GradNorm, st.Agents["b"].GradNorm)
	}
}

// TestReusedAgentGradientsMatchFresh: the step's gradients, one buffer cleared between agents,
// give the bits of a fresh buffer an agent (Gradients): the same total and agents' norms, so
// nothing of one agent's gradient reaches the next.
func TestReusedAgentGradientsMatchFresh(t *testing.T) {
	m := tinyModel(t)
	exs := batch(t, m, 12)
	want, _, wst, err := learn.Gradients(m, exs, hyper)
	if err != nil {
		t.Fatal(err)
	}
	got, gst, err := learn.GradientsReusing(m, exs, hyper)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Flat(), want.Flat()) {
		t.Fatal("total gradient differs from the one with a fresh buffer an agent")
	}
	for _, a := range []string{"a", "b"} {
		if gst.Agents[a].GradNorm != wst.Agents[a].GradNorm || wst.Agents[a].GradNorm == 0 {
			t.Fatalf("agent %s: norm %v, fresh buffers %v", a, gst.Agents[a].GradNorm, wst.Agents[a].GradNorm)
		}
	}
}

func TestSurrogateLossDecreases(t *testing.T) {
	m := tinyModel(t)
	exs := batch(t, m, 16)
	opt := model.NewAdamW(m, model.AdamWConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	var losses []float64
	for i := 0; i < 8; i++ {
		st, err := learn.Update(m, opt, exs, hyper, 1)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, st.Loss)
	}
	if !(losses[len(losses)-1] < losses[0]-1e-3) {
		t.Fatalf("surrogate loss did not decrease: %v", losses)
	}
	// After updates, ratios move and clipping engages somewhere.
	_, _, st, err := learn.Gradients(m, exs, hyper)
	if err != nil {
		t.Fatal(err)
	}
	clipped := 0
	for _, as := range st.Agents {
		clipped += as.ClipTokens
	}
	if clipped == 0 {
		t.Fatalf("no token clipped after 8 updates at lr 3e-3 (losses %v)", losses)
	}
}

func TestLearnStagePublishesAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	cfg := stagetest.Config(t, "math")
	cfg.Learn.Epochs, cfg.Learn.MiniBatches = 1, 1
	env := stagetest.Env(t, cfg)
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.Run(ctx, env, rollout.Options{Step: stages.LatestStep}); err != nil {
		t.Fatal(err)
	}
	if _, err := learn.Run(ctx, env, learn.Options{}); err == nil {
		t.Fatal("learn ran without advantages")
	}
	if _, err := normalize.Run(ctx, env, normalize.Options{Estimators: []string{"drmas"}}); err != nil {
		t.Fatal(err)
	}
	res, err := learn.Run(ctx, env, learn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Step != 1 {
		t.Fatalf("published step %d, want 1", res.Step)
	}
	agents := map[string]bool{}
	for _, r := range res.Metrics {
		agents[r.Agent] = true
		if _, err := devices.Discover(); errors.Is(err, devices.ErrNoDriver) && (r.GPUMemoryUsed != 0 || r.GPUUtilization != 0) {
			t.Fatalf("GPU telemetry on a machine without a GPU: %+v", r)
		} else if err == nil && r.GPUMemoryUsed == 0 {
			t.Fatalf("no GPU memory recorded on a machine with a GPU: %+v", r)
		}
		if r.ClipFrac != 0 || r.RatioMax != 1 {
			t.Fatalf("one epoch, one mini-batch: want ratio 1 and no clipping, got %+v", r)
		}
		// A barely warmed-up tiny policy may earn equal scores everywhere (all advantages 0);
		// then there is no gradient, otherwise there must be one.
		if r.Tokens == 0 || math.IsNaN(r.Loss) || (r.MeanAbsAdv > 0) != (r.GradNorm > 0) {
			t.Fatalf("empty metrics %+v", r)
		}
	}
	if !agents["*"] || !agents["solver"] || !agents["verifier"] {
		t.Fatalf("metrics rows for %v", agents)
	}
	if latest, err := checkpoints.ReadLatest(ctx, env.Bucket, "t"); err != nil || latest != 1 {
		t.Fatalf("LATEST = %d, %v", latest, err)
	}
	set, err := checkpoints.LoadStep(ctx, env.Bucket, "t", 1, true)
	if err != nil || set.Parent != 0 || set.Optims["m1"] == nil {
		t.Fatalf("step 1: %+v %v", set, err)
	}
	again, err := learn.Run(ctx, env, learn.Options{})
	if err != nil || !again.Skipped || again.Step != 1 {
		t.Fatalf("rerun: %+v %v", again, err)
	}
	if ok, _ := commit.IsCommitted(ctx, env.Bucket, layout.LearnDir("t", 0)); !ok {
		t.Fatal("metrics not committed")
	}
}

// TestUpdateRefusesANonFiniteGradient: a non-finite advantage, or a gradient that overflows
// float32 (here: weights pushed to 1e30 by an absurd learning rate), is an error that leaves the
// weights and the optimizer as they were, rather than an AdamW step that turns every weight
// into NaN (a checkpoint no reader accepts).
func TestUpdateRefusesANonFiniteGradient(t *testing.T) {
	for _, c := range []struct {
		name, want string
		adv        float64
		lr         float64
	}{
		{"NaN advantage", "advantage NaN is not finite", math.NaN(), 1e-3},
		{"infinite advantage", "advantage +Inf is not finite", math.Inf(1), 1e-3},
		{"overflowing gradient", "gradient norm is NaN", 0, 1e30},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := tinyModel(t)
			exs := batch(t, m, 12)
			opt := model.NewAdamW(m, model.AdamWConfig{LR: c.lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
			if c.lr > 1 {
				if _, err := learn.Update(m, opt, exs, hyper, 1); err != nil {
					t.Fatal(err)
				}
			} else {
				exs[5].Advantage = float32(c.adv)
			}
			before, steps := m.Clone(), opt.Steps
			mom := slices.Clone(func() []float32 { a, _ := opt.Moments(); return a }())
			st, err := learn.Update(m, opt, exs, hyper, 1)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("update with a gradient norm of %v: %v, want an error saying %q", st.GradNorm, err, c.want)
			}
			if a, _ := opt.Moments(); opt.Steps != steps || !slices.Equal(a, mom) {
				t.Fatalf("optimizer stepped: %d steps, want %d", opt.Steps, steps)
			}
			for i, p := range m.Params() {
				if !slices.Equal(p.Data, before.Params()[i].Data) {
					t.Fatalf("%s changed by a refused update", p.Name)
				}
			}
		})
	}
}

// TestLearnWithoutRolloutSaysWhatToRun: learn on an iteration never rolled out names the
// stage to run first, and the error still matches commit.ErrNotCommitted.
func TestLearnWithoutRolloutSaysWhatToRun(t *testing.T) {
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	_, err := learn.Run(context.Background(), env, learn.Options{Iteration: 4})
	if !errors.Is(err, commit.ErrNotCommitted) || !strings.Contains(err.Error(), "(run `drmas run-stage rollout --iter 4`, then normalize, first)") {
		t.Fatalf("error %v", err)
	}
}

// TestStagesWithoutRolloutAdviseTheEarlierIterations: learn and normalize of iteration 3, when
// only step 0 is published, advise the iterations before it (a rollout of iteration 3 would be
// refused: it samples from step 3); of iteration 0, the rollout.
func TestStagesWithoutRolloutAdviseTheEarlierIterations(t *testing.T) {
	ctx := context.Background()
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	if _, err := warmup.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	want := "(run iterations 0..2 first (`drmas run --iters 3` does))"
	if _, err := learn.Run(ctx, env, learn.Options{Iteration: 3}); !errors.Is(err, commit.ErrNotCommitted) || !strings.Contains(err.Error(), want) {
		t.Fatalf("learn: %v, want %s", err, want)
	}
	if _, err := normalize.Run(ctx, env, normalize.Options{Iteration: 3}); !errors.Is(err, commit.ErrNotCommitted) || !strings.Contains(err.Error(), want) {
		t.Fatalf("normalize: %v, want %s", err, want)
	}
	want = "(run `drmas run-stage rollout --iter 0`, then normalize, first)"
	if _, err := learn.Run(ctx, env, learn.Options{Iteration: 0}); !errors.Is(err, commit.ErrNotCommitted) || !strings.Contains(err.Error(), want) {
		t.Fatalf("learn of iteration 0: %v, want %s", err, want)
	}
}

// TestLearnUnreadableRolloutIsNotMissing: a rollout manifest that does not parse is reported as
// such, not as "not committed" with advice to run rollout (which finds it committed and does
// nothing).
func TestLearnUnreadableRolloutIsNotMissing(t *testing.T) {
	env := stagetest.Env(t, stagetest.Config(t, "math"))
	ctx := context.Background()
	if err := env.Bucket.Put(ctx, layout.RolloutDir(env.Config.Run, 0)+"/"+commit.ManifestName, strings.NewReader("{"), 1); err != nil {
		t.Fatal(err)
	}
	_, err := learn.Run(ctx, env, learn.Options{Iteration: 0})
	if err == nil || errors.Is(err, commit.ErrNotCommitted) || strings.Contains(err.Error(), "not committed") ||
		!strings.HasPrefix(err.Error(), "learn iter 0: "+layout.RolloutDir(env.Config.Run, 0)+"/"+commit.ManifestName) {
		t.Fatalf("learn on an unreadable rollout manifest: %v", err)
	}
}
