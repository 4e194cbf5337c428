// Package rollout is the rollout stage: it loads each model's LATEST checkpoint, plays the
// configured multi-agent workflow for an iteration's prompts (a group of samples per prompt),
// and commits the trajectories as Parquet parts (DESIGN §2): one row per agent invocation,
// a uid never split across parts, deterministic rows and bytes for the same seed and
// checkpoint.
package rollout

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/internal/progress"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/workflows"
)

// Options select the iteration to roll out.
type Options struct {
	Iteration int
	// Step is the checkpoint to sample from; stages.LatestStep (the default of the CLI) means
	// LATEST. drmas run passes the step the previous iteration's learner published.
	Step int64
}

// Result summarises a rollout.
type Result struct {
	Skipped       bool // already committed
	Rows          int64
	Episodes      int
	Tokens        int64
	PolicyVersion int64
	// MeanReward is the mean episode reward; AgentScore the mean row score per agent.
	MeanReward float64
	AgentScore map[string]float64
}

// UID is the prompt-group id of a task in an iteration.
func UID(run string, iter int, taskID string) string { return seeds.ID(run, iter, taskID) }

// Digest is the config digest recorded in rollout manifests: everything that changes what a
// rollout writes.
func Digest(cfg *configs.Config) string {
	return configs.Digest(struct {
		Seed     uint64
		Workflow configs.Workflow
		Tasks    configs.Tasks
		Rollout  configs.Rollout
		Agents   map[string]configs.Agent
		Models   map[string]configs.Model
	}{cfg.Seed, cfg.Workflow, cfg.Tasks, cfg.Rollout, cfg.Agents, cfg.Models})
}

// Run rolls out one iteration. If its rollout is already committed, Run does nothing.
func Run(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	cfg := env.Config
	b := env.Bucket
	dir := commit.RolloutDir(cfg.Run, o.Iteration)
	if done, err := commit.IsCommitted(ctx, b, dir); err != nil {
		return nil, err
	} else if done {
		env.Logf("rollout iter %d: already committed", o.Iteration)
		return &Result{Skipped: true}, nil
	}
	wf, err := stages.Workflow(cfg)
	if err != nil {
		return nil, err
	}
	set, err := stages.LoadPolicy(ctx, env, o.Step, false)
	if err != nil {
		return nil, fmt.Errorf("rollout iter %d: %w", o.Iteration, err)
	}
	backends, err := stages.Backends(cfg, set)
	if err != nil {
		return nil, err
	}
	tasks, err := stages.TrainTasks(cfg, wf, o.Iteration)
	if err != nil {
		return nil, err
	}
	G := cfg.Rollout.GroupSize
	bar := progress.New(env.Progress, int64(len(tasks)*G), fmt.Sprintf("rollout iter %d", o.Iteration), "episodes")
	var tokens int64
	eps, err := Play(ctx, wf, tasks, backends, PlayOptions{
		Samples:  G,
		Sampling: actors.Sampling{Temperature: cfg.Rollout.Temperature, TopP: cfg.Rollout.TopP, MaxTokens: cfg.Rollout.MaxTokens},
		Seed: func(t workflows.Task, sample, turn int) uint64 {
			return seeds.Derive(cfg.Seed, "rollout", o.Iteration, t.ID, sample, turn)
		},
		Done: func(n, tok int) { bar.Add(n); tokens += int64(tok) },
	})
	if err != nil {
		return nil, fmt.Errorf("rollout iter %d: %w", o.Iteration, err)
	}
	elapsed := bar.Finish()

	res := &Result{Episodes: len(eps), Tokens: tokens, PolicyVersion: set.Step, AgentScore: map[string]float64{}}
	parts := cfg.Rollout.Parts
	if parts > len(tasks) {
		parts = len(tasks)
	}
	var files []commit.File
	agentN := map[string]int{}
	for p := 0; p < parts; p++ {
		lo, hi := p*len(tasks)/parts, (p+1)*len(tasks)/parts
		type group struct {
			uid string
			eps []*Episode
		}
		var groups []group
		for ti := lo; ti < hi; ti++ {
			groups = append(groups, group{uid: UID(cfg.Run, o.Iteration, tasks[ti].ID), eps: eps[ti*G : (ti+1)*G]})
		}
		sort.Slice(groups, func(i, j int) bool { return groups[i].uid < groups[j].uid })
		var rows []shards.Row
		for _, g := range groups {
			rows = append(rows, Rows(cfg.Run, o.Iteration, g.uid, wf, g.eps)...)
		}
		for i := range rows {
			rows[i].RowID = shards.RowID(p, i)
			res.AgentScore[rows[i].Agent] += rows[i].Score
			agentN[rows[i].Agent]++
		}
		var buf bytes.Buffer
		if err := shards.WriteTrajectories(&buf, p, rows); err != nil {
			return nil, fmt.Errorf("rollout iter %d part %d: %w", o.Iteration, p, err)
		}
		f, err := commit.PutFile(ctx, b, dir, shards.PartName(p, parts), buf.Bytes(), int64(len(rows)))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		res.Rows += int64(len(rows))
	}
	for a, n := range agentN {
		res.AgentScore[a] /= float64(n)
	}
	for _, ep := range eps {
		res.MeanReward += ep.Reward
	}
	res.MeanReward /= float64(len(eps))
	iter := o.Iteration
	if _, err := commit.Commit(ctx, b, dir, &commit.Manifest{
		Kind: "rollout", SchemaVersion: shards.SchemaVersion, Run: cfg.Run, Iteration: &iter,
		Rows: res.Rows, Files: files, ConfigDigest: Digest(cfg),
		Inputs: []commit.Input{{Dir: commit.CheckpointDir(cfg.Run, set.Step), ManifestSHA256: set.ManifestSHA256}},
		Params: map[string]string{
			"workflow": wf.Name(), "policy_version": strconv.FormatInt(set.Step, 10),
			"tasks": strconv.Itoa(len(tasks)), "group_size": strconv.Itoa(G),
		},
	}); err != nil {
		return nil, err
	}
	env.Logf("rollout iter %d: %d tasks × %d samples, %d rows, %d tokens in %s (%.0f tokens/s), mean reward %.3f",
		iter, len(tasks), G, res.Rows, tokens, elapsed.Round(1e7), float64(tokens)/elapsed.Seconds(), res.MeanReward)
	return res, nil
}
