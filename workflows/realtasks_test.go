package workflows

import (
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/workflows/retriever"
)

func TestMathBoxedAnswers(t *testing.T) {
	m := newWF(t, "math", nil)
	half := Task{ID: "h", Question: "What is 1/2 as a decimal?", Answer: `\frac{1}{2}`}
	for _, c := range []struct {
		task    Task
		answers []string // solver, verifier, solver
		reward  float64
		valid   []bool
	}{
		{half, []string{`so it is \boxed{0.5}.`, "yes"}, 1, []bool{true, true}},
		{half, []string{`\boxed{2/4}`, "yes"}, 0, []bool{true, true}},
		{half, []string{`no box`, "no", `\boxed{\dfrac12}`}, 1, []bool{false, true, true}},
		{Task{ID: "a", Question: "AIME", Answer: "42"}, []string{`\boxed{42}`, "yes"}, 1, []bool{true, true}},
		{Task{ID: "a", Question: "AIME", Answer: "42"}, []string{"ans 42", "yes"}, 1, []bool{true, true}},
		{Task{ID: "a", Question: "AIME", Answer: "42"}, []string{`\boxed{41}`, "yes"}, 0, []bool{true, true}},
		{Task{ID: "l", Question: "roots", Answer: `["10", "$x^{4}$"]`}, []string{`\boxed{x^4}`, "yes"}, 1, []bool{true, true}},
	} {
		ep := m.NewEpisode(c.task)
		turns, valid := play(t, ep, c.answers...)
		mustDone(t, ep)
		if ep.Reward() != c.reward || strings.Join(agentsOf(turns), ",") == "" {
			t.Errorf("%q on %q: reward %v, want %v", c.answers, c.task.Answer, ep.Reward(), c.reward)
		}
		for i := range valid {
			if valid[i] != c.valid[i] {
				t.Errorf("%q: valid %v, want %v", c.answers, valid, c.valid)
			}
		}
		if len(turns) > 1 && !strings.HasPrefix(c.answers[0], "ans") && c.valid[0] {
			if b, _, _ := strings.Cut(strings.SplitN(c.answers[0], `\boxed{`, 2)[1], "}"); !strings.Contains(turns[1].Prompt, "\nans "+b) {
				t.Errorf("verifier prompt %q does not show the boxed answer %q", turns[1].Prompt, b)
			}
		}
	}
	// The shown boxed answer is cut so that prompts stay within the budget.
	long := Task{ID: "x", Question: strings.Repeat("q", 200), Answer: "1"}
	ep := m.NewEpisode(long)
	turns, _ := play(t, ep, `\boxed{`+strings.Repeat("9", 500)+"}", "no")
	next, _ := ep.Next()
	for _, p := range []string{turns[1].Prompt, next.Prompt} {
		if len(p) > PromptBudget {
			t.Fatalf("prompt of %d bytes: %q", len(p), p)
		}
	}
	// A mistaken expert boxes a wrong answer, and its verifier approves it only by mistake.
	wrong := m.NewEpisode(half)
	wrong.Next()
	if wrong.Act(`\boxed{\frac{1}{2}+1}`); wrong.(*mathEpisode).correct() {
		t.Fatal("the expert's mistake grades correct")
	}
	// The expert boxes a non-integer answer, and the episode accepts it.
	for _, d := range []Task{half, {ID: "l", Question: "roots", Answer: `["10", "x^4"]`}} {
		demos := m.Demonstrations(d, rand.New(rand.NewPCG(1, 2)), 0)
		if len(demos) != 2 || demos[0].Response != `\boxed{`+GoldenAnswers(d.Answer)[0]+"}" || demos[1].Response != "yes" {
			t.Fatalf("demos %+v", demos)
		}
	}
}

// TestSearchAgainstRetrievalServer is a smoke run of the search workflow against a retrieval
// server on 127.0.0.1 (real HTTP): passages arrive as "Doc i:" lines and answers are graded
// against a list of golden answers.
func TestSearchAgainstRetrievalServer(t *testing.T) {
	srv := httptest.NewServer(retriever.NewServer([]retriever.Document{
		{ID: "1", Contents: "Ada Lovelace\nAda Lovelace wrote the first program."},
		{ID: "2", Contents: "Oslo\nOslo is the capital of Norway."},
		{ID: "3", Contents: "Lima\nLima is the capital of Peru."},
	}))
	defer srv.Close()
	s := newWF(t, "search", func(o *Options) { o.Retriever = RetrieverOptions{URL: srv.URL + "/retrieve", PassageBytes: 64} })
	task := Task{ID: "q1", Question: "who wrote the first program", Answer: `["Ada Lovelace", "Lovelace"]`}
	ep := s.NewEpisode(task)
	turns, valid := play(t, ep, "more", "q first program", "enough", "a the lovelace")
	mustDone(t, ep)
	if f1 := ep.(F1Scorer).F1(); f1 != 1 {
		t.Fatalf("F1 %v, want 1 (\"lovelace\" is the golden \"Lovelace\")", f1)
	}
	if ep.Reward() != 1 || strings.Join(agentsOf(turns), ",") != "router,searcher,router,answerer" {
		t.Fatalf("reward %v, turns %v, valid %v", ep.Reward(), agentsOf(turns), valid)
	}
	want := "answerer\nQ who wrote the first program\nDoc 1: Ada Lovelace\nAda Lovelace wrote the first program.\n"
	if turns[3].Prompt != want {
		t.Fatalf("answerer prompt %q, want %q", turns[3].Prompt, want)
	}
	ep = s.NewEpisode(task)
	if _, valid := play(t, ep, "enough", "I think <answer>Ada Lovelace.</answer>"); !valid[1] || ep.Reward() != 1 {
		t.Fatalf("a tagged answer: valid %v reward %v", valid, ep.Reward())
	}
	ep = s.NewEpisode(task)
	if ep.(F1Scorer).F1() != 0 {
		t.Fatal("F1 before the answer")
	}
	play(t, ep, "more", "q capital", "more", "q capital", "enough", "a ada byron")
	mustDone(t, ep)
	if ep.Reward() != 0 || ep.(F1Scorer).F1() != 0.5 { // "ada byron" vs "ada lovelace": 2·1/(2+2)
		t.Fatalf("a wrong answer: reward %v F1 %v", ep.Reward(), ep.(F1Scorer).F1())
	}
	// The expert searches once with the question's words and answers the first golden answer.
	demos := s.Demonstrations(task, nil, 0)
	replay := s.NewEpisode(task)
	for _, d := range demos {
		replay.Next()
		replay.Act(d.Response)
	}
	if replay.Reward() != 1 || !strings.Contains(demos[len(demos)-1].Prompt, "Doc 1: Ada Lovelace") {
		t.Fatalf("expert demos %+v reward %v", demos, replay.Reward())
	}
	// A server that is down: the agents see the failure, and the episode goes on.
	srv.Close()
	down := newWF(t, "search", func(o *Options) {
		o.Retriever = RetrieverOptions{URL: srv.URL + "/retrieve", Retries: -1, PassageBytes: 64}
	})
	ep = down.NewEpisode(task)
	turns, _ = play(t, ep, "more", "q first program", "enough")
	if !strings.Contains(turns[2].Prompt, "Doc 1: search failed: retriever http://127.0.0.1") {
		t.Fatalf("router prompt %q", turns[2].Prompt)
	}
	if _, err := New("search", func() Options { o := DefaultOptions(); o.Retriever.URL = "127.0.0.1:8000"; return o }()); err == nil || !strings.Contains(err.Error(), "retriever_url") {
		t.Fatalf("a URL without a scheme: %v", err)
	}
}

func TestGoldenAnswers(t *testing.T) {
	for in, want := range map[string]string{`["a", "b"]`: "a|b", "Paris": "Paris", `[1, 2]`: "[1, 2]", `[]`: "[]", ` ["x"] `: "x"} {
		if got := strings.Join(GoldenAnswers(in), "|"); got != want {
			t.Errorf("GoldenAnswers(%q) = %q, want %q", in, got, want)
		}
	}
}
