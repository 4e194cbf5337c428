package rollout

import (
	"context"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/estimators"
	"github.com/drmas-dev/drmas/stages"
	"github.com/drmas-dev/drmas/workflows"
)

// filter is rollout.filter_groups (DAPO's dynamic sampling) for one iteration: each part keeps
// its groups whose rows carry a learning signal and refills from its own share of reserve
// prompts, so a part's rows never depend on what other shards sampled.
type filter struct {
	reserve  []workflows.Task
	perAgent bool // the signal is per (group, agent): learn.estimator normalizes per agent
}

// newFilter returns the iteration's filter, or nil when rollout.filter_groups is off.
func newFilter(cfg *configs.Config, wf workflows.Workflow, iter, tasks int) (*filter, error) {
	if !cfg.Rollout.FilterGroups {
		return nil, nil
	}
	reserve, err := stages.ReserveTasks(cfg, wf, iter, tasks*(cfg.Rollout.MaxOversample-1))
	if err != nil {
		return nil, err
	}
	spec, err := estimators.Resolve(cfg.Learn.Estimator, cfg.Normalize.Eps)
	if err != nil {
		return nil, err
	}
	perAgent := spec.Estimator == estimators.DrMAS || (spec.Estimator == estimators.RLOO && spec.PerAgent)
	return &filter{reserve: reserve, perAgent: perAgent}, nil
}

// partReserve is part p's share of the reserve, of parts.
func (f *filter) partReserve(p, parts int) []workflows.Task {
	n := len(f.reserve)
	return f.reserve[p*n/parts : (p+1)*n/parts]
}

// signal reports whether a group's rows (one task's G episodes) carry a learning signal: scores
// that are not all one value, within one agent's rows when the signal is per agent.
func (f *filter) signal(r *stageRun, eps []*Episode) bool {
	rows := Rows(r.env.Config.Run, r.iter, UID(r.env.Config.Run, r.iter, eps[0].Task.ID), r.wf, eps)
	first := map[string]float64{}
	for _, row := range rows {
		key := ""
		if f.perAgent {
			key = row.Agent
		}
		if s, ok := first[key]; !ok {
			first[key] = row.Score
		} else if s != row.Score {
			return true
		}
	}
	return false
}

// keep returns eps's groups (G episodes each, task-major) with a signal, and how many it dropped.
func (f *filter) keep(r *stageRun, eps []*Episode, G int) (kept []*Episode, dropped int) {
	for i := 0; i < len(eps); i += G {
		if f.signal(r, eps[i:i+G]) {
			kept = append(kept, eps[i:i+G]...)
		} else {
			dropped++
		}
	}
	return kept, dropped
}

// refill filters part p's played episodes eps (want groups) and plays its reserve prompts,
// as many at a time as groups are missing, until the part has want groups with a signal or
// its reserve is spent. It returns the part's episodes and the groups kept and dropped.
func (f *filter) refill(ctx context.Context, r *stageRun, p int, eps []*Episode, want int, play func(context.Context, []workflows.Task) ([]*Episode, error)) ([]*Episode, int, int, error) {
	G := r.env.Config.Rollout.GroupSize
	kept, dropped := f.keep(r, eps, G)
	reserve := f.partReserve(p, len(r.names))
	for len(kept)/G < want && len(reserve) > 0 {
		batch := reserve[:min(want-len(kept)/G, len(reserve))]
		reserve = reserve[len(batch):]
		more, err := play(ctx, batch)
		if err != nil {
			return nil, 0, 0, err
		}
		k, d := f.keep(r, more, G)
		kept, dropped = append(kept, k...), dropped+d
	}
	return kept, len(kept) / G, dropped, nil
}
