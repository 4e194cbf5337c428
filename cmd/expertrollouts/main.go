// Command expertrollouts writes one iteration of rollouts in which a workflow's experts are the
// policy, as `drmas import` JSONL: tasks.per_iteration training prompts × rollout.group_size
// samples, every expert turn slipping with probability -noise as the warm-up's demonstrations do,
// each row scored by the config's reward design. Imported into a run, `drmas analyze --report
// condition` then shows the Lemma 4.2 condition that the reward design gives a policy that slips
// like the warm-up's experts, without training one (docs/testbed.md). It is an experiment tool.
//
//	go run ./cmd/expertrollouts -config configs/math-critic.yaml -noise 0.3 -iter 0 > it0.jsonl
//	drmas --config configs/math-critic.yaml --run expert import it0.jsonl --iter 0
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/internal/seeds"
	"github.com/drmas-dev/drmas/workflows"
)

func main() {
	cfgPath := flag.String("config", "", "config file (its seed, workflow, tasks.per_iteration and rollout.group_size)")
	noise := flag.Float64("noise", 0.3, "probability that an expert turn slips")
	iter := flag.Int("iter", 0, "iteration: picks the prompts and the slips")
	flag.Parse()
	if err := run(os.Stdout, *cfgPath, *noise, *iter); err != nil {
		fmt.Fprintln(os.Stderr, "expertrollouts:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, cfgPath string, noise float64, iter int) error {
	if !(noise >= 0 && noise <= 1) {
		return fmt.Errorf("-noise %v: want 0..1", noise)
	}
	cfg, err := configs.Load(configs.LoadOptions{File: cfgPath})
	if err != nil {
		return err
	}
	wf, err := cfg.NewWorkflow()
	if err != nil {
		return err
	}
	tasks := wf.Tasks(seeds.Derive(cfg.Seed, "expert-tasks", iter), workflows.Train, cfg.Tasks.PerIteration)
	rng := rand.New(rand.NewPCG(seeds.Derive(cfg.Seed, "expert-slips", iter), 1))
	enc := json.NewEncoder(w)
	for _, t := range tasks {
		for s := range cfg.Rollout.GroupSize {
			for _, r := range playExperts(wf, t, rng, noise, fmt.Sprintf("%s-i%d", t.ID, iter), s) {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// row is one agent turn in `drmas import`'s columns.
type row struct {
	UID           string  `json:"uid"`
	TrajUID       string  `json:"traj_uid"`
	Sample        int     `json:"sample"`
	TaskID        string  `json:"task_id"`
	DataSource    string  `json:"data_source"`
	Agent         string  `json:"agent"`
	Step          int     `json:"step"`
	PromptText    string  `json:"prompt_text"`
	ResponseText  string  `json:"response_text"`
	Valid         bool    `json:"valid"`
	Score         float64 `json:"score"`
	EpisodeReward float64 `json:"episode_reward"`
}

// playExperts plays one episode of t with the experts' responses (the demonstrations of the
// episode itself, not the checking ones that follow it) and scores its rows as the rollout
// stage does.
func playExperts(wf workflows.Workflow, t workflows.Task, rng *rand.Rand, noise float64, uid string, sample int) []row {
	ep := wf.NewEpisode(t)
	var rows []row
	for _, d := range wf.Demonstrations(t, rng, noise) {
		turn, ok := ep.Next()
		if !ok {
			break
		}
		rows = append(rows, row{UID: uid, TrajUID: fmt.Sprintf("%s-s%d", uid, sample), Sample: sample, TaskID: t.ID,
			DataSource: t.DataSource, Agent: turn.Agent, Step: turn.Step, PromptText: turn.Prompt, ResponseText: d.Response,
			Valid: ep.Act(d.Response)})
	}
	reward := ep.Reward()
	var scores []float64
	if ts, ok := ep.(workflows.TurnScorer); ok {
		scores = ts.TurnScores()
	}
	for i := range rows {
		rows[i].EpisodeReward = reward
		rows[i].Score = workflows.RowScore(reward, rows[i].Valid, wf.InvalidPenalty())
		if scores != nil {
			rows[i].Score = scores[i]
		}
	}
	return rows
}
