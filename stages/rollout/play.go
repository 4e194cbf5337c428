package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/workflows"
)

// Turn is one recorded agent invocation of an episode.
type Turn struct {
	Agent        string
	Model        string
	Version      int64
	Step         int
	PromptText   string
	PromptIDs    []int32
	Response     actors.Response
	ResponseText string
	Valid        bool
}

// Episode is one finished trajectory: sample `Sample` of task `Task`.
type Episode struct {
	Task   workflows.Task
	Sample int
	Turns  []Turn
	Reward float64
	// Scores, when not nil, are the turns' scores set by the workflow's reward design
	// (workflows.TurnScorer), one per turn; otherwise a row scores RowScore(Reward, …).
	Scores []float64
	// F1 is the answer's token F1 (workflows.EpisodeF1), nil for a workflow without one.
	F1 *float64
	// Dropped: an agent program's episode that failed without a failure reward; it has no
	// turns and counts in no mean.
	Dropped bool
	// Verdicts are the verifier's verdicts (workflows.EpisodeVerdicts), nil for a workflow without one.
	Verdicts []workflows.Verdict
}

// PlayOptions configure Play.
type PlayOptions struct {
	Samples  int // episodes per task (the group size)
	Sampling actors.Sampling
	// Seed returns the sampling seed of a turn: the turn-th invocation of sample `sample` of task.
	Seed func(task workflows.Task, sample, turn int) uint64
	// Done is called with the number of episodes that just finished (progress).
	Done func(episodes, tokens int)
}

// Play runs Samples episodes of every task to the end. Each round, every active episode's next
// turn is collected, and the turns of agents that share a model go to that model's backend as
// one batch (the shared backend); backends are called in model-id order and responses applied
// in episode order, so the result is deterministic. Episodes are returned task-major. An
// in-process backend keeps the prompt prefixes it prefilled across the rounds (a later turn
// skips the prefill of what it shares with an earlier one) and drops them when Play returns.
func Play(ctx context.Context, wf workflows.Workflow, tasks []workflows.Task, backends map[string]actors.Backend, o PlayOptions) ([]*Episode, error) {
	type live struct {
		ep    *Episode
		state workflows.Episode
		turns int
	}
	defer actors.Release(backends) // the episodes' cached prompt prefixes end with them
	var all []*Episode
	var active []*live
	for _, t := range tasks {
		for s := 0; s < o.Samples; s++ {
			ep := &Episode{Task: t, Sample: s}
			all = append(all, ep)
			active = append(active, &live{ep: ep, state: wf.NewEpisode(t)})
		}
	}
	for len(active) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		type pending struct {
			l    *live
			turn workflows.Turn
			ids  []int32
		}
		byModel := map[string][]pending{}
		var next []*live
		finished, tokens := 0, 0
		for _, l := range active {
			turn, ok := l.state.Next()
			if !ok {
				l.ep.Reward = l.state.Reward()
				if ts, ok := l.state.(workflows.TurnScorer); ok {
					l.ep.Scores = ts.TurnScores()
				}
				if f1, ok := workflows.EpisodeF1(l.state); ok {
					l.ep.F1 = &f1
				}
				l.ep.Verdicts, _ = workflows.EpisodeVerdicts(l.state)
				finished++
				continue
			}
			be, ok := backends[turn.Agent]
			if !ok {
				return nil, fmt.Errorf("workflow %s asks agent %q to act, but no model serves it: add it under agents: in the config", wf.Name(), turn.Agent)
			}
			ids, err := actors.TokenizerOf(be).PromptIDs(turn.Agent, turn.Prompt)
			if err != nil {
				return nil, fmt.Errorf("model %s: %w", be.Model(), err)
			}
			byModel[be.Model()] = append(byModel[be.Model()], pending{l: l, turn: turn, ids: ids})
			next = append(next, l)
		}
		models := make([]string, 0, len(byModel))
		for m := range byModel {
			models = append(models, m)
		}
		sort.Strings(models)
		for _, m := range models {
			batch := byModel[m]
			be := backends[batch[0].turn.Agent]
			reqs := make([]actors.Request, len(batch))
			for i, p := range batch {
				reqs[i] = actors.Request{Agent: p.turn.Agent, Prompt: p.ids, Seed: o.Seed(p.l.ep.Task, p.l.ep.Sample, p.l.turns)}
			}
			resps, err := be.Generate(ctx, reqs, o.Sampling)
			if err != nil {
				return nil, err
			}
			if len(resps) != len(batch) {
				return nil, fmt.Errorf("model %s returned %d responses for %d requests", m, len(resps), len(batch))
			}
			for i, p := range batch {
				text := actors.TokenizerOf(be).ResponseText(resps[i].Tokens)
				valid := p.l.state.Act(text)
				p.l.ep.Turns = append(p.l.ep.Turns, Turn{
					Agent: p.turn.Agent, Model: m, Version: be.Version(), Step: p.turn.Step,
					PromptText: p.turn.Prompt, PromptIDs: p.ids, Response: resps[i], ResponseText: text, Valid: valid,
				})
				p.l.turns++
				tokens += len(resps[i].Tokens)
			}
		}
		if o.Done != nil {
			o.Done(finished, tokens)
		}
		active = next
	}
	return all, nil
}

// validText is the stored form of a prompt or response: Parquet strings must be UTF-8 (DuckDB
// refuses to read a column that is not), but a policy samples arbitrary bytes. Invalid
// sequences become U+FFFD; the token-id columns keep the exact bytes.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// Rows turns a group's episodes into trajectory rows (without row ids), sorted by
// (sample, step, agent order).
func Rows(run string, iter int, uid string, wf workflows.Workflow, eps []*Episode) []shards.Row {
	order := map[string]int{}
	for i, a := range wf.Agents() {
		order[a] = i
	}
	var rows []shards.Row
	for _, ep := range eps {
		traj := fmt.Sprintf("%s-%03d", uid, ep.Sample)
		for i, t := range ep.Turns {
			score := workflows.RowScore(ep.Reward, t.Valid, wf.InvalidPenalty())
			if ep.Scores != nil {
				score = ep.Scores[i]
			}
			rows = append(rows, shards.Row{
				Run: run, Iteration: int32(iter), PolicyVersion: t.Version,
				DataSource: ep.Task.DataSource, TaskID: ep.Task.ID, UID: uid, TrajUID: traj,
				Sample: int32(ep.Sample), Step: int32(t.Step), Agent: t.Agent, Model: t.Model,
				PromptIDs: t.PromptIDs, ResponseIDs: t.Response.Tokens, ResponseLogprobs: t.Response.LogProbs,
				PromptText: validText(t.PromptText), ResponseText: validText(t.ResponseText), Valid: t.Valid,
				Score:         score,
				EpisodeReward: ep.Reward, FinishReason: t.Response.FinishReason,
			})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if a.Sample != b.Sample {
			return a.Sample < b.Sample
		}
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		return order[a.Agent] < order[b.Agent]
	})
	return rows
}
