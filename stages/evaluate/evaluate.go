// Package evaluate is the evaluate stage: it plays the workflow on the held-out eval split with
// k samples per prompt (temperature 0.6, top-p 0.95 by default) and commits avg@k and pass@k per
// data source for one checkpoint step under eval/step=NNNNNN/.
package evaluate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/internal/progress"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/stages/rollout"
	"github.com/drmas-dev/drmas/storage"
	"github.com/drmas-dev/drmas/workflows"
)

// Options select the checkpoint to evaluate.
type Options struct {
	Step int64 // stages.LatestStep: the newest usable checkpoint
	// Train evaluates on tasks.eval_size prompts of the training split instead of the held-out
	// split: the in-distribution check that RL improves what it trains on. With a tasks.source
	// file that is the file's first tasks.eval_size tasks (the prompts the first iterations
	// train on), otherwise the generator's training split. Written under eval-train/step=N/.
	Train bool
}

// ResultRow is the persisted schema shards.ResultRow, named here for this stage's callers.
type ResultRow = shards.ResultRow

// PromptRow is the persisted schema shards.PromptRow, named here for this stage's callers.
type PromptRow = shards.PromptRow

// ResultsFile and PromptsFile are the files of a committed evaluation.
const (
	ResultsFile = shards.EvalResultsFile
	PromptsFile = shards.EvalPromptsFile
)

// Run evaluates one checkpoint; an evaluation already committed is read back, not redone. One
// committed with other settings (evaluate.k, temperature, top_p, tasks.eval_size, split) or of
// other prompts (evaluate.source, the workflow's generator) is an error matching
// commit.ErrConflict, not a result for this config, and a committed
// evaluation that does not read back (a damaged file, a store error) is an error: its files
// are never rewritten. Its errors name the stage once ("evaluate step N: …", a *stages.Error).
func Run(ctx context.Context, env *stages.Env, o Options) ([]ResultRow, error) {
	step := o.Step // the step evaluated, once known
	rows, err := runStage(ctx, env, o, &step)
	if err != nil {
		what := "evaluate LATEST"
		if step >= 0 {
			what = fmt.Sprintf("evaluate step %d", step)
		}
		if o.Train {
			what += " (training split)"
		}
		return nil, stages.Fail(ctx, what, err)
	}
	return rows, nil
}

func runStage(ctx context.Context, env *stages.Env, o Options, evaluated *int64) ([]ResultRow, error) {
	cfg := env.Config
	b := env.Bucket
	evalDir := layout.EvalDir
	split := "eval"
	if o.Train {
		evalDir, split = layout.TrainEvalDir, "train"
	}
	wf, err := stages.Workflow(cfg)
	if err != nil {
		return nil, err
	}
	var tasks []workflows.Task
	if o.Train { // evaluate.source holds held-out prompts only
		if tasks, err = stages.TrainSplitTasks(cfg, wf); err != nil {
			return nil, err
		}
	} else if tasks, err = stages.EvalTasks(cfg, wf); err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, errors.New("tasks.eval_size is 0: set it to the number of held-out prompts to evaluate on")
	}
	k := cfg.Evaluate.K
	params := map[string]string{"k": strconv.Itoa(k), "temperature": strconv.FormatFloat(cfg.Evaluate.Temperature, 'g', -1, 64),
		"top_p": strconv.FormatFloat(cfg.Evaluate.TopP, 'g', -1, 64), "prompts": strconv.Itoa(len(tasks)), "split": split,
		"prompts_sha256": workflows.TasksDigest(tasks)}
	if cfg.Evaluate.TopK > 0 { // absent when off, as evaluations committed before top_k have it
		params["top_k"] = strconv.Itoa(cfg.Evaluate.TopK)
	}
	// An evaluation is keyed by its checkpoint: if it is committed, read it back (the checkpoint
	// itself may since have been removed by retention). Without a readable LATEST, LoadPolicy
	// picks the step: it falls back to the newest usable one, and external models need none.
	step := o.Step
	if step < 0 {
		if latest, err := checkpoints.ReadLatest(ctx, b, cfg.Run); err == nil {
			step = latest
		}
	}
	*evaluated = step
	if step >= 0 {
		if rows, ok, err := readBack(ctx, b, evalDir(cfg.Run, step), params); ok || err != nil {
			return rows, err
		}
	}
	set, err := stages.LoadPolicy(ctx, env, o.Step, false)
	if err != nil {
		return nil, err
	}
	dir := evalDir(cfg.Run, set.Step)
	*evaluated = set.Step
	if set.Step != step {
		if rows, ok, err := readBack(ctx, b, dir, params); ok || err != nil {
			return rows, err
		}
	}
	backends, err := stages.BackendsLogged(env, set)
	if err != nil {
		return nil, err
	}
	// A drmas serve still loading the checkpoint is waited for before the progress bar.
	if err := actors.Ready(ctx, backends); err != nil {
		return nil, err
	}
	bar := progress.New(env.Progress, int64(len(tasks)*k), fmt.Sprintf("evaluate step %d (%s split)", set.Step, split), "episodes")
	eps, err := playChunked(ctx, wf, tasks, backends, rollout.PlayOptions{
		Samples:  k,
		Sampling: actors.Sampling{Temperature: cfg.Evaluate.Temperature, TopP: cfg.Evaluate.TopP, TopK: cfg.Evaluate.TopK, MaxTokens: cfg.Rollout.MaxTokens},
		Seed: func(t workflows.Task, sample, turn int) uint64 {
			// Common random numbers: every step samples with the same seeds, so the paired
			// change between two steps is the policy's, not the sampling noise's.
			return seeds.Derive(cfg.Seed, "eval", t.ID, sample, turn)
		},
		Done: func(n, _ int) { bar.Add(n) },
	})
	if err != nil {
		return nil, err
	}
	bar.Finish()
	rows, err := Summarize(set.Step, wf.Name(), k, eps)
	if err != nil {
		return nil, err
	}
	data, err := shards.EncodeTable(rows)
	if err != nil {
		return nil, fmt.Errorf("encode eval results: %w", err)
	}
	f, err := commit.PutFile(ctx, b, dir, ResultsFile, data, int64(len(rows)))
	if err != nil {
		return nil, err
	}
	prompts := PerPrompt(set.Step, split, k, eps)
	if data, err = shards.EncodeTable(prompts); err != nil {
		return nil, fmt.Errorf("encode per-prompt eval results: %w", err)
	}
	pf, err := commit.PutFile(ctx, b, dir, PromptsFile, data, int64(len(prompts)))
	if err != nil {
		return nil, err
	}
	step = set.Step
	if _, err := commit.Commit(ctx, b, dir, &commit.Manifest{
		Kind: "eval", SchemaVersion: 1, Run: cfg.Run, Step: &step, Rows: int64(len(rows) + len(prompts)), Files: []commit.File{f, pf},
		Inputs: []commit.Input{{Dir: layout.CheckpointDir(cfg.Run, step), ManifestSHA256: set.ManifestSHA256}},
		Params: params,
	}); err != nil {
		return nil, err
	}
	return rows, nil
}

// playChunked plays the tasks a chunk at a time, at most configs.EvalBatchSequences episodes
// at once, so that the models' attention caches stay bounded however many prompts are
// evaluated. Each turn's seed depends only on its task, sample and turn, so the chunking does
// not change what is sampled; the episodes come back task-major, as from one rollout.Play.
func playChunked(ctx context.Context, wf workflows.Workflow, tasks []workflows.Task, backends map[string]actors.Backend, o rollout.PlayOptions) ([]*rollout.Episode, error) {
	per := max(1, configs.EvalBatchSequences/max(1, o.Samples))
	var eps []*rollout.Episode
	for start := 0; start < len(tasks); start += per {
		chunk, err := rollout.Play(ctx, wf, tasks[start:min(start+per, len(tasks))], backends, o)
		if err != nil {
			return nil, err
		}
		eps = append(eps, chunk...)
	}
	return eps, nil
}

// readBack reads the evaluation committed in dir; ok is false when dir is not committed. An
// evaluation committed with other params than these (prompts_sha256 among them: other prompts)
// is an error matching commit.ErrConflict.
func readBack(ctx context.Context, b storage.Bucket, dir string, params map[string]string) (rows []ResultRow, ok bool, err error) {
	m, _, err := commit.Read(ctx, b, dir)
	if errors.Is(err, commit.ErrNotCommitted) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	var diff []string
	for _, key := range stages.SortedKeys(params) {
		if have, ok := m.Params[key]; !ok {
			diff = append(diff, fmt.Sprintf("no %s (this config: %s)", key, params[key]))
		} else if have != params[key] {
			diff = append(diff, fmt.Sprintf("%s %s (this config: %s)", key, have, params[key]))
		}
	}
	if len(diff) > 0 {
		return nil, false, &stages.TakenError{Stage: "evaluate", Dir: dir,
			What: fmt.Sprintf("%s is already committed with %s", dir, strings.Join(diff, ", "))}
	}
	if rows, err = readTable[ResultRow](ctx, b, dir, m, ResultsFile); err != nil {
		return nil, false, fmt.Errorf("committed evaluation does not read back: %w", err)
	}
	return rows, true, nil
}

// Read returns the per-source results of the committed evaluation in dir, and the sha256 of
// its manifest (for the inputs of what is derived from it).
func Read(ctx context.Context, b storage.Bucket, dir string) ([]ResultRow, string, error) {
	m, sha, err := commit.Read(ctx, b, dir)
	if err != nil {
		return nil, "", err
	}
	rows, err := readTable[ResultRow](ctx, b, dir, m, ResultsFile)
	return rows, sha, err
}

// ReadPrompts returns the per-prompt rows of the committed evaluation in dir.
func ReadPrompts(ctx context.Context, b storage.Bucket, dir string) ([]PromptRow, error) {
	m, _, err := commit.Read(ctx, b, dir)
	if err != nil {
		return nil, err
	}
	return readTable[PromptRow](ctx, b, dir, m, PromptsFile)
}

// readTable reads the file name that manifest m of dir lists.
func readTable[T any](ctx context.Context, b storage.Bucket, dir string, m *commit.Manifest, name string) ([]T, error) {
	for _, f := range m.Files {
		if f.Name != name {
			continue
		}
		data, err := commit.ReadFile(ctx, b, dir, f)
		if err != nil {
			return nil, err
		}
		return shards.ReadTable[T](bytes.NewReader(data), int64(len(data)), dir)
	}
	return nil, fmt.Errorf("%s: manifest lists no %s: %w", dir, name, storage.ErrNotFound)
}

// Delta is the paired change in avg@k between two evaluations of the same prompts.
type Delta struct {
	FromStep, ToStep int64
	Prompts          int     // distinct prompts evaluated at both steps
	Delta            float64 // mean over those prompts of (success share at ToStep − at FromStep)
	SE               float64 // its standard error (sample std of the differences / √Prompts; 0 below 2 prompts)
}

// PairedDelta pairs two evaluations prompt by prompt and returns the mean change in success
// share and its standard error. A prompt is its question (its task id where the question is
// empty): rows of one question are pooled (successes and samples summed), so a question asked
// twice counts once, as the independent unit it is. Prompts in only one evaluation are left
// out; differences are summed in order of the prompts' first rows in to.
func PairedDelta(from, to []PromptRow) Delta {
	d := Delta{}
	if len(from) > 0 {
		d.FromStep = from[0].Step
	}
	if len(to) > 0 {
		d.ToStep = to[0].Step
	}
	base, _ := pooledShares(from)
	now, order := pooledShares(to)
	var diffs []float64
	var sum float64
	for _, key := range order {
		b, ok := base[key]
		if !ok {
			continue
		}
		x := now[key] - b
		diffs = append(diffs, x)
		sum += x
	}
	d.Prompts = len(diffs)
	if d.Prompts == 0 {
		return d
	}
	d.Delta = sum / float64(d.Prompts)
	if d.Prompts > 1 {
		var ss float64
		for _, x := range diffs {
			ss += (x - d.Delta) * (x - d.Delta)
		}
		d.SE = math.Sqrt(ss/float64(d.Prompts-1)) / math.Sqrt(float64(d.Prompts))
	}
	return d
}

// pooledShares is each distinct prompt's success share (its rows' successes over their
// samples), keyed by question (task id where it is empty), with the keys in order of first row.
func pooledShares(rows []PromptRow) (map[string]float64, []string) {
	succ, samples := map[string]int64{}, map[string]int64{}
	var order []string
	for _, r := range rows {
		key := r.Question
		if key == "" {
			key = "\x00id:" + r.TaskID
		}
		if _, ok := samples[key]; !ok {
			order = append(order, key)
		}
		succ[key] += int64(r.Successes)
		samples[key] += int64(r.K)
	}
	out := make(map[string]float64, len(order))
	for _, key := range order {
		out[key] = float64(succ[key]) / float64(samples[key])
	}
	return out, order
}

// PerPrompt counts each prompt's successes among its samples, one row per task in order of
// first appearance in eps, with the mean answer F1 of its samples where the workflow scores
// one (rollout.Episode.F1).
func PerPrompt(step int64, split string, k int, eps []*rollout.Episode) []PromptRow {
	var out []PromptRow
	var f1 []f1Sum // out[i]'s samples' F1
	idx := map[string]int{}
	for _, ep := range eps {
		i, ok := idx[ep.Task.ID]
		if !ok {
			i = len(out)
			idx[ep.Task.ID] = i
			out = append(out, PromptRow{Step: step, Split: split, DataSource: ep.Task.DataSource, TaskID: ep.Task.ID, Question: ep.Task.Question, K: int32(k)})
			f1 = append(f1, f1Sum{})
		}
		if ep.Reward > 0.5 {
			out[i].Successes++
		}
		f1[i].add(ep.F1)
	}
	for i := range out {
		out[i].F1Mean = f1[i].mean()
	}
	return out
}

// Summarize computes avg@k and pass@k per data source, plus an "all" row
// (workflows.AllSources); a task of data source "all" is an error. Where the workflow scores
// answers by token F1, F1Mean is the mean over the source's prompts of each prompt's mean F1
// (summed in order of first appearance), as avg@k averages success shares.
func Summarize(step int64, workflow string, k int, eps []*rollout.Episode) ([]ResultRow, error) {
	var samples []workflows.Sample
	for _, ep := range eps {
		if ep.Task.DataSource == workflows.AllSources {
			return nil, fmt.Errorf("task %q has data source %q, reserved for the aggregate row: give it another data_source", ep.Task.ID, workflows.AllSources)
		}
		samples = append(samples, workflows.Sample{TaskID: ep.Task.ID, DataSource: ep.Task.DataSource, Success: ep.Reward > 0.5})
	}
	all := make([]workflows.Sample, len(samples))
	for i, s := range samples {
		s.DataSource = workflows.AllSources
		all[i] = s
	}
	var rows []ResultRow
	for _, ss := range [][]workflows.Sample{samples, all} {
		avg, err := workflows.AvgAtK(ss, k)
		if err != nil {
			return nil, err
		}
		pass, err := workflows.PassAtK(ss, k)
		if err != nil {
			return nil, err
		}
		srcs := make([]string, 0, len(avg))
		for s := range avg {
			srcs = append(srcs, s)
		}
		sort.Strings(srcs)
		for _, s := range srcs {
			rows = append(rows, ResultRow{Step: step, Workflow: workflow, DataSource: s, K: int32(k),
				Prompts: int32(avg[s].Prompts), AvgAtK: avg[s].Value, PassAtK: pass[s].Value})
		}
	}
	f1 := sourceF1(PerPrompt(step, "", k, eps))
	verdicts := verdictShares(eps)
	for i := range rows {
		rows[i].F1Mean = f1[rows[i].DataSource]
		v := verdicts[rows[i].DataSource]
		rows[i].VerifierAcceptCorrect, rows[i].VerifierAcceptWrong = v[0], v[1]
	}
	return rows, nil
}
