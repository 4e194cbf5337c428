package program

import (
	"testing"

	"github.com/drmas-dev/drmas/workflows"
)

// TestGradeAndTasks: reward math grades a \boxed{} answer, reward search an <answer> against a
// JSON list of golden answers, reward program leaves it to the program; tasks come from the
// math generator (the search one with reward search).
func TestGradeAndTasks(t *testing.T) {
	mk := func(reward string) *Workflow {
		o := workflows.DefaultOptions()
		o.Program = workflows.ProgramOptions{Command: []string{"x"}, Reward: reward, Agents: []string{"a", "b"}}
		w, err := workflows.New(Name, o)
		if err != nil {
			t.Fatal(err)
		}
		return w.(*Workflow)
	}
	math, search, prog := mk("math"), mk("search"), mk("")
	cases := []struct {
		w      *Workflow
		answer string
		final  string
		reward float64
		ok     bool
	}{
		{math, "12", `so \boxed{12}`, 1, true},
		{math, "12", `\boxed{13}`, 0, true},
		{search, `["Paris", "paris, france"]`, "<answer>the Paris</answer>", 1, true},
		{search, "Lisbon", "<answer>Porto</answer>", 0, true},
		{prog, "12", `\boxed{12}`, 0, false},
	}
	for i, c := range cases {
		r, _, ok := c.w.Grade(workflows.Task{Answer: c.answer}, c.final)
		if r != c.reward || ok != c.ok {
			t.Errorf("case %d: reward %v ok %v, want %v %v", i, r, ok, c.reward, c.ok)
		}
	}
	if ts := math.Tasks(1, workflows.Train, 3); len(ts) != 3 || ts[0].DataSource[:4] != "math" {
		t.Errorf("math tasks %+v", ts)
	}
	if ts := search.Tasks(1, workflows.Train, 3); len(ts) != 3 || ts[0].DataSource[:6] != "search" {
		t.Errorf("search tasks %+v", ts)
	}
	if prog.Options().MaxCalls != workflows.DefaultProgramMaxCalls || prog.Options().Reward != workflows.RewardProgram || prog.Agents()[1] != "b" {
		t.Errorf("defaults %+v", prog.Options())
	}
	if _, ok := prog.NewEpisode(workflows.Task{}).Next(); ok || prog.Demonstrations(workflows.Task{}, nil, 0) != nil {
		t.Error("a program's episode state machine is not empty")
	}
}
