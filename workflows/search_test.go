package workflows

import (
	"reflect"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/workflows/retriever"
)

func searchWF(t testing.TB, mod func(*Options)) *Search {
	t.Helper()
	return newWF(t, "search", mod).(*Search)
}

// twoHop returns a 2-hop task over the corpus and its person's city.
func twoHop(s *Search) (Task, string, string) {
	p := s.Corpus().People[0]
	city := s.Corpus().LivesIn[p]
	return Task{ID: "t", Question: "which country does " + p + " live in", Answer: s.Corpus().CountryOf[city], DataSource: SourceSearch2Hop}, p, city
}

func TestSearchEnoughAtStep0GoesToAnswerer(t *testing.T) {
	s := searchWF(t, nil)
	task, _, _ := twoHop(s)
	ep := s.NewEpisode(task)
	turns, valid := play(t, ep, "enough", "a "+task.Answer)
	mustDone(t, ep)
	if !reflect.DeepEqual(agentsOf(turns), []string{"router", "answerer"}) || !reflect.DeepEqual(stepsOf(turns), []int{0, 0}) {
		t.Fatalf("turns %+v", turns)
	}
	if turns[0].Prompt != "router\nQ "+task.Question+"\n" || turns[1].Prompt != "answerer\nQ "+task.Question+"\n" {
		t.Fatalf("prompts %+v", turns)
	}
	if !valid[0] || !valid[1] || ep.Reward() != 1 {
		t.Fatalf("valid %v reward %v", valid, ep.Reward())
	}
}

func TestSearchMoreSearchesThenRouterAgain(t *testing.T) {
	s := searchWF(t, nil)
	task, p, city := twoHop(s)
	ep := s.NewEpisode(task)
	turns, valid := play(t, ep, "more", "q "+p+" lives", "more", "q "+city+" is", "enough", "a "+strings.ToUpper(task.Answer))
	mustDone(t, ep)
	wantAgents := []string{"router", "searcher", "router", "searcher", "router", "answerer"}
	if !reflect.DeepEqual(agentsOf(turns), wantAgents) || !reflect.DeepEqual(stepsOf(turns), []int{0, 0, 1, 1, 2, 2}) {
		t.Fatalf("agents %v steps %v", agentsOf(turns), stepsOf(turns))
	}
	f1 := p + " lives in " + city
	f2 := city + " is in " + task.Answer
	if turns[2].Prompt != "router\nQ "+task.Question+"\nP "+f1+"\n" {
		t.Fatalf("router prompt after search: %q", turns[2].Prompt)
	}
	if turns[5].Prompt != "answerer\nQ "+task.Question+"\nP "+f1+"\nP "+f2+"\n" {
		t.Fatalf("answerer prompt: %q", turns[5].Prompt)
	}
	for i, v := range valid {
		if !v {
			t.Fatalf("turn %d invalid", i)
		}
	}
	if ep.Reward() != 1 {
		t.Fatal("normalized exact match not rewarded")
	}
}

func TestSearchMaxStepsForcesAnswerer(t *testing.T) {
	for _, maxSteps := range []int{1, 2, 4, 6} {
		s := searchWF(t, func(o *Options) { o.MaxSteps = maxSteps })
		task, p, _ := twoHop(s)
		ep := s.NewEpisode(task)
		var resps []string
		for i := 0; i < maxSteps-1; i++ {
			resps = append(resps, "more", "q "+p+" works")
		}
		resps = append(resps, "a nowhere")
		turns, _ := play(t, ep, resps...)
		mustDone(t, ep)
		last := turns[len(turns)-1]
		if last.Agent != AgentAnswerer || last.Step != maxSteps-1 {
			t.Fatalf("max_steps %d: last %s@%d", maxSteps, last.Agent, last.Step)
		}
		for _, tu := range turns {
			if tu.Agent == AgentRouter && tu.Step == maxSteps-1 {
				t.Fatal("router acted in the last step")
			}
		}
		// The repeated query added its fact once.
		if maxSteps > 2 && strings.Count(last.Prompt, "\nP ") != 1 {
			t.Fatalf("dedup failed: %q", last.Prompt)
		}
		if ep.Reward() != 0 {
			t.Fatal("wrong answer rewarded")
		}
	}
}

func TestSearchInvalidFallbacks(t *testing.T) {
	s := searchWF(t, nil)
	task, p, _ := twoHop(s)
	// Invalid router → enough (answerer next, same step).
	ep := s.NewEpisode(task)
	turns, valid := play(t, ep, "Maybe", "a "+task.Answer)
	mustDone(t, ep)
	if turns[1].Agent != AgentAnswerer || turns[1].Step != 0 || valid[0] || !valid[1] || ep.Reward() != 1 {
		t.Fatalf("turns %+v valid %v", turns, valid)
	}
	// Invalid query → nothing retrieved, next step.
	ep = s.NewEpisode(task)
	turns, valid = play(t, ep, "more", "search "+p, "more", "q zzzz qqqq", "more")
	if valid[1] || !valid[3] || turns[2].Step != 1 || strings.Contains(turns[2].Prompt, "\nP ") || strings.Contains(turns[4].Prompt, "\nP ") {
		t.Fatalf("turns %+v valid %v", turns, valid)
	}
	// Invalid answer → reward 0; penalty is 0.01.
	ep = s.NewEpisode(task)
	_, valid = play(t, ep, "enough", task.Answer)
	if valid[1] || ep.Reward() != 0 || s.InvalidPenalty() != 0.01 {
		t.Fatal("invalid answer handling")
	}
}

func TestSearchContextCapAndTopK(t *testing.T) {
	s := searchWF(t, func(o *Options) { o.MaxSteps = 8; o.TopK = 2 })
	task, _, _ := twoHop(s)
	ep := s.NewEpisode(task)
	c := s.Corpus()
	var resps []string
	for i := 1; i <= 7; i++ {
		resps = append(resps, "more", "q "+c.People[i]+" lives")
	}
	turns, _ := play(t, ep, resps...)
	turn, _ := ep.Next()
	if turn.Agent != AgentAnswerer || turn.Step != 7 {
		t.Fatalf("turn %+v", turn)
	}
	if n := strings.Count(turn.Prompt, "\nP "); n != SearchContextPassages {
		t.Fatalf("%d passages shown", n)
	}
	// top_k 2: the first search adds two passages.
	if n := strings.Count(turns[2].Prompt, "\nP "); n != 2 {
		t.Fatalf("top_k=2 added %d passages", n)
	}
	// The newest passage is last.
	if !strings.HasSuffix(turn.Prompt, "\n") || !strings.Contains(turn.Prompt, c.People[7]+" lives in") {
		t.Fatalf("newest passage missing: %q", turn.Prompt)
	}
	if len(turn.Prompt) > PromptBudget {
		t.Fatalf("prompt %d bytes", len(turn.Prompt))
	}
}

func TestSearchExpertQueriesRankFirst(t *testing.T) {
	checkExpertQueriesRankFirst(t, searchWF(t, nil))
}

// Every corpus size that Options.Validate accepts keeps the promise that the
// expert query's fact ranks first (with 10..12 people "is" got a negative
// IDF and "q <city> is" retrieved a resident's "lives in <city>" instead).
func TestSearchSmallCorporaExpertQueriesRankFirst(t *testing.T) {
	accepted := 0
	for people := 1; people <= 40; people++ {
		o := DefaultOptions()
		o.CorpusPeople = people
		w, err := New("search", o)
		if err != nil {
			continue
		}
		accepted++
		checkExpertQueriesRankFirst(t, w.(*Search))
	}
	if accepted == 0 {
		t.Fatal("no small corpus accepted")
	}
}

func checkExpertQueriesRankFirst(t *testing.T, s *Search) {
	t.Helper()
	c := s.Corpus()
	ix := s.Index()
	for _, p := range c.People {
		for _, rel := range []string{retriever.RelLives, retriever.RelWorks} {
			hits := ix.Search(p+" "+rel, 2)
			if hits[0].Doc != c.FactID[p+" "+rel] || !(hits[0].Score > hits[1].Score) {
				t.Fatalf("%d people: query %q: top %q", len(c.People), p+" "+rel, ix.Doc(hits[0].Doc))
			}
		}
	}
	for _, city := range c.Cities {
		hits := ix.Search(city+" is", 2)
		if hits[0].Doc != c.FactID[city+" is"] || !(hits[0].Score > hits[1].Score) {
			t.Fatalf("%d people: query %q: top %q", len(c.People), city+" is", ix.Doc(hits[0].Doc))
		}
	}
}

// For a question it does not recognise the expert searches once (it searched
// until max_steps when the query retrieved nothing), with a legal query
// within ResponseBudget (a long question gave a query over the budget).
func TestSearchDemonstrationsUnknownQuestionSearchOnce(t *testing.T) {
	for _, maxSteps := range []int{2, 4, 8} {
		s := searchWF(t, func(o *Options) { o.MaxSteps = maxSteps })
		for _, q := range []string{"who wrote hamlet", "which playwright composed the tragedy of hamlet prince of denmark", "¿qué?"} {
			task := Task{ID: "x", Question: q, Answer: "Shakespeare"}
			demos := s.Demonstrations(task, nil, 0)
			var got []string
			for _, d := range demos {
				got = append(got, d.Agent)
				if len(d.Response) > ResponseBudget {
					t.Errorf("%q: response %q over ResponseBudget", q, d.Response)
				}
			}
			want := []string{"router", "searcher", "router", "answerer"}
			if maxSteps == 2 { // step 1 is the last: no router
				want = []string{"router", "searcher", "answerer"}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("max_steps %d, %q: agents %v, want %v", maxSteps, q, got, want)
			}
			if r := replay(t, s, task, demos); r != 1 {
				t.Errorf("%q: reward %v", q, r)
			}
		}
	}
}
