package workflows

import (
	"testing"
)

// play feeds responses in order and returns the turns seen. It fails if the
// episode ends before the responses run out.
func play(t *testing.T, ep Episode, responses ...string) (turns []Turn, valid []bool) {
	t.Helper()
	for i, r := range responses {
		turn, ok := ep.Next()
		if !ok {
			t.Fatalf("episode over after %d turns, %d responses left", i, len(responses)-i)
		}
		turns = append(turns, turn)
		valid = append(valid, ep.Act(r))
	}
	return turns, valid
}

func mustDone(t *testing.T, ep Episode) {
	t.Helper()
	if turn, ok := ep.Next(); ok {
		t.Fatalf("episode not over: next %s@%d %q", turn.Agent, turn.Step, turn.Prompt)
	}
}

func agentsOf(turns []Turn) []string {
	var out []string
	for _, t := range turns {
		out = append(out, t.Agent)
	}
	return out
}

func stepsOf(turns []Turn) []int {
	var out []int
	for _, t := range turns {
		out = append(out, t.Step)
	}
	return out
}

func newWF(t testing.TB, name string, mod func(*Options)) Workflow {
	t.Helper()
	o := DefaultOptions()
	if mod != nil {
		mod(&o)
	}
	w, err := New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
