package stages

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/actors/openai"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/hfmodel"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/model"
	"github.com/drmas-dev/drmas/workflows"
)

// Workflow builds the configured workflow and checks that the config maps exactly its agents
// to models (configs.Config.NewWorkflow; a loaded config has passed the same check).
func Workflow(cfg *configs.Config) (workflows.Workflow, error) {
	return cfg.NewWorkflow()
}

// Backends maps every configured agent to the backend serving its model: in process from set
// (backend local), or an OpenAI-compatible server (backend openai: vLLM, SGLang, drmas serve;
// the API key from the environment variable models.<id>.openai.api_key_env). Agents that share
// a model share one backend and its concurrency budget. BackendPlan describes the result.
//
// The rows record set.Step as the policy version. An openai backend of a model with sizes
// (drmas trains it; `drmas serve` serves its checkpoints) therefore samples only with that
// step: its first Generate (or actors.Ready) waits for a server that reports an older step to
// load set.Step, and a server on another checkpoint fails the stage
// (openai.Options.RequireVersion). A Hugging Face model on an openai backend samples with its
// own tokenizer and the weights of set.Step: its LoRA adapter of that step, or its step folder
// reloaded into the server (hfmodel.Env.OpenAIBackend).
func Backends(cfg *configs.Config, set *checkpoints.Set) (map[string]actors.Backend, error) {
	return BackendsLogged(&Env{Config: cfg}, set)
}

// BackendPlan describes which backend serves which agents, one line per model, e.g.
// "model m1 (local, step 3): solver, verifier" or
// "model qwen (openai http://…, model Qwen, concurrency 8): router".
func BackendPlan(cfg *configs.Config, backends map[string]actors.Backend) []string {
	var lines []string
	for _, id := range cfg.ModelNames() {
		var agents []string
		var be actors.Backend
		for _, a := range cfg.AgentsOf(id) {
			if b, ok := backends[a]; ok {
				agents, be = append(agents, a), b
			}
		}
		if be != nil {
			lines = append(lines, fmt.Sprintf("model %s (%s): %s", id, actors.Describe(be), strings.Join(agents, ", ")))
		}
	}
	return lines
}

// BackendsLogged is Backends, logging BackendPlan and the backends' notices (an openai
// backend waiting for drmas serve to load set.Step) through env.
func BackendsLogged(env *Env, set *checkpoints.Set) (map[string]actors.Backend, error) {
	cfg := env.Config
	shared := map[string]actors.Backend{}
	out := map[string]actors.Backend{}
	for _, a := range cfg.AgentNames() {
		id := cfg.Agents[a].Model
		be, ok := shared[id]
		if !ok && cfg.Models[id].IsOpenAI() && cfg.Models[id].IsHF() {
			b, err := env.HF().OpenAIBackend(id, set)
			if err != nil {
				return nil, err
			}
			be, ok = b, true
			shared[id] = be
		}
		if !ok && cfg.Models[id].IsOpenAI() {
			b, err := openai.FromConfig(id, cfg.Models[id], openai.Checkpoint{Run: cfg.Run, Step: set.Step, SHA256: set.ManifestSHA256}, cfg.Seed, os.LookupEnv, env.Logf)
			if err != nil {
				return nil, err
			}
			be, ok = b, true
			shared[id] = be
		}
		if !ok && cfg.Models[id].IsHF() {
			b, err := hfmodel.LocalBackend(id, set, cfg.Models[id].ChatDate)
			if err != nil {
				return nil, err
			}
			be, ok = b, true
			shared[id] = be
		}
		if !ok {
			m, ok := set.Models[id]
			if !ok {
				return nil, fmt.Errorf("checkpoint step %d has no model %q (it has %s): the config's models changed since it was written",
					set.Step, id, strings.Join(set.ModelNames(), ", "))
			}
			if got, want := m.Config(), cfg.Models[id].Engine(); got != want {
				return nil, fmt.Errorf("checkpoint step %d: model %s has size %+v but the config says %+v", set.Step, id, got, want)
			}
			be = actors.NewLocal(id, set.Step, m)
			shared[id] = be
		}
		out[a] = be
	}
	for _, l := range BackendPlan(cfg, out) {
		env.Logf("%s", l)
	}
	return out, nil
}

// ChainStep names the checkpoint step iteration n samples from, for errors: the iterations of
// a run are a chain (iteration n samples from step n, which iteration n-1's learn publishes).
func ChainStep(n int64) string {
	if n == 0 {
		return "step 0, the warm-up"
	}
	return fmt.Sprintf("step %d, which iteration %d's learn publishes", n, n-1)
}

// ChainBefore names the iterations that must run before iteration n when the newest step is
// found (< n), for errors: "iteration 4" or "iterations 2..4".
func ChainBefore(found, n int64) string {
	if found == n-1 {
		return fmt.Sprintf("iteration %d", n-1)
	}
	return fmt.Sprintf("iterations %d..%d", found, n-1)
}

// RolloutFirst is the advice of a stage that needs iteration iter's rollout, which is not
// committed: roll it out (then, the stages named in then), unless step iter, which that rollout
// samples from, is not published either: the earlier iterations come first then (rollout would
// refuse, saying so).
func RolloutFirst(ctx context.Context, env *Env, iter int, then string) string {
	n := int64(iter)
	if steps, err := checkpoints.Steps(ctx, env.Bucket, env.Config.Run); err == nil && len(steps) > 0 && steps[len(steps)-1] < n {
		return fmt.Sprintf("run %s first (`drmas run --iters %d` does)", ChainBefore(steps[len(steps)-1], n), n)
	}
	return fmt.Sprintf("run `drmas run-stage rollout --iter %d`%s first", iter, then)
}

// LatestStep selects the newest usable checkpoint in LoadPolicy.
const LatestStep = -1

// LoadPolicy loads checkpoint step (verified), or with LatestStep the run's newest usable
// checkpoint, warning through env on fallbacks.
//
// When every configured model is external (an openai backend without sizes: drmas holds no
// checkpoint of it), nothing is loaded: the set is empty, at step (0 for LatestStep).
func LoadPolicy(ctx context.Context, env *Env, step int64, withOptim bool) (*checkpoints.Set, error) {
	if allExternal(env.Config) {
		return &checkpoints.Set{Step: max(step, 0), Parent: checkpoints.NoParent, Models: map[string]*model.Model{}, Optims: map[string]*model.AdamW{}}, nil
	}
	// A LoRA step's base, when it is a store folder, is fetched with the run's credentials.
	ctx = checkpoints.WithBaseResolver(ctx, env.HF().BaseResolver())
	if step >= 0 {
		return checkpoints.LoadStep(ctx, env.Bucket, env.Config.Run, step, withOptim)
	}
	return checkpoints.Load(ctx, env.Bucket, env.Config.Run, withOptim, func(msg string) { env.Logf("warning: %s", msg) })
}

func allExternal(cfg *configs.Config) bool {
	for _, m := range cfg.Models {
		if !m.External() {
			return false
		}
	}
	return len(cfg.Models) > 0
}

// TrainTasks returns the prompts of an iteration: from the seeded generator (fresh prompts each
// iteration), or a deterministic window of the dataset file that cycles through it. Iterations
// are numbered from 0; a negative iter is an error.
func TrainTasks(cfg *configs.Config, wf workflows.Workflow, iter int) ([]workflows.Task, error) {
	if iter < 0 {
		return nil, fmt.Errorf("iteration %d: iterations are numbered from 0", iter)
	}
	n := cfg.Tasks.PerIteration
	if generated(cfg) {
		return wf.Tasks(seeds.Derive(cfg.Seed, "train-tasks", iter), workflows.Train, n), nil
	}
	all, err := workflows.LoadTasksFormat(cfg.Tasks.Source, cfg.Tasks.Format)
	if err != nil {
		return nil, err
	}
	if err := fitsDataset(cfg, len(all)); err != nil {
		return nil, err
	}
	out := make([]workflows.Task, n)
	start := windowStart(iter, n, len(all))
	for i := range out {
		out[i] = all[(start+i)%len(all)]
	}
	return out, nil
}

// ReserveTasks returns up to n extra training prompts of iteration iter for dynamic sampling
// (rollout.filter_groups), none of them among TrainTasks': from the workflow's generator under
// a seed of their own, or the dataset's tasks after the iteration's window (refused when the
// dataset cannot hold both without repeating a task).
func ReserveTasks(cfg *configs.Config, wf workflows.Workflow, iter, n int) ([]workflows.Task, error) {
	main, err := TrainTasks(cfg, wf, iter)
	if err != nil || n == 0 {
		return nil, err
	}
	if generated(cfg) {
		seen := map[string]bool{}
		for _, t := range main {
			seen[t.ID] = true
		}
		var out []workflows.Task
		for _, t := range wf.Tasks(seeds.Derive(cfg.Seed, "train-tasks-reserve", iter), workflows.Train, n) {
			if !seen[t.ID] {
				out = append(out, t)
			}
		}
		return out, nil
	}
	all, err := workflows.LoadTasksFormat(cfg.Tasks.Source, cfg.Tasks.Format)
	if err != nil {
		return nil, err
	}
	if k := cfg.Tasks.PerIteration; k+n > len(all) {
		return nil, fmt.Errorf("rollout.filter_groups: tasks.per_iteration %d and %d reserve prompts (rollout.max_oversample) need %d distinct tasks, but %s holds %d: lower rollout.max_oversample",
			k, n, k+n, cfg.Tasks.Source, len(all))
	}
	k := cfg.Tasks.PerIteration
	start := windowStart(iter, k, len(all))
	out := make([]workflows.Task, n)
	for i := range out {
		out[i] = all[(start+k+i)%len(all)]
	}
	return out, nil
}

// windowStart is where iteration iter's window of n tasks starts in a dataset of size tasks:
// iter·n mod size, without overflow.
func windowStart(iter, n, size int) int { return (iter % size) * (n % size) % size }

// fitsDataset checks that an iteration's window of a dataset of n tasks holds no task twice: a
// repeated task has the same group id and seeds, so its samples would be the same episodes
// under one uid (a group of duplicated rows, and a uid split across parts).
func fitsDataset(cfg *configs.Config, n int) error {
	if n == 0 {
		return fmt.Errorf("tasks file %s is empty", cfg.Tasks.Source)
	}
	if cfg.Tasks.PerIteration > n {
		return fmt.Errorf("tasks.per_iteration is %d but %s holds %d tasks: an iteration would repeat tasks; set it to at most %d",
			cfg.Tasks.PerIteration, cfg.Tasks.Source, n, n)
	}
	return nil
}

// CheckTasks reads the dataset files of tasks.source and evaluate.source, if any, so that a
// missing or malformed file, or held-out prompts that are training prompts, are reported
// before any work starts (TrainTasks and EvalTasks read them again when they need them).
func CheckTasks(cfg *configs.Config) error {
	var train []workflows.Task
	if !generated(cfg) {
		var err error
		if train, err = workflows.LoadTasksFormat(cfg.Tasks.Source, cfg.Tasks.Format); err != nil {
			return fmt.Errorf("tasks.source: %w", err)
		}
		if err := fitsDataset(cfg, len(train)); err != nil {
			return err
		}
	}
	if train == nil && !fromFile(cfg.Evaluate.Source) {
		return nil // both generated, from disjoint splits
	}
	wf, err := cfg.NewWorkflow()
	if err != nil {
		return err
	}
	_, err = heldOutTasks(cfg, wf, train)
	return err
}

// fromFile reports whether a tasks source (tasks.source, evaluate.source) names a dataset
// file rather than the workflow's seeded generator.
func fromFile(src string) bool { return src != "" && src != "generator" }

// generated reports whether the training prompts come from the workflow's seeded generator
// rather than a dataset file.
func generated(cfg *configs.Config) bool { return !fromFile(cfg.Tasks.Source) }

// EvalTasks returns the held-out evaluation prompts (the same every iteration): from the
// workflow's seeded generator (its held-out split), or the first tasks.eval_size tasks of the
// evaluate.source file.
//
// Held-out prompts that are training prompts of the tasks.source file are an error, whichever
// source they come from (generated training prompts come from the generator's other split).
func EvalTasks(cfg *configs.Config, wf workflows.Workflow) ([]workflows.Task, error) {
	var train []workflows.Task
	if !generated(cfg) {
		var err error
		if train, err = workflows.LoadTasksFormat(cfg.Tasks.Source, cfg.Tasks.Format); err != nil {
			return nil, fmt.Errorf("tasks.source: %w", err)
		}
	}
	return heldOutTasks(cfg, wf, train)
}

// heldOutTasks returns the held-out prompts (EvalTasks), checked against train, the tasks of
// the tasks.source file (nil for generated training prompts).
func heldOutTasks(cfg *configs.Config, wf workflows.Workflow, train []workflows.Task) ([]workflows.Task, error) {
	fileEval := fromFile(cfg.Evaluate.Source)
	var eval []workflows.Task
	if fileEval {
		var err error
		if eval, err = evalFileTasks(cfg); err != nil {
			return nil, err
		}
	} else {
		eval = wf.Tasks(seeds.Derive(cfg.Seed, "eval-tasks"), workflows.Eval, cfg.Tasks.EvalSize)
	}
	if err := heldOut(cfg.Workflow.Name, fileEval, eval, train); err != nil {
		return nil, err
	}
	return eval, nil
}

// TrainSplitTasks returns the prompts of a training-split evaluation (evaluate --train-split):
// the first tasks.eval_size tasks of the tasks.source file, or of the generator's training
// split.
func TrainSplitTasks(cfg *configs.Config, wf workflows.Workflow) ([]workflows.Task, error) {
	if generated(cfg) {
		return wf.Tasks(seeds.Derive(cfg.Seed, "train-eval-tasks"), workflows.Train, cfg.Tasks.EvalSize), nil
	}
	all, err := workflows.LoadTasksFormat(cfg.Tasks.Source, cfg.Tasks.Format)
	if err != nil {
		return nil, fmt.Errorf("tasks.source: %w", err)
	}
	return all[:min(cfg.Tasks.EvalSize, len(all))], nil
}

// evalFileTasks loads the first tasks.eval_size tasks of the evaluate.source file.
func evalFileTasks(cfg *configs.Config) ([]workflows.Task, error) {
	all, err := workflows.LoadTasksFormat(cfg.Evaluate.Source, cfg.Tasks.Format)
	if err != nil {
		return nil, fmt.Errorf("evaluate.source: %w", err)
	}
	return all[:min(cfg.Tasks.EvalSize, len(all))], nil
}

// heldOut checks that no held-out prompt, eval (from the evaluate.source file when fileEval,
// else the workflow's held-out split), is also a training prompt of the tasks.source file,
// train (nil for generated training prompts): the same question as the workflow's prompts show
// it (workflows.ShownQuestion: " 9*4" is "9*4"). The held-out evaluation would measure
// memorisation; the training split is evaluated with --train-split instead.
func heldOut(workflow string, fileEval bool, eval, train []workflows.Task) error {
	questions := make(map[string]string, len(train))
	for _, t := range train {
		questions[workflows.ShownQuestion(workflow, t.Question)] = t.ID
	}
	var shared []string
	for _, t := range eval {
		if id, ok := questions[workflows.ShownQuestion(workflow, t.Question)]; ok {
			shared = append(shared, fmt.Sprintf("%s (training task %s)", t.ID, id))
		}
	}
	switch {
	case len(shared) > 0 && fileEval:
		return fmt.Errorf("evaluate.source: %d of its %d held-out prompts are training prompts of tasks.source (the same question as the prompts show it), e.g. %s: give held-out prompts, or evaluate the training prompts with --train-split",
			len(shared), len(eval), strings.Join(shared[:min(3, len(shared))], ", "))
	case len(shared) > 0:
		return fmt.Errorf("tasks.source: %d of the %d held-out prompts (the workflow's held-out split: evaluate.source is generator) are training prompts of the file (the same question as the prompts show it), e.g. %s: remove them from the file, or give held-out prompts in evaluate.source",
			len(shared), len(eval), strings.Join(shared[:min(3, len(shared))], ", "))
	}
	return nil
}

// SortedKeys returns m's keys sorted.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
