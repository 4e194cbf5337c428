package workflows

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var task127 = Task{ID: "t", Question: "12+7", Answer: "19", DataSource: SourceMathHard}

func TestMathApproveEndsEarly(t *testing.T) {
	w := newWF(t, "math", nil)
	ep := w.NewEpisode(task127)
	turns, valid := play(t, ep, "ans 19", "yes")
	mustDone(t, ep)
	if got := agentsOf(turns); !reflect.DeepEqual(got, []string{"solver", "verifier"}) {
		t.Fatalf("agents %v", got)
	}
	if got := stepsOf(turns); !reflect.DeepEqual(got, []int{0, 0}) {
		t.Fatalf("steps %v", got)
	}
	if turns[0].Prompt != "solver\nQ 12+7\n" || turns[1].Prompt != "verifier\nQ 12+7\nans 19\n" {
		t.Fatalf("prompts %+v", turns)
	}
	if !valid[0] || !valid[1] || ep.Reward() != 1 {
		t.Fatalf("valid %v reward %v", valid, ep.Reward())
	}
	// Approving a wrong answer ends the episode with reward 0.
	ep = w.NewEpisode(task127)
	play(t, ep, "ans 18", "yes")
	mustDone(t, ep)
	if ep.Reward() != 0 {
		t.Fatal("approved wrong answer rewarded")
	}
}

func TestMathRejectRetriesAndLastLoopSkipsVerifier(t *testing.T) {
	w := newWF(t, "math", nil) // max_loop 2
	ep := w.NewEpisode(task127)
	turns, _ := play(t, ep, "ans 18", "no", "ans 19")
	mustDone(t, ep) // no verifier in the last loop
	if got := agentsOf(turns); !reflect.DeepEqual(got, []string{"solver", "verifier", "solver"}) {
		t.Fatalf("agents %v", got)
	}
	if got := stepsOf(turns); !reflect.DeepEqual(got, []int{0, 0, 1}) {
		t.Fatalf("steps %v", got)
	}
	if turns[2].Prompt != "solver\nQ 12+7\nrejected 18\n" {
		t.Fatalf("retry prompt %q", turns[2].Prompt)
	}
	if ep.Reward() != 1 {
		t.Fatal("last answer correct but reward 0")
	}
	// The LAST answer is graded: a correct first answer rejected, then a wrong one.
	ep = w.NewEpisode(task127)
	play(t, ep, "ans 19", "no", "ans 20")
	mustDone(t, ep)
	if ep.Reward() != 0 {
		t.Fatal("graded the first answer")
	}
}

func TestMathMaxLoop(t *testing.T) {
	for _, maxLoop := range []int{1, 3, 5} {
		w := newWF(t, "math", func(o *Options) { o.MaxLoop = maxLoop })
		ep := w.NewEpisode(task127)
		var resps []string
		for l := 0; l < maxLoop-1; l++ {
			resps = append(resps, "ans 1", "no")
		}
		resps = append(resps, "ans 19")
		turns, _ := play(t, ep, resps...)
		mustDone(t, ep)
		last := turns[len(turns)-1]
		if last.Agent != AgentSolver || last.Step != maxLoop-1 {
			t.Fatalf("max_loop %d: last turn %s@%d", maxLoop, last.Agent, last.Step)
		}
		for _, tu := range turns {
			if tu.Agent == AgentVerifier && tu.Step == maxLoop-1 {
				t.Fatalf("verifier acted in the last loop")
			}
		}
		if ep.Reward() != 1 {
			t.Fatalf("max_loop %d: reward %v", maxLoop, ep.Reward())
		}
	}
}

func TestMathInvalidActions(t *testing.T) {
	w := newWF(t, "math", nil)
	// Invalid solver: answer is none, shown as "?", graded wrong.
	ep := w.NewEpisode(task127)
	turns, valid := play(t, ep, "19", "maybe", "ans 19 please")
	mustDone(t, ep)
	if turns[1].Prompt != "verifier\nQ 12+7\nans ?\n" {
		t.Fatalf("verifier prompt after invalid solver: %q", turns[1].Prompt)
	}
	// Invalid verdict counts as reject: the solver got a retry.
	if turns[2].Agent != AgentSolver || turns[2].Prompt != "solver\nQ 12+7\nrejected ?\n" {
		t.Fatalf("after invalid verdict: %+v", turns[2])
	}
	if !reflect.DeepEqual(valid, []bool{false, false, false}) || ep.Reward() != 0 {
		t.Fatalf("valid %v reward %v", valid, ep.Reward())
	}
	// Scores: reward minus penalty on invalid rows.
	if s := RowScore(1, false, w.InvalidPenalty()); s != 0.9 {
		t.Fatalf("RowScore = %v", s)
	}
	if s := RowScore(0, false, w.InvalidPenalty()); s != -0.1 || RowScore(1, true, 0.1) != 1 {
		t.Fatalf("RowScore = %v", s)
	}
	// Acting on a finished episode is ignored.
	if ep.Act("ans 19") || ep.Reward() != 0 {
		t.Fatal("Act after done changed the episode")
	}
}

func TestMathNextIdempotentAndNonIntegerAnswer(t *testing.T) {
	w := newWF(t, "math", nil)
	ep := w.NewEpisode(task127)
	a, _ := ep.Next()
	b, _ := ep.Next()
	if a != b {
		t.Fatal("Next not idempotent")
	}
	ep = w.NewEpisode(Task{ID: "x", Question: "what is pi", Answer: "3.14"})
	play(t, ep, "ans 3", "yes")
	if ep.Reward() != 0 {
		t.Fatal("non-integer answer rewarded")
	}
	// Long multi-line dataset questions are sanitised and cut.
	ep = w.NewEpisode(Task{ID: "y", Question: "line1\nline2 " + strings.Repeat("é", 200), Answer: "1"})
	turn, _ := ep.Next()
	if len(turn.Prompt) > PromptBudget || strings.Count(turn.Prompt, "\n") != 2 {
		t.Fatalf("prompt %d bytes: %q", len(turn.Prompt), turn.Prompt)
	}
}

// A dataset answer written as an integer in another form is still that
// integer (a JSONL answer 42.0, a number, loads as the string "42.0").
func TestMathTaskAnswerForms(t *testing.T) {
	w := newWF(t, "math", nil)
	solved := map[string]string{
		"42": "ans 42", " 42\n": "ans 42", "+42": "ans 42", "042": "ans 42", "42.": "ans 42", "42.0": "ans 42",
		"42.000": "ans 42", "-7": "ans -7", "\u22127": "ans -7", " \u22127.0 ": "ans -7", "-0.0": "ans 0", "0": "ans 0",
	}
	for answer, resp := range solved {
		ep := w.NewEpisode(Task{ID: "a", Question: "q", Answer: answer})
		play(t, ep, resp, "yes")
		if ep.Reward() != 1 {
			t.Errorf("answer %q, response %q: reward %v, want 1", answer, resp, ep.Reward())
		}
	}
	unsolvable := []string{"4.2", "42.01", "1e3", "1,000", "4 2", ".0", ".", "-", "+-1", "\u2212-1", "--1", "42..0", "0x10", "1_000", "", "99999999999999999999"}
	for _, answer := range unsolvable {
		if v, ok := parseTaskInt(answer); ok {
			t.Errorf("parseTaskInt(%q) = %d, want not an integer", answer, v)
		}
	}
	ep := w.NewEpisode(Task{ID: "a", Question: "q", Answer: "4.2"})
	play(t, ep, "ans 4", "yes")
	if ep.Reward() != 0 {
		t.Error("answer 4.2 graded as 4")
	}
}

// The doc of Math.Tasks states the size of math_easy's eval split (why held-out
// prompts repeat): 29 of its 300 questions.
func TestMathEasyEvalSplitSize(t *testing.T) {
	seen := map[string]bool{}
	eval := 0
	for x := 0; x < 10; x++ {
		for y := 0; y < 10; y++ {
			for _, op := range []string{"+", "-", "*"} {
				q := fmt.Sprintf("%d%s%d", x, op, y)
				seen[q] = true
				if SplitOf("math", q) == Eval {
					eval++
				}
			}
		}
	}
	if len(seen) != 300 || eval != 29 {
		t.Fatalf("math_easy: %d questions, %d eval; the doc of Math.Tasks says 300 and 29", len(seen), eval)
	}
}

// TestShownQuestion: a question is compared as the workflow's prompt shows it: control
// characters as spaces, trimmed, cut to the workflow's limit.
func TestShownQuestion(t *testing.T) {
	long := strings.Repeat("7", 200)
	for _, c := range []struct{ wf, q, want string }{
		{"math", " 9*4\t", "9*4"},
		{"math", "9\n*4", "9 *4"},
		{"math", long, long[:maxMathQuestion]},
		{"search", long, long[:maxSearchQuestion]},
		{"other", " a\tb ", "a b"},
	} {
		if got := ShownQuestion(c.wf, c.q); got != c.want {
			t.Errorf("ShownQuestion(%q, %q) = %q, want %q", c.wf, c.q, got, c.want)
		}
	}
}
