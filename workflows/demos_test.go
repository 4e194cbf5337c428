package workflows

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// replay feeds demos through a fresh episode, checking every prompt matches.
func replay(t *testing.T, w Workflow, task Task, demos []Demo) float64 {
	t.Helper()
	ep := w.NewEpisode(task)
	for i, d := range demos {
		turn, ok := ep.Next()
		if !ok {
			checkCheckingDemos(t, w, task, demos[i:])
			break
		}
		if turn.Agent != d.Agent || turn.Step != d.Step || turn.Prompt != d.Prompt {
			t.Fatalf("%s %s: demo %d is %s@%d %q, episode wants %s@%d %q", w.Name(), task.Question, i, d.Agent, d.Step, d.Prompt, turn.Agent, turn.Step, turn.Prompt)
		}
		if !ep.Act(d.Response) {
			t.Fatalf("%s: expert response %q invalid", w.Name(), d.Response)
		}
	}
	mustDone(t, ep)
	return ep.Reward()
}

// checkCheckingDemos checks the demos after the episode's: only math has them, one verifier
// turn judging a wrong candidate, which it shows in its prompt and its work differs from.
func checkCheckingDemos(t *testing.T, w Workflow, task Task, extra []Demo) {
	t.Helper()
	if w.Name() != "math" || len(extra) != 1 || extra[0].Agent != AgentVerifier || extra[0].Step != 0 {
		t.Fatalf("%s %s: demos after the episode: %+v", w.Name(), task.Question, extra)
	}
	d := extra[0]
	cand, ok := strings.CutPrefix(d.Prompt, "verifier\nQ "+task.Question+"\nans ")
	cand, _ = strings.CutSuffix(cand, "\n")
	work, verdict, _ := strings.Cut(d.Response, " ")
	if approve, valid := ParseVerifier(d.Response); !ok || !valid || cand == task.Answer || approve != (work == cand) || verdict == "" {
		t.Fatalf("%s: checking demo %+v (candidate %q)", task.Question, d, cand)
	}
}

func checkBudgets(t *testing.T, d Demo) {
	t.Helper()
	if len(d.Prompt) > PromptBudget || len(d.Response) > ResponseBudget {
		t.Fatalf("over budget: prompt %d bytes %q, response %d bytes %q", len(d.Prompt), d.Prompt, len(d.Response), d.Response)
	}
}

func TestDemonstrationsReachRewardOne(t *testing.T) {
	for _, name := range []string{"math", "search"} {
		w := newWF(t, name, nil)
		rng := rand.New(rand.NewPCG(1, 2))
		for _, split := range []Split{Train, Eval} {
			sources := map[string]int{}
			agents := map[string]int{}
			for _, task := range w.Tasks(7, split, 400) {
				demos := w.Demonstrations(task, rng, 0)
				for _, d := range demos {
					checkBudgets(t, d)
					agents[d.Agent]++
				}
				if r := replay(t, w, task, demos); r != 1 {
					t.Fatalf("%s %+v: reward %v with noise 0: %+v", name, task, r, demos)
				}
				sources[task.DataSource]++
			}
			if len(sources) != 2 {
				t.Fatalf("%s %s: data sources %v", name, split, sources)
			}
			t.Logf("%s %s: sources %v agents %v", name, split, sources, agents)
		}
	}
}

func TestDemonstrationsSearchShapes(t *testing.T) {
	s := searchWF(t, nil)
	task, p, city := twoHop(s)
	demos := s.Demonstrations(task, rand.New(rand.NewPCG(1, 1)), 0)
	var got []string
	for _, d := range demos {
		got = append(got, d.Agent+":"+d.Response)
	}
	want := "router:more searcher:q " + p + " lives router:more searcher:q " + city + " is router:enough answerer:a " + task.Answer
	if strings.Join(got, " ") != want {
		t.Fatalf("2-hop demo\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// With noise the demos stay consistent with the episode (every prompt is
// the one the episode shows), and mistakes lower the reward sometimes.
func TestDemonstrationsNoisyConsistent(t *testing.T) {
	for _, name := range []string{"math", "search"} {
		w := newWF(t, name, nil)
		rng := rand.New(rand.NewPCG(3, 4))
		total, n := 0.0, 0
		for _, task := range w.Tasks(11, Train, 300) {
			demos := w.Demonstrations(task, rng, 0.3)
			for _, d := range demos {
				checkBudgets(t, d)
			}
			total += replay(t, w, task, demos)
			n++
		}
		mean := total / float64(n)
		if mean <= 0.2 || mean >= 0.98 {
			t.Fatalf("%s: mean reward with noise 0.3 = %v", name, mean)
		}
		t.Logf("%s: mean reward with noise 0.3 = %.3f", name, mean)
	}
}

// Random and adversarial responses never push a prompt over the budget.
func TestPromptBudgetUnderRandomPolicies(t *testing.T) {
	junk := []string{"", "ans 19", "ans -999999999", "yes", "no", "enough", "more", "q x", "a y", strings.Repeat("é", 300), "ans 1 2"}
	for _, name := range []string{"math", "search"} {
		for _, mod := range []func(*Options){nil, func(o *Options) { o.MaxLoop, o.MaxSteps, o.TopK = 8, 8, 2 }} {
			w := newWF(t, name, mod)
			rng := rand.New(rand.NewPCG(5, 6))
			var people []string
			if s, ok := w.(*Search); ok {
				people = s.Corpus().People
			}
			tasks := w.Tasks(1, Train, 200)
			tasks = append(tasks, Task{ID: "long", Question: strings.Repeat("which country does ", 20), Answer: "x"})
			for _, task := range tasks {
				ep := w.NewEpisode(task)
				for {
					turn, ok := ep.Next()
					if !ok {
						break
					}
					if len(turn.Prompt) > PromptBudget {
						t.Fatalf("%s: prompt %d bytes: %q", name, len(turn.Prompt), turn.Prompt)
					}
					r := junk[rng.IntN(len(junk))]
					if people != nil && rng.IntN(2) == 0 {
						if rng.IntN(2) == 0 {
							r = "more"
						} else {
							r = "q " + people[rng.IntN(len(people))] + " lives"
						}
					}
					ep.Act(r)
				}
			}
		}
	}
}

// One Workflow shared by goroutines (run under -race).
func TestWorkflowConcurrentUse(t *testing.T) {
	for _, name := range []string{"math", "search"} {
		w := newWF(t, name, nil)
		done := make(chan float64)
		for g := 0; g < 4; g++ {
			go func(g int) {
				rng := rand.New(rand.NewPCG(uint64(g), 0))
				sum := 0.0
				for _, task := range w.Tasks(uint64(g), Train, 50) {
					ep := w.NewEpisode(task)
					for _, d := range w.Demonstrations(task, rng, 0) {
						ep.Next()
						ep.Act(d.Response)
					}
					sum += ep.Reward()
				}
				done <- sum
			}(g)
		}
		for g := 0; g < 4; g++ {
			if s := <-done; s != 50 {
				t.Errorf("%s: goroutine reward sum %v", name, s)
			}
		}
	}
}
