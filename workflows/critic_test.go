package workflows

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func criticWF(t testing.TB, mod func(*Options)) Workflow {
	t.Helper()
	return newWF(t, MathCriticName, mod)
}

// Hand-played episodes of 12+7 = 19 (max_loop 2 unless set): who acts, at which step, with
// which prompt, whether each action is valid, and the reward.
func TestMathCriticEpisodes(t *testing.T) {
	cases := []struct {
		name      string
		maxLoop   int
		responses []string
		agents    string
		steps     []int
		valid     []bool
		prompts   []string // of the turns, when given
		reward    float64
	}{
		{"critic rejects, refiner fixes, verifier approves", 2,
			[]string{"ans 18", "19", "ans 19", "yes"},
			"solver critic refiner verifier", []int{0, 0, 0, 0}, []bool{true, true, true, true},
			[]string{"solver\nQ 12+7\n", "critic\nQ 12+7\nans 18\n", "refiner\nQ 12+7\nans 18\ncrit yn\n", "verifier\nQ 12+7\nans 19\n"}, 1},
		{"critic approves a wrong answer, verifier rejects, second loop fixes it; the last loop has no verifier", 2,
			[]string{"ans 18", "18", "ans 18", "no", "19", "ans 19"},
			"solver critic refiner verifier critic refiner", []int{0, 0, 0, 0, 1, 1}, []bool{true, true, true, true, true, true},
			[]string{"", "", "refiner\nQ 12+7\nans 18\ncrit yes\n", "", "critic\nQ 12+7\nans 18\n", "refiner\nQ 12+7\nans 18\ncrit yn\n"}, 1},
		{"invalid outputs: no answer shows as ?, an invalid critic as crit ?, an invalid verdict rejects", 2,
			[]string{"x", "maybe", "ans 1 2", "perhaps", "no", "ans 17"},
			"solver critic refiner verifier critic refiner", []int{0, 0, 0, 0, 1, 1}, []bool{false, false, false, false, true, true},
			[]string{"", "critic\nQ 12+7\nans ?\n", "refiner\nQ 12+7\nans ?\ncrit ?\n", "verifier\nQ 12+7\nans ?\n", "critic\nQ 12+7\nans ?\n", "refiner\nQ 12+7\nans ?\ncrit no\n"}, 0},
		{"marks are all n when the lengths differ; max_loop 1 has no verifier", 1,
			[]string{"ans 7", "19", "ans 19"},
			"solver critic refiner", []int{0, 0, 0}, []bool{true, true, true},
			[]string{"", "", "refiner\nQ 12+7\nans 7\ncrit nn\n"}, 1},
		{"the loop bound: every verdict rejects, 3·max_loop turns", 3,
			[]string{"ans 18", "18", "ans 18", "no", "17", "ans 17", "no", "yes", "ans 16"},
			"solver critic refiner verifier critic refiner verifier critic refiner", []int{0, 0, 0, 0, 1, 1, 1, 2, 2},
			[]bool{true, true, true, true, true, true, true, true, true},
			[]string{"", "", "", "", "", "refiner\nQ 12+7\nans 18\ncrit yn\n", "", "", "refiner\nQ 12+7\nans 17\ncrit yes\n"}, 0},
	}
	for _, c := range cases {
		w := criticWF(t, func(o *Options) { o.MaxLoop = c.maxLoop })
		ep := w.NewEpisode(task127)
		turns, valid := play(t, ep, c.responses...)
		mustDone(t, ep)
		if got := strings.Join(agentsOf(turns), " "); got != c.agents {
			t.Errorf("%s: agents %s, want %s", c.name, got, c.agents)
		}
		if got := stepsOf(turns); !reflect.DeepEqual(got, c.steps) {
			t.Errorf("%s: steps %v, want %v", c.name, got, c.steps)
		}
		if !reflect.DeepEqual(valid, c.valid) {
			t.Errorf("%s: valid %v, want %v", c.name, valid, c.valid)
		}
		for i, p := range c.prompts {
			if p != "" && turns[i].Prompt != p {
				t.Errorf("%s: turn %d prompt %q, want %q", c.name, i, turns[i].Prompt, p)
			}
		}
		if ep.Reward() != c.reward {
			t.Errorf("%s: reward %v, want %v", c.name, ep.Reward(), c.reward)
		}
		if ep.Act("ans 19") || ep.Reward() != c.reward {
			t.Errorf("%s: Act on a finished episode changed it", c.name)
		}
	}
}

// The critic's and the verifier's verdicts are recorded against the answer each judged.
func TestMathCriticVerdicts(t *testing.T) {
	ep := criticWF(t, nil).NewEpisode(task127)
	play(t, ep, "ans 18", "18", "ans 19", "no", "19", "ans 19")
	ce := ep.(*criticEpisode)
	wantCritic := []Verdict{{CandidateCorrect: false, Approved: true}, {CandidateCorrect: true, Approved: true}}
	wantVerifier := []Verdict{{CandidateCorrect: true, Approved: false}}
	if !reflect.DeepEqual(ce.CriticVerdicts(), wantCritic) {
		t.Errorf("critic verdicts %+v, want %+v", ce.CriticVerdicts(), wantCritic)
	}
	if v, ok := EpisodeVerdicts(ep); !ok || !reflect.DeepEqual(v, wantVerifier) {
		t.Errorf("verifier verdicts %+v, want %+v", v, wantVerifier)
	}
}

// The verifier speaks the format of verifier_check, as in math.
func TestMathCriticVerifierCheck(t *testing.T) {
	for check, approve := range map[string]string{"": "19 yes", VerifierCheckDigits: "19 yy", VerifierCheckRecompute: "19"} {
		ep := criticWF(t, func(o *Options) { o.VerifierCheck = check }).NewEpisode(task127)
		_, valid := play(t, ep, "ans 19", "19", "ans 19", approve)
		mustDone(t, ep)
		if !valid[3] || ep.Reward() != 1 {
			t.Errorf("verifier_check %q: %q valid %v reward %v", check, approve, valid[3], ep.Reward())
		}
	}
}

// Scores per agent, worked by hand on 12+7 = 19 with max_loop 2. Under critic_reward: verdict
// a critic row is 1 for a right verdict (approve 19, reject anything else), 0 for a wrong one,
// −0.1 for an invalid one; the solver, refiner and verifier rows score the outcome (the final
// answer), less 0.1 when invalid.
func TestMathCriticRewards(t *testing.T) {
	critic := criticWF(t, func(o *Options) { o.CriticReward = CriticVerdict })
	both := criticWF(t, func(o *Options) {
		o.CriticReward, o.VerifierReward, o.VerifierCheck = CriticVerdict, VerifierVerdict, VerifierCheckRecompute
	})
	half := criticWF(t, func(o *Options) {
		o.CriticReward, o.VerifierReward, o.VerdictShare = CriticVerdict, VerifierVerdict, 0.5
	})
	cost := criticWF(t, func(o *Options) { o.CriticReward, o.StepCost = CriticVerdict, 0.25 })
	outcome := criticWF(t, func(o *Options) { o.CriticReward = JobOutcome; o.StepCost = 0.25 })
	cases := []struct {
		name      string
		w         Workflow
		responses []string
		want      []float64 // solver, critic, refiner, verifier, …
	}{
		{"critic rejects the wrong answer: right; the refined answer is right", critic,
			[]string{"ans 18", "19", "ans 19", "19 yes"}, []float64{1, 1, 1, 1}},
		{"critic rejects the right answer: wrong; the refiner keeps it", critic,
			[]string{"ans 19", "18", "ans 19", "19 yes"}, []float64{1, 0, 1, 1}},
		{"critic approves the wrong answer: wrong; it stays wrong", critic,
			[]string{"ans 18", "18", "ans 18", "18 yes"}, []float64{0, 0, 0, 0}},
		{"critic rejects a wrong answer; the episode fails anyway: the critic still scores", critic,
			[]string{"ans 18", "19", "ans 17", "17 yes"}, []float64{0, 1, 0, 0}},
		{"an invalid critic is no verdict: the penalty, not the job", critic,
			[]string{"ans 18", "maybe", "ans 19", "19 yes"}, []float64{1, -0.1, 1, 1}},
		{"second loop: the critic judges the refined answer", critic,
			[]string{"ans 18", "18", "ans 18", "18 no", "19", "ans 19"}, []float64{1, 0, 1, 1, 1, 1}},
		{"verifier under verdict too: it rejects the right answer (0), approves none", both,
			[]string{"ans 18", "19", "ans 19", "18", "19", "ans 19"}, []float64{1, 1, 1, 0, 1, 1}},
		{"verifier under verdict too: it rejects a wrong answer (1) in a failed episode", both,
			[]string{"ans 18", "18", "ans 18", "19", "18", "ans 18"}, []float64{0, 0, 0, 1, 0, 0}},
		{"verdict_share 0.5 mixes the verifier's only: (1−0.5)·0 + 0.5·1", half,
			[]string{"ans 18", "18", "ans 18", "no", "18", "ans 18"}, []float64{0, 0, 0, 0.5, 0, 0}},
		{"step cost: two loops cost 0.5 on every row", cost,
			[]string{"ans 18", "19", "ans 19", "no", "19", "ans 19"}, []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}},
		{"critic_reward: outcome scores the critic by the outcome", outcome,
			[]string{"ans 18", "18", "ans 19", "19 yes"}, []float64{0.75, 0.75, 0.75, 0.75}},
	}
	for _, c := range cases {
		if got := scores(t, c.w, task127, c.responses...); !near(got, c.want) {
			t.Errorf("%s: %v → scores %v, want %v", c.name, c.responses, got, c.want)
		}
	}
	// Without a reward design the episode is not wrapped: every row scores RowScore(outcome).
	if _, ok := criticWF(t, nil).NewEpisode(task127).(TurnScorer); ok {
		t.Error("the zero reward design wraps the episode")
	}
}

func TestMathCriticOptions(t *testing.T) {
	bad := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"math", func(o *Options) { o.CriticReward = CriticVerdict }, "critic_reward: verdict: workflow math has no critic"},
		{"search", func(o *Options) { o.CriticReward = CriticVerdict }, "critic_reward: verdict: workflow search has no critic"},
		{MathCriticName, func(o *Options) { o.CriticReward = "judge" }, `critic_reward: "judge", want outcome or verdict`},
		{MathCriticName, func(o *Options) { o.PaperAgents = []string{AgentCritic} }, "paper_agents: workflow math_critic has the compact prompt format only"},
		{MathCriticName, func(o *Options) { o.RouterReward = RouterDecision }, "router_reward: decision: workflow math_critic has no router"},
	}
	for _, c := range bad {
		o := DefaultOptions()
		c.mod(&o)
		if _, err := New(c.name, o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	w := criticWF(t, nil)
	if !reflect.DeepEqual(w.Agents(), []string{"solver", "critic", "refiner", "verifier"}) || w.InvalidPenalty() != MathInvalidPenalty {
		t.Fatalf("agents %v penalty %v", w.Agents(), w.InvalidPenalty())
	}
	// The tasks are math's, so held-out figures compare.
	m := newWF(t, "math", nil)
	for _, s := range []Split{Train, Eval} {
		if !reflect.DeepEqual(w.Tasks(3, s, 50), m.Tasks(3, s, 50)) {
			t.Errorf("%s tasks differ from math's", s)
		}
	}
}

// replayCritic feeds an episode's demos through a fresh episode (every prompt the one the
// episode shows, every response valid) and returns the reward and the demos left over.
func replayCritic(t *testing.T, w Workflow, task Task, demos []Demo) (float64, []Demo) {
	t.Helper()
	ep := w.NewEpisode(task)
	for i, d := range demos {
		turn, ok := ep.Next()
		if !ok {
			return ep.Reward(), demos[i:]
		}
		if turn.Agent != d.Agent || turn.Step != d.Step || turn.Prompt != d.Prompt {
			t.Fatalf("%s: demo %d is %s@%d %q, episode wants %s@%d %q", task.Question, i, d.Agent, d.Step, d.Prompt, turn.Agent, turn.Step, turn.Prompt)
		}
		if !ep.Act(d.Response) {
			t.Fatalf("%s: expert response %q of %s invalid", task.Question, d.Response, d.Agent)
		}
	}
	mustDone(t, ep)
	return ep.Reward(), nil
}

// With noise 0 the experts solve every task; then come the checking demos: the critic rejecting
// a slipped answer, the refiner fixing it, and the verifier rejecting a slipped refined answer.
// Every expert response parses as valid and every demo fits the budgets.
func TestMathCriticDemonstrations(t *testing.T) {
	for _, check := range []string{"", VerifierCheckDigits, VerifierCheckRecompute} {
		w := criticWF(t, func(o *Options) { o.VerifierCheck = check })
		rng := rand.New(rand.NewPCG(1, 2))
		for _, split := range []Split{Train, Eval} {
			for _, task := range w.Tasks(7, split, 300) {
				demos := w.Demonstrations(task, rng, 0)
				for _, d := range demos {
					checkBudgets(t, d)
				}
				r, extra := replayCritic(t, w, task, demos)
				if r != 1 || len(demos)-len(extra) != 4 {
					t.Fatalf("%+v: reward %v after %d demos, want 1 after 4: %+v", task, r, len(demos)-len(extra), demos)
				}
				checkCriticCheckingDemos(t, w, task, extra)
			}
		}
	}
}

func checkCriticCheckingDemos(t *testing.T, w Workflow, task Task, extra []Demo) {
	t.Helper()
	if len(extra) != 4 {
		t.Fatalf("%s: checking demos %+v", task.Question, extra)
	}
	q := "Q " + task.Question + "\n"
	cand, ok := strings.CutPrefix(extra[0].Prompt, "critic\n"+q+"ans ")
	cand = strings.TrimSuffix(cand, "\n")
	if !ok || cand == task.Answer || len(cand) != len(task.Answer) || extra[0].Response != task.Answer {
		t.Fatalf("%s: critic checking demo %+v", task.Question, extra[0])
	}
	wantRefiner := "refiner\n" + q + "ans " + cand + "\ncrit " + digitMarks(task.Answer, cand) + "\n"
	if extra[1].Agent != AgentRefiner || extra[1].Prompt != wantRefiner || extra[1].Response != "ans "+task.Answer {
		t.Fatalf("%s: refiner checking demo %+v, want prompt %q", task.Question, extra[1], wantRefiner)
	}
	if extra[2].Agent != AgentVerifier || extra[2].Prompt != "verifier\n"+q+"ans "+task.Answer+"\n" {
		t.Fatalf("%s: verifier demo %+v", task.Question, extra[2])
	}
	v := extra[3]
	slipped := strings.TrimSuffix(strings.TrimPrefix(v.Prompt, "verifier\n"+q+"ans "), "\n")
	ep := w.NewEpisode(task)
	play(t, ep, "ans "+task.Answer, task.Answer, "ans "+slipped)
	if turn, _ := ep.Next(); v.Agent != AgentVerifier || slipped == task.Answer || turn.Prompt != v.Prompt || !ep.Act(v.Response) {
		t.Fatalf("%s: verifier checking demo %+v", task.Question, v)
	}
	if got := ep.(*criticEpisode).m.verdicts; len(got) != 1 || got[0].Approved {
		t.Fatalf("%s: the expert verifier approved a slipped answer: %+v", task.Question, v)
	}
}

// With noise the demos stay consistent with the episode and mistakes lower the reward
// sometimes; every agent gets demonstrations.
func TestMathCriticNoisyDemonstrations(t *testing.T) {
	w := criticWF(t, func(o *Options) { o.VerifierCheck = VerifierCheckRecompute })
	rng := rand.New(rand.NewPCG(3, 4))
	total, n := 0.0, 0
	agents := map[string]int{}
	for _, task := range w.Tasks(11, Train, 300) {
		demos := w.Demonstrations(task, rng, 0.3)
		for _, d := range demos {
			checkBudgets(t, d)
			agents[d.Agent]++
		}
		r, _ := replayCritic(t, w, task, demos)
		total += r
		n++
	}
	if mean := total / float64(n); mean <= 0.4 || mean >= 0.98 {
		t.Fatalf("mean reward with noise 0.3 = %v", mean)
	}
	for _, a := range w.Agents() {
		if agents[a] < 300 {
			t.Errorf("agent %s: %d demos from 300 tasks", a, agents[a])
		}
	}
}

// A task whose answer is no digit string: the critic gives a bare verdict, and there are no
// checking demos.
func TestMathCriticDatasetTask(t *testing.T) {
	w := criticWF(t, nil)
	task := Task{ID: "d", Question: "What is 1/2 + 1/4?", Answer: `\frac{3}{4}`}
	demos := w.Demonstrations(task, rand.New(rand.NewPCG(1, 1)), 0)
	var got []string
	for _, d := range demos {
		got = append(got, d.Agent+":"+d.Response)
	}
	want := `solver:\boxed{\frac{3}{4}} critic:yes refiner:\boxed{\frac{3}{4}} verifier:yes`
	if strings.Join(got, " ") != want {
		t.Fatalf("demos %s, want %s", strings.Join(got, " "), want)
	}
	if r, extra := replayCritic(t, w, task, demos); r != 1 || extra != nil {
		t.Fatalf("reward %v, extra %v", r, extra)
	}
}

// Random and adversarial responses never push a prompt over the budget, also with a question
// longer than the cut, and no episode outlives its bound.
func TestMathCriticPromptBudget(t *testing.T) {
	junk := []string{"", "ans 19", "ans -999999999", "yes", "no", "123456789", "x", strings.Repeat("é", 300),
		`\boxed{` + strings.Repeat("9", 300) + "}", "ans 1 2"}
	w := criticWF(t, func(o *Options) { o.MaxLoop = 8 })
	rng := rand.New(rand.NewPCG(5, 6))
	tasks := append(w.Tasks(1, Train, 100), Task{ID: "long", Question: strings.Repeat("what is 9+9 ", 30), Answer: "18"})
	for _, task := range tasks {
		ep := w.NewEpisode(task)
		for i := 0; ; i++ {
			turn, ok := ep.Next()
			if !ok {
				break
			}
			if i >= 3*8 {
				t.Fatalf("episode longer than 3·max_loop turns")
			}
			if len(turn.Prompt) > PromptBudget {
				t.Fatalf("prompt %d bytes: %q", len(turn.Prompt), turn.Prompt)
			}
			ep.Act(junk[rng.IntN(len(junk))])
		}
	}
	if got := ShownQuestion(MathCriticName, strings.Repeat("x", 300)); len(got) != maxCriticQuestion {
		t.Errorf("shown question %d bytes, want %d", len(got), maxCriticQuestion)
	}
}
