// Package warmup is the warm-up stage: supervised training of each model from scratch on
// demonstrations the workflow's expert generates (with a controlled share of plausible
// mistakes), publishing checkpoint step 0. It stands in for the pretrained LLM, so RL starts
// from a policy that is sometimes right. Deterministic: same config and seed ⇒ same bytes.
package warmup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hf"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/internal/progress"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/workflows"
)

// Result summarises a warm-up.
type Result struct {
	Skipped bool
	// Loss is the final mean token loss per model (the mean over the last 10% of steps).
	Loss  map[string]float64
	Demos map[string]int
}

// Digest is the config digest of the warm-up checkpoint.
func Digest(cfg *configs.Config) string {
	return configs.Digest(struct {
		Seed     uint64
		Workflow configs.Workflow
		Warmup   configs.Warmup
		Agents   map[string]configs.Agent
		Models   map[string]configs.Model
	}{cfg.Seed, cfg.Workflow, cfg.Warmup, cfg.Agents, cfg.Models})
}

// Run trains every model and publishes step 0. If step 0 is committed already, it does
// nothing; if that step 0 was warmed up with other settings (its config digest differs), it
// says so: the run keeps its step 0 (everything after it was trained from it). Its errors name
// the stage once ("warmup: …", a *stages.Error).
func Run(ctx context.Context, env *stages.Env) (*Result, error) {
	res, err := runStage(ctx, env)
	if err != nil {
		return nil, stages.Fail(ctx, "warmup", err)
	}
	return res, nil
}

func runStage(ctx context.Context, env *stages.Env) (*Result, error) {
	cfg := env.Config
	if m, _, err := commit.Read(ctx, env.Bucket, layout.CheckpointDir(cfg.Run, 0)); err != nil && !errors.Is(err, commit.ErrNotCommitted) {
		return nil, err
	} else if err == nil {
		env.Logf("warmup: checkpoint step 0 already committed")
		if d := Digest(cfg); m.ConfigDigest != d {
			env.Logf("warmup: warning: step 0 of run %s was warmed up with other settings (seed, workflow, warmup, agents or models; config digest %.12s, this config %.12s): it is kept; warm up under another --run to use these",
				cfg.Run, m.ConfigDigest, d)
		}
		if err := checkpoints.SetLatest(ctx, env.Bucket, cfg.Run, 0); err != nil {
			return nil, err
		}
		return &Result{Skipped: true}, nil
	}
	wf, err := stages.Workflow(cfg)
	if err != nil {
		return nil, err
	}
	set := &checkpoints.Set{Step: 0, Parent: checkpoints.NoParent, Models: map[string]*model.Model{}}
	toks := map[string]actors.Tokenizer{} // per agent: its model's
	for _, id := range cfg.ModelNames() {
		if !cfg.Models[id].IsHF() {
			continue
		}
		h, err := loadBase(ctx, env, id)
		if err != nil {
			return nil, err
		}
		if set.HF == nil {
			set.HF = map[string]*checkpoints.HFModel{}
		}
		set.HF[id] = h
		tok, _, err := hfmodel.ChatTokenizer(h.Dir, h.Config, cfg.Models[id].ChatDate)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", id, err)
		}
		for _, a := range cfg.AgentsOf(id) {
			toks[a] = tok
		}
	}
	demos, err := DemonstrationsWith(cfg, wf, func(agent string) actors.Tokenizer {
		if t, ok := toks[agent]; ok {
			return t
		}
		return actors.Bytes{}
	})
	if err != nil {
		return nil, err
	}
	res := &Result{Loss: map[string]float64{}, Demos: map[string]int{}}
	for _, id := range cfg.ModelNames() {
		if cfg.Models[id].External() {
			continue // served elsewhere (openai backend without sizes): nothing to warm up
		}
		var seqs []model.Sequence
		for _, a := range cfg.AgentsOf(id) {
			seqs = append(seqs, demos[a]...)
		}
		if len(seqs) == 0 && cfg.Warmup.Steps != 0 { // with none, the model is published as it is
			return nil, fmt.Errorf("model %s serves no agent of workflow %s", id, wf.Name())
		}
		var loss float64
		if h := set.HF[id]; h != nil {
			loss, err = TrainHF(ctx, env, id, cfg, h, seqs)
		} else {
			var m *model.Model
			m, loss, err = Train(ctx, env, id, cfg, seqs)
			set.Models[id] = m
		}
		if err != nil {
			return nil, err
		}
		res.Loss[id] = loss
		res.Demos[id] = len(seqs)
	}
	if _, err := checkpoints.Publish(ctx, env.Bucket, cfg.Run, set, Digest(cfg)); err != nil {
		return nil, err
	}
	for _, id := range set.ModelNames() {
		if cfg.Models[id].IsHF() && cfg.Warmup.Steps == 0 {
			what := "its base %s untrained"
			if cfg.Models[id].LoRA != nil {
				what = "a new LoRA adapter (B = 0) over its base %s"
			}
			env.Logf("warmup: model %s is "+what+" (warmup.steps: 0); published step 0", id, cfg.Models[id].HF)
			continue
		}
		env.Logf("warmup: model %s trained on %d demonstrations, final loss %.4f; published step 0", id, res.Demos[id], res.Loss[id])
	}
	return res, nil
}

// loadBase loads model id's base folder (models.<id>.hf, fetched into the cache when it is in
// a store) after checking that a training step fits in memory; with models.<id>.lora, what
// trains is a new LoRA adapter over it.
func loadBase(ctx context.Context, env *stages.Env, id string) (*checkpoints.HFModel, error) {
	dir, err := env.HF().BaseFolder(ctx, id)
	if err != nil {
		return nil, err
	}
	hc, err := hf.ReadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("models.%s.hf: %w", id, err)
	}
	if err := hfmodel.CheckMemory(env.Config, id, hc); err != nil {
		return nil, err
	}
	load := hf.LoadLLMContext
	if env.Config.Models[id].LoRA != nil {
		load = hf.LoadFrozenLLM // the base under an adapter never trains: BF16 matrices stay BF16
	}
	m, hc, err := load(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("models.%s.hf: %w", id, err)
	}
	h := &checkpoints.HFModel{Base: env.Config.Models[id].HF, Dir: dir, Config: hc, Model: m}
	if lc := env.Config.Models[id].LoRA; lc != nil {
		// B = 0: step 0 samples as the base until the warm-up trains the adapter.
		c := lc.WithDefaults()
		h.DropoutSeed = seeds.Derive(env.Config.Seed, "lora", id)
		if h.Model, err = model.NewLoRA(m, model.LoRAConfig{R: c.R, Alpha: c.Alpha, Dropout: c.Dropout, Targets: c.TargetModules}, h.DropoutSeed); err != nil {
			return nil, fmt.Errorf("models.%s.lora: %w", id, err)
		}
	}
	if c, ok := h.Model.(model.Checkpointing); ok {
		// The warm-up's demonstrations are short: auto leaves it to the learner's plan.
		c.SetActivationCheckpointing(env.Config.Learn.Checkpointing() == "on")
	}
	return h, nil
}

// Demonstrations returns the expert turns per agent as token sequences of the built-in
// policy's tokenizer.
func Demonstrations(cfg *configs.Config, wf workflows.Workflow) map[string][]model.Sequence {
	out, _ := DemonstrationsWith(cfg, wf, func(string) actors.Tokenizer { return actors.Bytes{} })
	return out
}

// DemonstrationsWith returns the expert turns per agent as token sequences of the agent's
// tokenizer (tok): the same turns whatever the tokenizers.
func DemonstrationsWith(cfg *configs.Config, wf workflows.Workflow, tok func(agent string) actors.Tokenizer) (map[string][]model.Sequence, error) {
	rng := rand.New(rand.NewPCG(seeds.Derive(cfg.Seed, "warmup-demos"), 1))
	tasks := wf.Tasks(seeds.Derive(cfg.Seed, "warmup-tasks"), workflows.Train, cfg.Warmup.Demos)
	out := map[string][]model.Sequence{}
	for _, t := range tasks {
		for _, d := range wf.Demonstrations(t, rng, cfg.Warmup.Noise) {
			tk := tok(d.Agent)
			prompt, err := tk.PromptIDs(d.Agent, d.Prompt)
			if err != nil {
				return nil, err
			}
			out[d.Agent] = append(out[d.Agent], model.Sequence{Prompt: prompt, Response: tk.TargetIDs(d.Response)})
		}
	}
	return out, nil
}

// Train fits a fresh built-in model to seqs with token-mean cross-entropy, AdamW (cosine
// decay) and grad clipping at 1. It returns the model and the mean loss of the last 10% of
// steps.
func Train(ctx context.Context, env *stages.Env, id string, cfg *configs.Config, seqs []model.Sequence) (*model.Model, float64, error) {
	mc := cfg.Models[id].Engine()
	if err := fits(seqs, mc.Context, fmt.Sprintf("raise models.%s.context", id), id); err != nil {
		return nil, 0, err
	}
	m, err := model.New(mc, seeds.Derive(cfg.Seed, "init", id))
	if err != nil {
		return nil, 0, fmt.Errorf("model %s: %w", id, err)
	}
	loss, err := fit(ctx, env, id, cfg, m, seqs)
	return m, loss, err
}

// TrainHF fine-tunes Hugging Face model h on seqs as Train trains a built-in model, for
// warmup.steps steps (none: the base as it is).
func TrainHF(ctx context.Context, env *stages.Env, id string, cfg *configs.Config, h *checkpoints.HFModel, seqs []model.Sequence) (float64, error) {
	if cfg.Warmup.Steps == 0 {
		return math.NaN(), nil
	}
	raise := fmt.Sprintf("use a model with a longer context (max_position_embeddings in %s/config.json)", h.Dir)
	if err := fits(seqs, h.Config.ArchConfig().Context, raise, id); err != nil {
		return 0, err
	}
	return fit(ctx, env, id, cfg, h.Model, seqs)
}

// fits checks that every demonstration fits a context of n tokens.
func fits(seqs []model.Sequence, n int, raise, id string) error {
	for i, s := range seqs {
		if len(s.Prompt)+len(s.Response) > n {
			return fmt.Errorf("demonstration %d of model %s has %d tokens, more than its context %d: %s",
				i, id, len(s.Prompt)+len(s.Response), n, raise)
		}
	}
	return nil
}

// fit trains m on seqs: warmup.steps steps of warmup.batch demonstrations drawn with the
// model's seed, token-mean cross-entropy, AdamW at warmup.lr with cosine decay, grad clipping
// at 1. It returns the mean loss of the last 10% of steps.
func fit(ctx context.Context, env *stages.Env, id string, cfg *configs.Config, m model.Trainable, seqs []model.Sequence) (float64, error) {
	ocfg := model.DefaultAdamWConfig()
	ocfg.LR = cfg.Warmup.LR
	opt := m.NewOptimizer(ocfg)
	g := m.NewGradBuf()
	rng := rand.New(rand.NewPCG(seeds.Derive(cfg.Seed, "warmup-batches", id), 2))
	steps, B := cfg.Warmup.Steps, cfg.Warmup.Batch
	bar := progress.New(env.Progress, int64(steps), "warmup "+id, "steps")
	var tail float64
	tailN := 0
	batch := make([]model.Sequence, B)
	for step := 0; step < steps; step++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		for i := range batch {
			batch[i] = seqs[rng.IntN(len(seqs))]
		}
		pass, err := m.TrainForward(batch, 1)
		if err != nil {
			return 0, fmt.Errorf("model %s: %w", id, err)
		}
		lp := pass.LogProbs()
		tokens := 0
		for _, l := range lp {
			tokens += len(l)
		}
		d := make([][]float32, len(lp))
		loss := 0.0
		for i, l := range lp {
			d[i] = make([]float32, len(l))
			for t := range l {
				d[i][t] = -1 / float32(tokens)
				loss -= float64(l[t])
			}
		}
		loss /= float64(tokens)
		g.Zero()
		if err := pass.Backward(d, nil, g); err != nil {
			return 0, fmt.Errorf("model %s: %w", id, err)
		}
		if f, ok := model.ClipScale(g.Norm(), 1); ok { // model.ClipGradNorm on any GradBuf
			g.Scale(f)
		}
		opt.LR = cfg.Warmup.LR * 0.5 * (1 + math.Cos(math.Pi*float64(step)/float64(steps)))
		if err := opt.Apply(g); err != nil {
			return 0, fmt.Errorf("model %s: %w", id, err)
		}
		if step >= steps-max(1, steps/10) {
			tail += loss
			tailN++
		}
		if step%10 == 0 {
			bar.Describe(fmt.Sprintf("warmup %s loss %.3f", id, loss))
		}
		bar.Add(1)
	}
	bar.Finish()
	if tailN == 0 {
		return math.NaN(), nil
	}
	return tail / float64(tailN), nil
}
