package workflows

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseVerifierMarks(t *testing.T) {
	for in, want := range map[string]bool{"yes": true, "no": false, " yes\n": true,
		"231 yyy": true, "231 yyn": false, "231 nyy": false, "0 y": true, "0 n": false,
		"123456789 yyyyyyyyy\n": true, "123456789 yyyynyyyy": false} {
		if a, ok := ParseVerifierMarks(in); !ok || a != want {
			t.Errorf("ParseVerifierMarks(%q) = %v,%v, want %v,true", in, a, ok, want)
		}
	}
	for _, in := range []string{"", "231 yes", "231 no", "231 yy", "231 yyyy", "231  yyy", "231 yYy", "231 y y",
		"23a yyy", "-23 yyy", "1234567890 yyyyyyyyyy", "yyy", "231", "231 yyy yes", "y", "Yes"} {
		if _, ok := ParseVerifierMarks(in); ok {
			t.Errorf("ParseVerifierMarks(%q) valid", in)
		}
	}
	// The answer format's parser does not take marks: the default keeps its grammar.
	if _, ok := ParseVerifier("231 yyy"); ok {
		t.Error(`ParseVerifier("231 yyy") valid`)
	}
}

func TestDigitMarks(t *testing.T) {
	for _, c := range []struct{ work, cand, want string }{
		{"231", "231", "yyy"}, {"231", "221", "yny"}, {"231", "132", "nyn"},
		{"231", "2310", "nnn"}, {"231", "", "nnn"}, {"0", "0", "y"},
	} {
		if got := digitMarks(c.work, c.cand); got != c.want {
			t.Errorf("digitMarks(%q, %q) = %q, want %q", c.work, c.cand, got, c.want)
		}
	}
}

// With verifier_check: digits, the expert verifier writes its answer and a mark per digit of
// the candidate; a checking demo on "74+58" (answer 231) judging a slipped candidate.
func TestVerifierCheckDigitsDemos(t *testing.T) {
	w := newWF(t, "math", func(o *Options) { o.VerifierCheck = VerifierCheckDigits })
	task := Task{ID: "t", Question: "74+58", Answer: "231", DataSource: SourceMathEasy}
	demos := w.Demonstrations(task, rand.New(rand.NewPCG(1, 2)), 0)
	// Noise 0: solver "ans 231", verifier "231 yyy" (approved, the episode ends), then the
	// checking demo against a candidate with one digit slipped.
	if len(demos) != 3 || demos[0].Response != "ans 231" || demos[1].Response != "231 yyy" {
		t.Fatalf("demos %+v", demos)
	}
	d := demos[2]
	cand := strings.TrimSuffix(strings.TrimPrefix(d.Prompt, "verifier\nQ 74+58\nans "), "\n")
	want := "231 " + digitMarks("231", cand)
	if d.Agent != AgentVerifier || cand == "231" || len(cand) != 3 || d.Response != want || strings.Count(d.Response, "n") != 1 {
		t.Fatalf("checking demo %+v, want response %q", d, want)
	}
	// The episode parses the marks: "231 yyn" rejects (the solver retries), a bare "yes" approves.
	ep := w.NewEpisode(task)
	ep.Next()
	ep.Act("ans 231")
	ep.Next()
	if !ep.Act("231 yyn") {
		t.Fatal(`"231 yyn" invalid`)
	}
	if turn, ok := ep.Next(); !ok || turn.Agent != AgentSolver || turn.Prompt != "solver\nQ 74+58\nrejected 231\n" {
		t.Fatalf("after a reject: %+v %v", turn, ok)
	}
	// The answer format's "231 yes" is invalid here: a reject.
	ep = w.NewEpisode(task)
	ep.Next()
	ep.Act("ans 231")
	ep.Next()
	if ep.Act("231 yes") {
		t.Fatal(`"231 yes" valid under verifier_check: digits`)
	}
}

func TestVerifierCheckOption(t *testing.T) {
	o := DefaultOptions()
	o.VerifierCheck = "marks"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `verifier_check: "marks", want answer, digits or recompute`) {
		t.Fatalf("Validate: %v", err)
	}
}

// Under verifier_reward: verdict the marks are the verdict: "231 yyy" on the right answer 231
// is a right approval (verifier row 1), "231 yny" on the wrong 221 a right reject (1), and
// "221 yyy" on 221 a wrong approval (0).
func TestVerdictRewardWithDigits(t *testing.T) {
	w := newWF(t, "math", func(o *Options) {
		o.VerifierCheck = VerifierCheckDigits
		o.Rewards.VerifierReward = VerifierVerdict
	})
	task := Task{ID: "t", Question: "74+58", Answer: "231"}
	for _, c := range []struct {
		turns []string
		want  []float64
	}{
		{[]string{"ans 231", "231 yyy"}, []float64{1, 1}},
		{[]string{"ans 221", "231 yny", "ans 231"}, []float64{1, 1, 1}},
		{[]string{"ans 221", "221 yyy"}, []float64{0, 0}},
	} {
		ep := w.NewEpisode(task)
		for _, r := range c.turns {
			if _, ok := ep.Next(); !ok {
				t.Fatalf("%v: episode over before %q", c.turns, r)
			}
			ep.Act(r)
		}
		got := ep.(TurnScorer).TurnScores()
		if len(got) != len(c.want) {
			t.Fatalf("%v: scores %v, want %v", c.turns, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%v: scores %v, want %v", c.turns, got, c.want)
				break
			}
		}
	}
}

func TestParseVerifierWork(t *testing.T) {
	for _, c := range []struct {
		in                    string
		work                  int
		isWork, approve, want bool
	}{
		{"231", 231, true, false, true}, {" 0231\n", 231, true, false, true}, {"0", 0, true, false, true},
		{"123456789", 123456789, true, false, true}, {"yes", 0, false, true, true}, {"no", 0, false, false, true},
		{"", 0, false, false, false}, {"231 yes", 0, false, false, false}, {"-231", 0, false, false, false},
		{"1234567890", 0, false, false, false}, {"23 1", 0, false, false, false}, {"ans 231", 0, false, false, false},
	} {
		work, isWork, approve, ok := ParseVerifierWork(c.in)
		if ok != c.want || work != c.work || isWork != c.isWork || approve != c.approve {
			t.Errorf("ParseVerifierWork(%q) = %d,%v,%v,%v, want %d,%v,%v,%v", c.in, work, isWork, approve, ok, c.work, c.isWork, c.approve, c.want)
		}
	}
}

// With verifier_check: recompute the expert verifier writes only its answer, and the episode
// approves exactly a candidate equal to it as an integer.
func TestVerifierCheckRecompute(t *testing.T) {
	w := newWF(t, "math", func(o *Options) { o.VerifierCheck = VerifierCheckRecompute })
	task := Task{ID: "t", Question: "74+58", Answer: "231", DataSource: SourceMathEasy}
	demos := w.Demonstrations(task, rand.New(rand.NewPCG(1, 2)), 0)
	if len(demos) != 3 || demos[1].Response != "231" || demos[2].Response != "231" || demos[2].Prompt == demos[1].Prompt {
		t.Fatalf("demos %+v", demos)
	}
	for _, c := range []struct {
		cand, verdict string
		approved      bool
	}{
		{"ans 231", "231", true}, {"ans 231", "0231", true}, {"ans 221", "221", true},
		{"ans 221", "231", false}, {"ans 231", "221", false}, {"ans 231", "no", false}, {"ans 221", "yes", true},
		{"oops", "231", false}, {"ans 231", "231 yes", false},
	} {
		ep := w.NewEpisode(task)
		ep.Next()
		ep.Act(c.cand)
		ep.Next()
		ep.Act(c.verdict)
		v := ep.(Verdicter).Verdicts()
		if len(v) != 1 || v[0].Approved != c.approved {
			t.Errorf("candidate %q, verifier %q: verdicts %+v, want approved %v", c.cand, c.verdict, v, c.approved)
		}
	}
}
