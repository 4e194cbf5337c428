package workflows

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// scores plays responses through a new episode of w and returns its turn scores.
func scores(t *testing.T, w Workflow, task Task, responses ...string) []float64 {
	t.Helper()
	ep := w.NewEpisode(task)
	play(t, ep, responses...)
	mustDone(t, ep)
	ts, ok := ep.(TurnScorer)
	if !ok {
		t.Fatalf("episode %T with a reward design is no TurnScorer", ep)
	}
	return ts.TurnScores()
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-12 {
			return false
		}
	}
	return true
}

// The episodes below are worked by hand: 12+7 = 19; max_loop 2, so the verifier judges in loop
// 0 only and the solver's loop-1 answer is final.
func TestVerdictReward(t *testing.T) {
	verdict := newWF(t, "math", func(o *Options) { o.VerifierReward = VerifierVerdict })
	half := newWF(t, "math", func(o *Options) { o.VerifierReward = VerifierVerdict; o.VerdictShare = 0.5 })
	cases := []struct {
		name      string
		w         Workflow
		responses []string
		want      []float64
	}{
		{"approves a wrong answer: wrong verdict, failed episode", verdict, []string{"ans 18", "yes"}, []float64{0, 0}},
		{"approves the right answer", verdict, []string{"ans 19", "yes"}, []float64{1, 1}},
		{"rejects a wrong answer, the retry is right", verdict, []string{"ans 18", "no", "ans 19"}, []float64{1, 1, 1}},
		{"rejects a wrong answer, the retry is wrong too: the verifier was still right", verdict, []string{"ans 18", "no", "ans 17"}, []float64{0, 1, 0}},
		{"rejects the right answer, the retry is wrong", verdict, []string{"ans 19", "no", "ans 18"}, []float64{0, 0, 0}},
		{"rejects the right answer, the retry is right: the outcome is 1, the verdict wrong", verdict, []string{"ans 19", "no", "ans 19"}, []float64{1, 0, 1}},
		{"invalid solver answer rejected: right verdict", verdict, []string{"ans x", "no", "ans 17"}, []float64{-0.1, 1, 0}},
		{"an invalid verdict is no verdict, and pays the penalty", verdict, []string{"ans 18", "maybe", "ans 19"}, []float64{1, -0.1, 1}},
		{"share 0.5: (1-0.5)·0 + 0.5·1", half, []string{"ans 18", "no", "ans 17"}, []float64{0, 0.5, 0}},
		{"share 0.5: (1-0.5)·1 + 0.5·0", half, []string{"ans 19", "no", "ans 19"}, []float64{1, 0.5, 1}},
	}
	for _, c := range cases {
		if got := scores(t, c.w, task127, c.responses...); !near(got, c.want) {
			t.Errorf("%s: %v → scores %v, want %v", c.name, c.responses, got, c.want)
		}
	}
}

func TestFormatPenaltyAndStepCost(t *testing.T) {
	pen := newWF(t, "math", func(o *Options) { o.FormatPenalty = map[string]float64{AgentVerifier: 0.5} })
	if got, want := scores(t, pen, task127, "ans 18", "maybe", "ans 19"), []float64{1, 0.5, 1}; !near(got, want) {
		t.Errorf("verifier penalty 0.5: scores %v, want %v", got, want)
	}
	// The solver keeps the workflow's penalty (0.1).
	if got, want := scores(t, pen, task127, "ans x", "no", "ans 19"), []float64{0.9, 1, 1}; !near(got, want) {
		t.Errorf("solver keeps 0.1: scores %v, want %v", got, want)
	}
	both := newWF(t, "math", func(o *Options) {
		o.VerifierReward = VerifierVerdict
		o.FormatPenalty = map[string]float64{AgentVerifier: 0.5}
	})
	if got, want := scores(t, both, task127, "ans 18", "maybe", "ans 19"), []float64{1, -0.5, 1}; !near(got, want) {
		t.Errorf("verdict and penalty: scores %v, want %v", got, want)
	}
	cost := newWF(t, "math", func(o *Options) { o.StepCost = 0.1 })
	if got, want := scores(t, cost, task127, "ans 19", "yes"), []float64{0.9, 0.9}; !near(got, want) {
		t.Errorf("one loop at 0.1: scores %v, want %v", got, want)
	}
	if got, want := scores(t, cost, task127, "ans 18", "no", "ans 19"), []float64{0.8, 0.8, 0.8}; !near(got, want) {
		t.Errorf("two loops at 0.1: scores %v, want %v", got, want)
	}
}

func TestSearchStepCostAndSearcherPenalty(t *testing.T) {
	w := newWF(t, "search", func(o *Options) {
		o.StepCost = 0.05
		o.FormatPenalty = map[string]float64{AgentSearcher: 0.3}
	})
	task := Task{ID: "s", Question: "where does nobody live", Answer: "oslo", DataSource: SourceSearch1Hop}
	// Step 0: router "more", searcher (invalid query); step 1: router "more", searcher; step 2:
	// router "enough", answerer right. Three steps: cost 0.15 on every row.
	got := scores(t, w, task, "more", "nonsense", "more", "q nobody lives", "enough", "a oslo")
	want := []float64{0.85, 0.85 - 0.3, 0.85, 0.85, 0.85, 0.85}
	if !near(got, want) {
		t.Errorf("scores %v, want %v", got, want)
	}
	// The last step has no router: answering there after three searches is four steps.
	got = scores(t, w, task, "more", "q a", "more", "q b", "more", "q c", "a bergen")
	want = []float64{-0.2, -0.2, -0.2, -0.2, -0.2, -0.2, -0.2}
	if !near(got, want) {
		t.Errorf("four steps, wrong answer: scores %v, want %v", got, want)
	}
}

// Without a reward design episodes are not wrapped: rollouts keep their bytes.
func TestNoDesignNoWrapper(t *testing.T) {
	for _, name := range []string{"math", "search"} {
		for _, mod := range []func(*Options){nil, func(o *Options) { o.VerifierReward = VerifierOutcome }} {
			ep := newWF(t, name, mod).NewEpisode(task127)
			if _, ok := ep.(TurnScorer); ok {
				t.Errorf("%s: default rewards wrap the episode (%T)", name, ep)
			}
		}
	}
	// A wrapped episode plays like the one it wraps: same turns, validity and outcome.
	plain, wrapped := newWF(t, "math", nil).NewEpisode(task127), newWF(t, "math", func(o *Options) { o.StepCost = 0.01 }).NewEpisode(task127)
	resp := []string{"ans 18", "no", "ans 19"}
	t1, v1 := play(t, plain, resp...)
	t2, v2 := play(t, wrapped, resp...)
	if !reflect.DeepEqual(t1, t2) || !reflect.DeepEqual(v1, v2) || plain.Reward() != wrapped.Reward() {
		t.Errorf("wrapped episode plays otherwise: %v %v %v vs %v %v %v", t1, v1, plain.Reward(), t2, v2, wrapped.Reward())
	}
}

func TestRewardsProblems(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"math", func(o *Options) { o.VerifierReward = "judge" }, `verifier_reward: "judge", want outcome or verdict`},
		{"math", func(o *Options) { o.VerdictShare = 0.5 }, "verdict_share: 0.5 needs verifier_reward: verdict"},
		{"math", func(o *Options) { o.VerifierReward = VerifierVerdict; o.VerdictShare = 1.5 }, "verdict_share: 1.5, want 0..1"},
		{"math", func(o *Options) { o.StepCost = math.NaN() }, "step_cost: NaN, want 0..1"},
		{"math", func(o *Options) { o.FormatPenalty = map[string]float64{AgentSolver: -1} }, "format_penalty.solver: -1, want 0..10"},
		{"math", func(o *Options) { o.FormatPenalty = map[string]float64{AgentRouter: 1} }, "format_penalty.router: workflow math has no such agent"},
		{"search", func(o *Options) { o.VerifierReward = VerifierVerdict }, "verifier_reward: verdict: workflow search has no verifier"},
	}
	for _, c := range cases {
		o := DefaultOptions()
		c.mod(&o)
		_, err := New(c.name, o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// Search job rewards, worked by hand on a two-hop question (max_steps 4: routes at steps 0-2,
// the answerer is forced at step 3). Router: right when it says "enough" exactly when both
// facts are in view. Searcher: right when its query brings the next fact into view, or keeps
// them all in view.
func TestSearchJobRewards(t *testing.T) {
	both := searchWF(t, func(o *Options) { o.RouterReward = RouterDecision; o.SearcherReward = SearcherRetrieval })
	router := searchWF(t, func(o *Options) { o.RouterReward = RouterDecision })
	task, p, city := twoHop(both)
	other := both.Corpus().People[1]
	lives, is := "q "+p+" lives", "q "+city+" is"
	cases := []struct {
		name      string
		w         Workflow
		responses []string
		want      []float64
	}{
		{"the expert's episode, a wrong answer: every job done, the answerer scores the outcome", both,
			[]string{"more", lives, "more", is, "enough", "a nowhere"}, []float64{1, 1, 1, 1, 1, 0}},
		{"stops with nothing in view, guesses right", both, []string{"enough", "a " + task.Answer}, []float64{0, 1}},
		{"a query for someone else brings nothing needed", both,
			[]string{"more", "q " + other + " works", "enough", "a nowhere"}, []float64{1, 0, 0, 0}},
		{"goes on with both facts in view; the searcher keeps them in view", both,
			[]string{"more", lives, "more", is, "more", is, "a " + task.Answer}, []float64{1, 1, 1, 1, 0, 1, 1}},
		{"the second hop first counts for nothing; the first hop then brings both into view, so going on is wrong", both,
			[]string{"more", is, "more", lives, "more", is, "a " + task.Answer}, []float64{1, 0, 1, 1, 0, 1, 1}},
		{"an invalid routing is no decision and pays the penalty", both, []string{"maybe", "a nowhere"}, []float64{-0.01, 0}},
		{"router only: the searcher keeps the outcome", router,
			[]string{"more", "q " + other + " works", "enough", "a " + task.Answer}, []float64{1, 1, 0, 1}},
	}
	for _, c := range cases {
		if got := scores(t, c.w, task, c.responses...); !near(got, c.want) {
			t.Errorf("%s: %v → scores %v, want %v", c.name, c.responses, got, c.want)
		}
	}
	// A question the expert does not parse keeps the outcome for every row.
	unknown := Task{ID: "u", Question: "who wrote the iliad", Answer: "homer"}
	if got := scores(t, both, unknown, "more", "q iliad", "enough", "a homer"); !near(got, []float64{1, 1, 1, 1}) {
		t.Errorf("unparsed question: scores %v, want the outcome 1 on every row", got)
	}
	// The job rewards ask for the agents they score.
	for _, r := range []Rewards{{RouterReward: RouterDecision}, {SearcherReward: SearcherRetrieval}} {
		opts := DefaultOptions()
		opts.Rewards = r
		if _, err := New("math", opts); err == nil || !strings.Contains(err.Error(), "workflow math has no") {
			t.Errorf("math with %+v: %v", r, err)
		}
	}
	bad := DefaultOptions()
	bad.Rewards.RouterReward, bad.Rewards.SearcherReward = "route", "recall"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `router_reward: "route", want outcome or decision`) ||
		!strings.Contains(err.Error(), `searcher_reward: "recall", want outcome or retrieval`) {
		t.Errorf("bad values: %v", err)
	}
}
