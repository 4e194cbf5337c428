package rollout

import (
	"testing"

	"github.com/drmas-dev/drmas/workflows"
)

// An episode's turn scores (a reward design) become its rows' scores; without them a row scores
// the outcome minus the invalid-action penalty.
func TestRowsTakeTurnScores(t *testing.T) {
	wf, err := workflows.New("math", workflows.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	task := workflows.Task{ID: "t", Question: "1+1", Answer: "2"}
	turns := []Turn{{Agent: "solver", Step: 0, Valid: true}, {Agent: "verifier", Step: 0, Valid: false}, {Agent: "solver", Step: 1, Valid: true}}
	plain := &Episode{Task: task, Sample: 0, Turns: turns, Reward: 1}
	scored := &Episode{Task: task, Sample: 1, Turns: turns, Reward: 1, Scores: []float64{0.9, -0.5, 0.8}}
	rows := Rows("r", 0, "u", wf, []*Episode{plain, scored})
	want := []float64{1, 1 - workflows.MathInvalidPenalty, 1, 0.9, -0.5, 0.8}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		if r.Score != want[i] || r.EpisodeReward != 1 {
			t.Errorf("row %d (%s, sample %d, step %d): score %v reward %v, want %v and 1", i, r.Agent, r.Sample, r.Step, r.Score, r.EpisodeReward, want[i])
		}
	}
}
