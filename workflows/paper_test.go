package workflows

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// paperWF builds a workflow whose named agents use the paper format.
func paperWF(t testing.TB, name string, agents ...string) Workflow {
	t.Helper()
	return newWF(t, name, func(o *Options) { o.PaperAgents = agents })
}

// The golden prompts below are written out by hand from the documented format.

const goldenSolver0 = `You are a member of a team of two agents that solves math problems: the Solver Agent solves the problem and the Verifier Agent checks the solution.

Math problem: 12+7

You are the Solver Agent. Reason through the problem step by step, then give your final answer within \boxed{}.
`

const goldenVerifier0 = `You are a member of a team of two agents that solves math problems: the Solver Agent solves the problem and the Verifier Agent checks the solution.

Math problem: 12+7

The Solver Agent's solution:
12+7 = 18, so the answer is \boxed{18}.

You are the Verifier Agent. Check each step of the solution and its final answer. At the end of your response, give your verdict: <verify>approve</verify> if the solution and its final answer are correct, or <verify>reject</verify> if you find any error.
`

const goldenSolver1 = `You are a member of a team of two agents that solves math problems: the Solver Agent solves the problem and the Verifier Agent checks the solution.

Math problem: 12+7

Your previous solution:
12+7 = 18, so the answer is \boxed{18}.

The Verifier Agent's review:
2+7 is 9, not 8.
<verify>reject</verify>

You are the Solver Agent. The Verifier Agent rejected your previous solution. Reason through the problem again step by step, correct any mistake, then give your final answer within \boxed{}.
`

func TestPaperMathPrompts(t *testing.T) {
	w := paperWF(t, "math", AgentSolver, AgentVerifier)
	ep := w.NewEpisode(task127)
	turns, valid := play(t, ep, "12+7 = 18, so the answer is \\boxed{18}.", "2+7 is 9, not 8.\n<verify>reject</verify>", "\\boxed{19}")
	mustDone(t, ep)
	for i, want := range []string{goldenSolver0, goldenVerifier0, goldenSolver1} {
		if turns[i].Prompt != want {
			t.Errorf("turn %d (%s) prompt:\n%s\nwant:\n%s", i, turns[i].Agent, turns[i].Prompt, want)
		}
	}
	if !reflect.DeepEqual(valid, []bool{true, true, true}) || ep.Reward() != 1 {
		t.Fatalf("valid %v reward %v", valid, ep.Reward())
	}
}

const goldenSearchHead = `You are a member of a team of three agents that answers questions with a search engine: the Router Agent decides whether the team has enough information, the Search Agent writes search queries, and the Answer Agent gives the final answer.

Question: which country does {P} live in

`

const goldenRouter0 = goldenSearchHead + `Step 1 of at most 4.

Search queries so far:
(none)

Retrieved passages:
(none)

You are the Router Agent. Decide whether the retrieved passages and your own knowledge are enough to answer the question. At the end of your response, give your decision: <verify>yes</verify> if they are enough, or <verify>no</verify> if the team must search for more.
`

const goldenSearcher0 = goldenSearchHead + `Step 1 of at most 4.

Search queries so far:
(none)

Retrieved passages:
(none)

You are the Search Agent. Write one search query for the information that is still missing, in the form <search>your query</search>.
`

const goldenAnswerer2 = goldenSearchHead + `Step 3 of at most 4.

Search queries so far:
1. {P} lives
2. {C} is

Retrieved passages:
Doc 1: {P} lives in {C}
Doc 2: {C} is in {N}

You are the Answer Agent. Answer the question in a few words, without explanation, within <answer> and </answer>, for example <answer>Paris</answer>.
`

func TestPaperSearchPrompts(t *testing.T) {
	s := newWF(t, "search", func(o *Options) { o.PaperAgents = []string{AgentAnswerer, AgentRouter, AgentSearcher} }).(*Search)
	task, p, city := twoHop(s)
	fill := strings.NewReplacer("{P}", p, "{C}", city, "{N}", task.Answer).Replace
	ep := s.NewEpisode(task)
	turns, valid := play(t, ep,
		"I know nothing yet. <verify>no</verify>", "<search>"+p+" lives</search>",
		"<verify>NO</verify>", "<search> "+city+"\n is </search>",
		"<verify>yes</verify>", "<answer>"+strings.ToUpper(task.Answer)+"</answer>")
	mustDone(t, ep)
	if got := stepsOf(turns); !reflect.DeepEqual(got, []int{0, 0, 1, 1, 2, 2}) {
		t.Fatalf("steps %v", got)
	}
	for i, want := range map[int]string{0: goldenRouter0, 1: goldenSearcher0, 5: goldenAnswerer2} {
		if turns[i].Prompt != fill(want) {
			t.Errorf("turn %d (%s) prompt:\n%s\nwant:\n%s", i, turns[i].Agent, turns[i].Prompt, fill(want))
		}
	}
	for i, v := range valid {
		if !v {
			t.Errorf("turn %d invalid", i)
		}
	}
	if ep.Reward() != 1 {
		t.Fatal("correct answer not rewarded")
	}
}

func TestParsePaperTags(t *testing.T) {
	type res struct {
		v  string
		ok bool
	}
	kw := func(f func(string) (bool, bool), yes, no string) func(string) res {
		return func(s string) res {
			b, ok := f(s)
			if !ok {
				return res{"", false}
			}
			return map[bool]res{true: {yes, true}, false: {no, true}}[b]
		}
	}
	text := func(f func(string) (string, bool)) func(string) res {
		return func(s string) res { v, ok := f(s); return res{v, ok} }
	}
	long := strings.Repeat("x", PaperQueryBytes+1)
	cases := []struct {
		name  string
		parse func(string) res
		in    string
		want  res
	}{
		{"verify approve", kw(ParsePaperVerifier, "approve", "reject"), "All steps hold.\n<verify>approve</verify>", res{"approve", true}},
		{"verify reject", kw(ParsePaperVerifier, "approve", "reject"), "<verify>reject</verify>", res{"reject", true}},
		{"verify case and space", kw(ParsePaperVerifier, "approve", "reject"), "<VERIFY> Approve\n</Verify>.", res{"approve", true}},
		{"verify last counts", kw(ParsePaperVerifier, "approve", "reject"), "I answer <verify>approve</verify> or <verify>reject</verify>; verdict: <verify>reject</verify>", res{"reject", true}},
		{"verify other word", kw(ParsePaperVerifier, "approve", "reject"), "<verify>yes</verify>", res{"", false}},
		{"verify missing close", kw(ParsePaperVerifier, "approve", "reject"), "<verify>approve", res{"", false}},
		{"verify missing open", kw(ParsePaperVerifier, "approve", "reject"), "approve</verify>", res{"", false}},
		{"verify empty", kw(ParsePaperVerifier, "approve", "reject"), "<verify> </verify>", res{"", false}},
		{"verify nested", kw(ParsePaperVerifier, "approve", "reject"), "<verify><verify>approve</verify></verify>", res{"", false}},
		{"verify unbalanced", kw(ParsePaperVerifier, "approve", "reject"), "<verify>approve</verify>x</verify>", res{"", false}},
		{"verify spaced tag", kw(ParsePaperVerifier, "approve", "reject"), "< verify>approve</verify>", res{"", false}},
		{"verify bare word", kw(ParsePaperVerifier, "approve", "reject"), "approve", res{"", false}},
		{"verify after think", kw(ParsePaperVerifier, "approve", "reject"), "<think>maybe <verify>approve</verify></think>\n<verify>reject</verify>", res{"reject", true}},
		{"verify only in think", kw(ParsePaperVerifier, "approve", "reject"), "<think><verify>approve</verify></think>\nok", res{"", false}},
		{"router yes", kw(ParsePaperRouter, "yes", "no"), "enough. <verify>yes</verify>", res{"yes", true}},
		{"router no upper", kw(ParsePaperRouter, "yes", "no"), "<verify>NO</verify>", res{"no", true}},
		{"router approve", kw(ParsePaperRouter, "yes", "no"), "<verify>approve</verify>", res{"", false}},
		{"router compact", kw(ParsePaperRouter, "yes", "no"), "enough", res{"", false}},
		{"search", text(ParsePaperSearcher), "<search>capital of norway</search>", res{"capital of norway", true}},
		{"search space", text(ParsePaperSearcher), "<SEARCH>\n  capital\tof  Norway \n</search>", res{"capital of Norway", true}},
		{"search control", text(ParsePaperSearcher), "<search>a\x00b</search>", res{"a b", true}},
		{"search last", text(ParsePaperSearcher), "<search>first</search><search>second</search>", res{"second", true}},
		{"search empty", text(ParsePaperSearcher), "<search></search>", res{"", false}},
		{"search nested", text(ParsePaperSearcher), "<search>a <search>b</search></search>", res{"", false}},
		{"search no close", text(ParsePaperSearcher), "<search>a", res{"", false}},
		{"search too long", text(ParsePaperSearcher), "<search>" + long + "</search>", res{"", false}},
		{"search max", text(ParsePaperSearcher), "<search>" + long[1:] + "</search>", res{long[1:], true}},
		{"search bad utf8", text(ParsePaperSearcher), "<search>a\xffb</search>", res{"", false}},
		{"search compact", text(ParsePaperSearcher), "q oslo is", res{"", false}},
		{"answer", text(ParsePaperAnswerer), "<think>\n</think>\n\n<answer>The  Beatles</answer>", res{"the beatles", true}},
		{"answer empty", text(ParsePaperAnswerer), "<answer>  </answer>", res{"", false}},
		{"answer compact", text(ParsePaperAnswerer), "a norway", res{"", false}},
		{"answer other tag", text(ParsePaperAnswerer), "<search>norway</search>", res{"", false}},
		{"answer duplicated", text(ParsePaperAnswerer), "<answer>oslo</answer> no: <answer>Norway</answer>", res{"norway", true}},
		{"solver boxed", text(ParsePaperSolver), `So $x = \boxed{\frac{1}{2}}$.`, res{`\frac{1}{2}`, true}},
		{"solver last box", text(ParsePaperSolver), `\boxed{1} then \boxed{ 2 }`, res{"2", true}},
		{"solver empty box", text(ParsePaperSolver), `\boxed{}`, res{"", false}},
		{"solver blank box", text(ParsePaperSolver), `\boxed{  }`, res{"", false}},
		{"solver open box", text(ParsePaperSolver), `\boxed{19`, res{"", false}},
		{"solver compact", text(ParsePaperSolver), "ans 19", res{"", false}},
	}
	for _, c := range cases {
		if got := c.parse(c.in); got != c.want {
			t.Errorf("%s: %q → %+v, want %+v", c.name, c.in, got, c.want)
		}
	}
}

// TestPaperMathEpisode: scripted responses through a paper-format episode: a right boxed answer
// earns 1 (graded by mathgrade, so an equivalent form counts), a wrong one 0, and a response
// without a box or verdict is invalid and loses the penalty.
func TestPaperMathEpisode(t *testing.T) {
	w := paperWF(t, "math", AgentSolver, AgentVerifier)
	cases := []struct {
		resps  []string
		valid  []bool
		reward float64
	}{
		{[]string{`\boxed{19}`, "<verify>approve</verify>"}, []bool{true, true}, 1},
		{[]string{`The sum is $\boxed{19.0}$`, "fine <verify>Approve</verify>"}, []bool{true, true}, 1},
		{[]string{`\boxed{18}`, "<verify>approve</verify>"}, []bool{true, true}, 0},
		{[]string{`\boxed{18}`, "<verify>reject</verify>", `\boxed{19}`}, []bool{true, true, true}, 1},
		{[]string{"the answer is 19", "<verify>reject</verify>", `\boxed{}`}, []bool{false, true, false}, 0},
		{[]string{`\boxed{19}`, "approve", `\boxed{19}`}, []bool{true, false, true}, 1}, // invalid verdict rejects
		{[]string{"ans 19", "yes", "ans 19"}, []bool{false, false, false}, 0},
	}
	for _, c := range cases {
		ep := w.NewEpisode(task127)
		_, valid := play(t, ep, c.resps...)
		mustDone(t, ep)
		if !reflect.DeepEqual(valid, c.valid) || ep.Reward() != c.reward {
			t.Errorf("%q: valid %v reward %v, want %v %v", c.resps, valid, ep.Reward(), c.valid, c.reward)
		}
		for i, v := range valid {
			score := RowScore(ep.Reward(), v, w.InvalidPenalty())
			if want := c.reward - map[bool]float64{true: 0, false: MathInvalidPenalty}[v]; score != want {
				t.Errorf("%q row %d: score %v, want %v", c.resps, i, score, want)
			}
		}
	}
}

// TestPaperRewardDesigns: the verdict reward and format penalties read paper responses.
func TestPaperRewardDesigns(t *testing.T) {
	w := newWF(t, "math", func(o *Options) {
		o.PaperAgents = []string{AgentSolver, AgentVerifier}
		o.Rewards = Rewards{VerifierReward: VerifierVerdict, FormatPenalty: map[string]float64{AgentVerifier: 0.5}}
	})
	cases := []struct {
		resps []string
		want  []float64
	}{
		{[]string{`\boxed{19}`, "<verify>approve</verify>"}, []float64{1, 1}},
		{[]string{`\boxed{18}`, "<verify>reject</verify>", `\boxed{18}`}, []float64{0, 1, 0}},
		{[]string{`\boxed{18}`, "<verify>approve</verify>"}, []float64{0, 0}},
		{[]string{`\boxed{19}`, "reject", `\boxed{19}`}, []float64{1, -0.5, 1}},
	}
	for _, c := range cases {
		ep := w.NewEpisode(task127)
		play(t, ep, c.resps...)
		mustDone(t, ep)
		if got := ep.(TurnScorer).TurnScores(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: scores %v, want %v", c.resps, got, c.want)
		}
	}
}

func TestPaperSearchEpisode(t *testing.T) {
	s := newWF(t, "search", func(o *Options) { o.PaperAgents = []string{AgentRouter, AgentSearcher, AgentAnswerer} }).(*Search)
	task, p, city := twoHop(s)
	cases := []struct {
		resps  []string
		valid  []bool
		reward float64
	}{
		{[]string{"<verify>no</verify>", "<search>" + p + " lives</search>", "<verify>no</verify>", "<search>" + city + " is</search>", "<verify>yes</verify>", "<answer>" + task.Answer + "</answer>"},
			[]bool{true, true, true, true, true, true}, 1},
		{[]string{"<verify>yes</verify>", "<answer>atlantis</answer>"}, []bool{true, true}, 0},
		// An invalid router response counts as yes; an answer without its tag is invalid.
		{[]string{"more", task.Answer}, []bool{false, false}, 0},
		// An invalid query retrieves nothing and the episode moves on.
		{[]string{"<verify>no</verify>", "q " + p + " lives", "<verify>yes</verify>", "<answer>" + task.Answer + "</answer>"}, []bool{true, false, true, true}, 1},
	}
	for _, c := range cases {
		ep := s.NewEpisode(task)
		_, valid := play(t, ep, c.resps...)
		mustDone(t, ep)
		if !reflect.DeepEqual(valid, c.valid) || ep.Reward() != c.reward {
			t.Errorf("%q: valid %v reward %v, want %v %v", c.resps, valid, ep.Reward(), c.valid, c.reward)
		}
		for i, v := range valid {
			score := RowScore(ep.Reward(), v, s.InvalidPenalty())
			if want := c.reward - map[bool]float64{true: 0, false: SearchInvalidPenalty}[v]; score != want {
				t.Errorf("%q row %d: score %v, want %v", c.resps, i, score, want)
			}
		}
	}
}

// TestPaperMixedFormats: each agent keeps its own format within one episode, and the compact
// agents' prompts are those of an all-compact workflow.
func TestPaperMixedFormats(t *testing.T) {
	// Paper solver, compact verifier: the verifier sees the boxed answer as "ans".
	ep := paperWF(t, "math", AgentSolver).NewEpisode(task127)
	turns, valid := play(t, ep, `I get \boxed{18}.`, "no", `\boxed{19}`)
	mustDone(t, ep)
	if turns[0].Prompt != goldenSolver0 || turns[1].Prompt != "verifier\nQ 12+7\nans 18\n" {
		t.Fatalf("prompts %+v", turns[:2])
	}
	if !strings.Contains(turns[2].Prompt, "Your previous solution:\nI get \\boxed{18}.\n\nThe Verifier Agent's review:\nno\n") {
		t.Fatalf("retry prompt %q", turns[2].Prompt)
	}
	if !reflect.DeepEqual(valid, []bool{true, true, true}) || ep.Reward() != 1 {
		t.Fatalf("valid %v reward %v", valid, ep.Reward())
	}
	// Compact solver, paper verifier: the solver's prompts are byte for byte the compact ones.
	ep = paperWF(t, "math", AgentVerifier).NewEpisode(task127)
	turns, valid = play(t, ep, "ans 18", "<verify>reject</verify>", "ans 19")
	mustDone(t, ep)
	if turns[0].Prompt != "solver\nQ 12+7\n" || turns[2].Prompt != "solver\nQ 12+7\nrejected 18\n" ||
		!strings.Contains(turns[1].Prompt, "The Solver Agent's solution:\nans 18\n") {
		t.Fatalf("prompts %+v", turns)
	}
	if !reflect.DeepEqual(valid, []bool{true, true, true}) || ep.Reward() != 1 {
		t.Fatalf("valid %v reward %v", valid, ep.Reward())
	}
	// Search: a paper searcher between compact router and answerer.
	s := newWF(t, "search", func(o *Options) { o.PaperAgents = []string{AgentSearcher} }).(*Search)
	task, p, city := twoHop(s)
	ep = s.NewEpisode(task)
	turns, valid = play(t, ep, "more", "<search>"+p+" lives</search>", "more", "<search>"+city+" is</search>", "enough", "a "+task.Answer)
	mustDone(t, ep)
	f1, f2 := p+" lives in "+city, city+" is in "+task.Answer
	if turns[5].Prompt != "answerer\nQ "+task.Question+"\nP "+f1+"\nP "+f2+"\n" ||
		!strings.Contains(turns[3].Prompt, "1. "+p+" lives\n\nRetrieved passages:\nDoc 1: "+f1+"\n") {
		t.Fatalf("prompts %+v", turns)
	}
	if ep.Reward() != 1 || countTrue(valid) != 6 {
		t.Fatalf("valid %v reward %v", valid, ep.Reward())
	}
}

func countTrue(v []bool) (n int) {
	for _, b := range v {
		if b {
			n++
		}
	}
	return n
}

// TestPaperDemonstrations: paper-format demonstrations (all agents, and mixed) replay as valid
// actions through a real episode and, without noise, earn reward 1; with noise every action is
// still valid.
func TestPaperDemonstrations(t *testing.T) {
	for _, c := range []struct {
		name   string
		agents []string
	}{
		{"math", []string{AgentSolver, AgentVerifier}},
		{"math", []string{AgentVerifier}},
		{"search", []string{AgentRouter, AgentSearcher, AgentAnswerer}},
		{"search", []string{AgentSearcher}},
	} {
		w := paperWF(t, c.name, c.agents...)
		rng := rand.New(rand.NewPCG(3, 4))
		paperTurns := 0
		for _, task := range w.Tasks(5, Train, 150) {
			if r := replay(t, w, task, w.Demonstrations(task, rng, 0)); r != 1 {
				t.Fatalf("%s %v %+v: reward %v", c.name, c.agents, task, r)
			}
			for _, d := range w.Demonstrations(task, rng, 0.3) {
				if strings.Contains(d.Response, "</") || strings.Contains(d.Response, `\boxed{`) {
					paperTurns++
				}
			}
			replay(t, w, task, w.Demonstrations(task, rng, 0.3))
		}
		if paperTurns == 0 {
			t.Fatalf("%s %v: no paper-format demonstration", c.name, c.agents)
		}
	}
	// A dataset task (non-integer answer) in the paper format.
	w := paperWF(t, "math", AgentSolver, AgentVerifier)
	task := Task{ID: "d", Question: "Simplify 2/4.", Answer: `\frac{1}{2}`}
	demos := w.Demonstrations(task, nil, 0)
	if demos[0].Response != `The final answer is \boxed{\frac{1}{2}}.` || demos[1].Response != "<verify>approve</verify>" {
		t.Fatalf("demos %+v", demos)
	}
	if r := replay(t, w, task, demos); r != 1 {
		t.Fatalf("reward %v", r)
	}
}

// TestPaperCompactUnchanged: a workflow without paper agents and one whose paper agents do not
// act in these turns give the same compact prompts and demonstrations.
func TestPaperCompactUnchanged(t *testing.T) {
	plain, mixed := newWF(t, "math", nil), paperWF(t, "math", AgentVerifier)
	for _, task := range plain.Tasks(9, Train, 50) {
		a, b := plain.Demonstrations(task, rand.New(rand.NewPCG(1, 1)), 0.5), mixed.Demonstrations(task, rand.New(rand.NewPCG(1, 1)), 0.5)
		// The compact verifier also gets a checking demo (mathtasks.go); the paper one does not.
		if len(a) != len(b)+1 || a[len(a)-1].Agent != AgentVerifier {
			t.Fatalf("%+v: %d vs %d demos", task, len(a), len(b))
		}
		for i := range b {
			if a[i].Agent == AgentSolver && a[i] != b[i] {
				t.Fatalf("solver demo %d differs: %+v vs %+v", i, a[i], b[i])
			}
		}
	}
}

func TestPaperAgentsOptions(t *testing.T) {
	for _, c := range []struct {
		name   string
		agents []string
		want   string
	}{
		{"math", []string{"router"}, `paper_agents: workflow math has no agent "router"`},
		{"search", []string{"solver"}, `paper_agents: workflow search has no agent "solver"`},
		{"math", []string{"solver", "solver"}, `paper_agents: "solver" named twice`},
		{"math", []string{""}, "paper_agents: an empty agent name"},
	} {
		o := DefaultOptions()
		o.PaperAgents = c.agents
		if _, err := New(c.name, o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: got %v, want %q", c.name, c.agents, err, c.want)
		}
	}
}

// TestPaperPromptBounds: a long question is cut to PaperQuestionBytes on a rune boundary and a
// long response shows only its last PaperResponseBytes bytes, marked.
func TestPaperPromptBounds(t *testing.T) {
	w := paperWF(t, "math", AgentSolver, AgentVerifier)
	q := strings.Repeat("é", PaperQuestionBytes) // 2 bytes a rune
	ep := w.NewEpisode(Task{Question: q + "\x01", Answer: "1"})
	turn, _ := ep.Next()
	if !strings.Contains(turn.Prompt, "Math problem: "+q[:PaperQuestionBytes]+"\n\n") {
		t.Fatalf("question not cut to %d bytes", PaperQuestionBytes)
	}
	resp := "start " + strings.Repeat("a", PaperResponseBytes) + ` \boxed{1}`
	ep.Act(resp)
	turn, _ = ep.Next()
	if want := "solution:\n" + paperCut + resp[len(resp)-PaperResponseBytes:] + "\n\n"; !strings.Contains(turn.Prompt, want) || strings.Contains(turn.Prompt, "start") {
		t.Fatalf("response not cut to its end")
	}
}
