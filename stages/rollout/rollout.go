// Package rollout is the rollout stage: for iteration N it loads each model's checkpoint of
// step N (LATEST by default, which must be step N: the iterations of a run are a chain),
// plays the configured multi-agent workflow for the iteration's prompts (a group of samples
// per prompt), and commits the trajectories as Parquet parts (docs/design.md, "Shard schemas"): one row per agent
// invocation, a uid never split across parts, deterministic rows and bytes for the same seed
// and checkpoint.
package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/internal/progress"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/jobs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/workflows"
)

// Options select the iteration to roll out.
type Options struct {
	Iteration int
	// Step is the checkpoint to sample from; stages.LatestStep (the default of the CLI) means
	// LATEST (step Iteration when every model is external: there is no checkpoint to load,
	// but learn still publishes a step per iteration). drmas run passes the step the previous
	// iteration's learner published; sharded workers should all pass the same explicit step.
	// The iterations of a run are a chain (iteration N samples from step N, which iteration
	// N-1's learn publishes; step 0 is the warm-up), so Run refuses any other step: an
	// iteration rolled out ahead of its turn would learn a step that belongs to another
	// iteration. Rows and the manifest record the step as policy_version: a model behind `drmas serve` is sampled only once the server serves
	// that checkpoint, and a server on another one fails the rollout (stages.Backends).
	Step int64
	// Shard selects the parts this worker writes (zero value: all of them). The worker that
	// finds every part written commits the folder.
	Shard jobs.Shard
}

// Result summarises a rollout. The statistics cover the whole iteration once it is committed
// (they are merged from every part's receipt), else only this worker's parts.
type Result struct {
	Skipped       bool // already committed
	Committed     bool // this call saw the folder committed (false: other shards still pending)
	Rows          int64
	Episodes      int
	Tokens        int64
	PolicyVersion int64
	// MeanReward is the mean episode reward; AgentScore the mean row score per agent.
	MeanReward float64
	AgentScore map[string]float64
	// EpisodesDropped counts an agent program's failed episodes dropped (workflow.failure_reward
	// unset).
	EpisodesDropped int
	// GroupsKept and GroupsDropped count rollout.filter_groups' prompt groups with and without
	// a signal (0 when off).
	GroupsKept, GroupsDropped int
}

// partStats are the statistics a part's receipt carries, merged at finalize.
type partStats struct {
	Episodes   int                `json:"episodes"`
	Tokens     int64              `json:"tokens"`
	RewardSum  float64            `json:"reward_sum"`
	AgentSum   map[string]float64 `json:"agent_sum"`
	AgentCount map[string]int64   `json:"agent_count"`
	// EpisodesDropped counts an agent program's failed episodes dropped (no failure reward).
	EpisodesDropped int `json:"episodes_dropped,omitempty"`
	// rollout.filter_groups: groups kept and dropped (no signal); absent when off.
	GroupsKept    int `json:"groups_kept,omitempty"`
	GroupsDropped int `json:"groups_dropped,omitempty"`
}

func (p *partStats) add(o partStats) {
	p.Episodes += o.Episodes
	p.Tokens += o.Tokens
	p.RewardSum += o.RewardSum
	p.EpisodesDropped += o.EpisodesDropped
	p.GroupsKept += o.GroupsKept
	p.GroupsDropped += o.GroupsDropped
	if p.AgentSum == nil {
		p.AgentSum, p.AgentCount = map[string]float64{}, map[string]int64{}
	}
	for _, a := range stages.SortedKeys(o.AgentSum) {
		p.AgentSum[a] += o.AgentSum[a]
		p.AgentCount[a] += o.AgentCount[a]
	}
}

// UID is the prompt-group id of a task in an iteration.
func UID(run string, iter int, taskID string) string { return seeds.ID(run, iter, taskID) }

// Digest is the config digest recorded in rollout manifests: everything that changes what a
// rollout writes. The iteration's tasks enter by content (workflows.TasksDigest), not by
// tasks.source: two files at one path are two inputs (parts rolled out from each are never
// committed together), and one file at two paths is one. tasks.eval_size does not enter: it
// chooses the held-out prompts, never the training ones.
func Digest(cfg *configs.Config, tasks []workflows.Task) string {
	return configs.Digest(struct {
		Seed     uint64
		Workflow configs.Workflow
		Tasks    string
		Rollout  configs.Rollout
		Agents   map[string]configs.Agent
		Models   map[string]configs.Model
	}{cfg.Seed, cfg.Workflow, workflows.TasksDigest(tasks), cfg.Rollout.Canonical(), cfg.Agents, cfg.Models})
}

// Run rolls out this worker's parts of one iteration and commits the folder if every part is
// written. If the rollout is already committed, Run does nothing. Its errors name the stage
// once ("rollout iter N: …", a *stages.Error).
func Run(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	res, err := runStage(ctx, env, o)
	if err != nil {
		return nil, stages.Fail(ctx, stages.IterName("rollout", o.Iteration), err)
	}
	return res, nil
}

// runStage is the protocol: skip a committed rollout; otherwise load the policy the iteration
// samples from, play and write this worker's missing parts (each with its receipt), and commit
// the folder once every part's receipt is there.
func runStage(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	if o.Shard == (jobs.Shard{}) {
		o.Shard = jobs.Whole
	}
	if err := o.Shard.Validate(); err != nil {
		return nil, err
	}
	dir := layout.RolloutDir(env.Config.Run, o.Iteration)
	if done, err := alreadyCommitted(ctx, env, o.Iteration, dir); done || err != nil {
		if err != nil {
			return nil, err
		}
		return &Result{Skipped: true, Committed: true}, nil
	}
	r, err := plan(ctx, env, o, dir)
	if err != nil {
		return nil, err
	}
	todo, todoTasks, err := r.pendingParts(ctx, o.Shard)
	if err != nil {
		return nil, err
	}
	mine, elapsed, err := r.writeParts(ctx, todo, todoTasks)
	if err != nil {
		return nil, err
	}
	all, done, err := r.finalize(ctx)
	if err != nil {
		return nil, err
	}
	st := mine
	if done && all.Episodes > 0 {
		st = all
	}
	res := r.result(st, done)
	what := fmt.Sprintf("%d of %d parts written by shard %s", len(todo), len(r.names), o.Shard)
	if done {
		what += ", committed"
	} else {
		what += ", waiting for the other shards to write theirs"
	}
	rate := fmt.Sprintf("%d tokens in %s (%.0f tokens/s)", mine.Tokens, elapsed.Round(1e7), float64(mine.Tokens)/max(elapsed.Seconds(), 1e-9))
	if st.Tokens != mine.Tokens { // the folder's totals, then what this worker sampled
		rate = fmt.Sprintf("%d tokens; this shard %s", st.Tokens, rate)
	}
	if res.EpisodesDropped > 0 {
		what += fmt.Sprintf("; %d failed episodes dropped", res.EpisodesDropped)
	}
	if r.filter != nil {
		rate += fmt.Sprintf(", filter_groups kept %d groups and dropped %d", res.GroupsKept, res.GroupsDropped)
	}
	env.Logf("rollout iter %d: %s; %d episodes, %d rows, %s, mean reward %.3f", r.iter, what, res.Episodes, res.Rows, rate, res.MeanReward)
	return res, nil
}

// alreadyCommitted reports whether the rollout folder dir is committed, removing receipts a
// worker killed between the commit and their removal left behind (harmless: a failed removal
// is a warning).
func alreadyCommitted(ctx context.Context, env *stages.Env, iter int, dir string) (bool, error) {
	done, err := commit.IsCommitted(ctx, env.Bucket, dir)
	if err != nil || !done {
		return false, err
	}
	if err := env.Leftover(stages.IterName("rollout", iter), commit.CleanReceipts(ctx, env.Bucket, dir)); err != nil {
		return false, err
	}
	env.Logf("rollout iter %d: already committed", iter)
	return true, nil
}

// stageRun is one rollout of one iteration: the policy it samples from, its tasks and parts,
// and what the folder will commit.
type stageRun struct {
	env      *stages.Env
	iter     int
	dir      string
	wf       workflows.Workflow
	set      *checkpoints.Set
	backends map[string]actors.Backend
	tasks    []workflows.Task
	names    []string // the parts' file names
	// manifest is what the folder will commit, less its files. Its Writer marks this worker's
	// receipts, so parts that workers with another config or checkpoint wrote are redone here,
	// and are never committed together with these (Finalize refuses a mixed set).
	manifest *commit.Manifest
	writer   string
	filter   *filter // rollout.filter_groups; nil when off
}

// plan loads the workflow and the policy the iteration samples from (refusing any other step:
// the iterations of a run run in order), its backends and tasks, and names the parts.
func plan(ctx context.Context, env *stages.Env, o Options, dir string) (*stageRun, error) {
	cfg := env.Config
	r := &stageRun{env: env, iter: o.Iteration, dir: dir}
	var err error
	if r.wf, err = stages.Workflow(cfg); err != nil {
		return nil, err
	}
	if r.set, err = stages.LoadPolicy(ctx, env, o.Step, false); err != nil {
		return nil, err
	}
	set := r.set
	// An all-external config loads no checkpoint, but learn still publishes (empty) step N+1
	// from iteration N's rollout: LATEST stands for step N here, as `drmas run` passes it.
	if set.ManifestSHA256 == "" && o.Step == stages.LatestStep {
		set.Step = int64(o.Iteration)
	}
	if n := int64(o.Iteration); set.Step != n {
		return nil, &OrderError{Iter: o.Iteration, Step: set.Step, Latest: o.Step == stages.LatestStep,
			What: fmt.Sprintf("would sample from step %d, but iteration %d samples from %s (the iterations of a run run in order)", set.Step, n, stages.ChainStep(n))}
	}
	if r.backends, err = stages.BackendsLogged(env, set); err != nil {
		return nil, err
	}
	if r.tasks, err = stages.TrainTasks(cfg, r.wf, o.Iteration); err != nil {
		return nil, err
	}
	G := cfg.Rollout.GroupSize
	parts := min(cfg.Rollout.Parts, len(r.tasks))
	r.names = make([]string, parts)
	for p := range r.names {
		r.names[p] = shards.PartName(p, parts)
	}
	r.manifest = &commit.Manifest{
		Kind: "rollout", SchemaVersion: shards.SchemaVersion, Run: cfg.Run, Iteration: &r.iter, ConfigDigest: Digest(cfg, r.tasks),
		Inputs: []commit.Input{{Dir: layout.CheckpointDir(cfg.Run, set.Step), ManifestSHA256: set.ManifestSHA256}},
		Params: map[string]string{
			"workflow": r.wf.Name(), "policy_version": strconv.FormatInt(set.Step, 10),
			"tasks": strconv.Itoa(len(r.tasks)), "group_size": strconv.Itoa(G),
		},
	}
	if r.filter, err = newFilter(cfg, r.wf, o.Iteration, len(r.tasks)); err != nil {
		return nil, err
	}
	if r.filter != nil {
		r.manifest.Params["filter_groups"] = "true"
		r.manifest.Params["max_oversample"] = strconv.Itoa(cfg.Rollout.MaxOversample)
	}
	r.writer = commit.Writer(r.manifest)
	return r, nil
}

// partTasks are the tasks of part p.
func (r *stageRun) partTasks(p int) []workflows.Task {
	n, parts := len(r.tasks), len(r.names)
	return r.tasks[p*n/parts : (p+1)*n/parts]
}

// pendingParts lists the parts this worker still has to write (a receipt marks a finished
// part), and their tasks.
func (r *stageRun) pendingParts(ctx context.Context, shard jobs.Shard) (todo []int, todoTasks []workflows.Task, err error) {
	for _, p := range shard.Parts(len(r.names)) {
		if _, ok, err := commit.HavePart(ctx, r.env.Bucket, r.dir, r.names[p], r.writer); err != nil {
			return nil, nil, err
		} else if ok {
			continue
		}
		todo = append(todo, p)
		todoTasks = append(todoTasks, r.partTasks(p)...)
	}
	return todo, todoTasks, nil
}

// writeParts plays the pending parts' episodes and writes each part with its receipt; it
// returns what this worker sampled and how long playing took.
func (r *stageRun) writeParts(ctx context.Context, todo []int, todoTasks []workflows.Task) (mine partStats, elapsed time.Duration, err error) {
	if len(todo) == 0 {
		return mine, 0, nil
	}
	cfg := r.env.Config
	G := cfg.Rollout.GroupSize
	// A server still loading the checkpoint is waited for before the clock starts.
	if err := actors.Ready(ctx, r.backends); err != nil {
		return mine, 0, err
	}
	bar := progress.New(r.env.Progress, int64(len(todoTasks)*G), fmt.Sprintf("rollout iter %d", r.iter), "episodes")
	var tokens int64
	play := func(ctx context.Context, tasks []workflows.Task) ([]*Episode, error) {
		return playerOf(r.wf, r.env.Logf)(ctx, r.wf, tasks, r.backends, PlayOptions{
			Samples:  G,
			Sampling: actors.Sampling{Temperature: cfg.Rollout.Temperature, TopP: cfg.Rollout.TopP, TopK: cfg.Rollout.TopK, MaxTokens: cfg.Rollout.MaxTokens},
			Seed: func(t workflows.Task, sample, turn int) uint64 {
				return seeds.Derive(cfg.Seed, "rollout", r.iter, t.ID, sample, turn)
			},
			Done: func(n, tok int) {
				bar.Add(n)
				tokens += int64(tok)
				bar.Describe(fmt.Sprintf("rollout iter %d (%d tokens)", r.iter, tokens))
			},
		})
	}
	eps, err := play(ctx, todoTasks)
	if err != nil {
		return mine, 0, err
	}
	off := 0
	for _, p := range todo {
		want := len(r.partTasks(p))
		part := eps[off : off+want*G]
		off += want * G
		var kept, dropped int
		if r.filter != nil {
			if part, kept, dropped, err = r.filter.refill(ctx, r, p, part, want, play); err != nil {
				return mine, 0, err
			}
		}
		st, err := writePart(ctx, r.env, r.wf, r.iter, p, r.names[p], r.writer, part, G, kept, dropped)
		if err != nil {
			return mine, 0, err
		}
		mine.add(st)
	}
	return mine, bar.Finish(), nil
}

// finalize commits the folder if every part's receipt is there, and returns the folder's
// totals merged from the receipts.
func (r *stageRun) finalize(ctx context.Context) (all partStats, done bool, err error) {
	done, _, err = commit.Finalize(ctx, r.env.Bucket, r.dir, r.names, r.manifest, func(recs []commit.Receipt) ([]commit.File, error) {
		for _, rec := range recs {
			var st partStats
			if err := commit.DecodeExtra(rec, &st); err != nil {
				return nil, err
			}
			all.add(st)
		}
		return nil, nil
	})
	if err := r.env.Leftover(stages.IterName("rollout", r.iter), err); err != nil {
		return all, false, err
	}
	return all, done, nil
}

// result summarises st, the folder's totals when committed, else this worker's.
func (r *stageRun) result(st partStats, committed bool) *Result {
	res := &Result{PolicyVersion: r.set.Step, AgentScore: map[string]float64{}, Committed: committed}
	res.Episodes, res.Tokens, res.EpisodesDropped = st.Episodes, st.Tokens, st.EpisodesDropped
	res.GroupsKept, res.GroupsDropped = st.GroupsKept, st.GroupsDropped
	for a, sum := range st.AgentSum {
		res.AgentScore[a] = sum / float64(st.AgentCount[a])
		res.Rows += st.AgentCount[a]
	}
	if st.Episodes > 0 {
		res.MeanReward = st.RewardSum / float64(st.Episodes)
	}
	return res
}

// writePart writes part p (episodes of its tasks, task-major) and its receipt.
// kept and dropped are rollout.filter_groups' counts of groups (0 when off).
func writePart(ctx context.Context, env *stages.Env, wf workflows.Workflow, iter, p int, name, writer string, eps []*Episode, G, kept, dropped int) (partStats, error) {
	cfg := env.Config
	type group struct {
		uid string
		eps []*Episode
	}
	var groups []group
	for i := 0; i < len(eps); i += G {
		groups = append(groups, group{uid: UID(cfg.Run, iter, eps[i].Task.ID), eps: eps[i : i+G]})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].uid < groups[j].uid })
	var rows []shards.Row
	for _, g := range groups {
		rows = append(rows, Rows(cfg.Run, iter, g.uid, wf, g.eps)...)
	}
	st := partStats{Episodes: len(eps), AgentSum: map[string]float64{}, AgentCount: map[string]int64{}, GroupsKept: kept, GroupsDropped: dropped}
	for i := range rows {
		rows[i].RowID = shards.RowID(p, i)
		st.AgentSum[rows[i].Agent] += rows[i].Score
		st.AgentCount[rows[i].Agent]++
		st.Tokens += int64(len(rows[i].ResponseIDs))
	}
	for _, ep := range eps {
		if ep.Dropped {
			st.Episodes--
			st.EpisodesDropped++
		}
		st.RewardSum += ep.Reward
	}
	var buf bytes.Buffer
	if err := shards.WriteTrajectories(&buf, p, rows); err != nil {
		return st, fmt.Errorf("part %d: %w", p, err)
	}
	dir := layout.RolloutDir(cfg.Run, iter)
	f, err := commit.PutFile(ctx, env.Bucket, dir, name, buf.Bytes(), int64(len(rows)))
	if err != nil {
		return st, err
	}
	extra, err := json.Marshal(st)
	if err != nil {
		return st, fmt.Errorf("encode part statistics: %w", err)
	}
	return st, commit.PutReceipt(ctx, env.Bucket, dir, commit.Receipt{File: f, Writer: writer, Extra: extra})
}
