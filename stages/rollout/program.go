package rollout

import (
	"context"

	"github.com/drmas-dev/drmas/actors"
	"github.com/drmas-dev/drmas/gateway"
	"github.com/drmas-dev/drmas/workflows"
	"github.com/drmas-dev/drmas/workflows/program"
)

// player plays a workflow's episodes: Play, or an agent program's through the gateway.
type player func(ctx context.Context, wf workflows.Workflow, tasks []workflows.Task, backends map[string]actors.Backend, o PlayOptions) ([]*Episode, error)

// playerOf is the player of wf: an agent program (the program workflow) runs as processes
// against the gateway, each call a turn (its step the call's index); logf logs failed
// episodes.
func playerOf(wf workflows.Workflow, logf func(string, ...any)) player {
	pw, ok := wf.(*program.Workflow)
	if !ok {
		return Play
	}
	return func(ctx context.Context, _ workflows.Workflow, tasks []workflows.Task, backends map[string]actors.Backend, o PlayOptions) ([]*Episode, error) {
		defer actors.Release(backends) // the episodes' cached prompt prefixes end with them
		outs, err := gateway.Run(ctx, gateway.RunOptions{Program: pw.Options(), Grade: pw.Grade, Agents: backends,
			Sampling: o.Sampling, Tasks: tasks, Samples: o.Samples, Seed: o.Seed, Done: o.Done, Logf: logf})
		if err != nil {
			return nil, err
		}
		eps := make([]*Episode, len(outs))
		for i, oc := range outs {
			eps[i] = programEpisode(oc)
		}
		return eps, nil
	}
}

// programEpisode is an outcome as an episode: a row per call, scored by the episode's reward
// less the call's penalty (a penalized call is invalid).
func programEpisode(oc gateway.Outcome) *Episode {
	ep := &Episode{Task: oc.Task, Sample: oc.Sample, Reward: oc.Reward, Dropped: oc.Dropped}
	for j, c := range oc.Calls {
		pen := 0.0
		if j < len(oc.Penalties) {
			pen = oc.Penalties[j]
		}
		ep.Turns = append(ep.Turns, Turn{Agent: c.Agent, Model: c.Model, Version: c.Version, Step: c.Index,
			PromptText: c.PromptText, PromptIDs: c.PromptIDs, Response: c.Response, ResponseText: c.Text, Valid: pen == 0})
		ep.Scores = append(ep.Scores, oc.Reward-pen)
	}
	return ep
}
