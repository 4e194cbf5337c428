package workflows

import (
	"testing"
)

// FuzzMathCriticEpisodes drives math_critic episodes with arbitrary responses: no panic, the
// episode ends within 3·max_loop turns, prompts stay within PromptBudget, the turn order is the
// workflow's, the reward is 0 or 1, and under the verdict rewards every row's score is one the
// design can give.
func FuzzMathCriticEpisodes(f *testing.F) {
	plain := criticWF(f, func(o *Options) { o.MaxLoop = 3 })
	scored := criticWF(f, func(o *Options) {
		o.MaxLoop, o.CriticReward, o.VerifierReward, o.VerifierCheck = 3, CriticVerdict, VerifierVerdict, VerifierCheckRecompute
	})
	tasks := plain.Tasks(1, Train, 50)
	f.Fuzz(func(t *testing.T, pick uint8, r1, r2, r3, r4 string) {
		w := plain
		if pick&1 == 1 {
			w = scored
		}
		ep := w.NewEpisode(tasks[int(pick)%len(tasks)])
		resps := []string{r1, r2, r3, r4}
		order := map[string]string{"": AgentSolver, AgentSolver: AgentCritic, AgentCritic: AgentRefiner, AgentRefiner: AgentVerifier, AgentVerifier: AgentCritic}
		prev := ""
		for i := 0; ; i++ {
			turn, ok := ep.Next()
			if !ok {
				break
			}
			if i >= 9 {
				t.Fatal("episode longer than 3·max_loop turns")
			}
			if len(turn.Prompt) > PromptBudget {
				t.Fatalf("prompt %d bytes: %q", len(turn.Prompt), turn.Prompt)
			}
			if turn.Agent != order[prev] {
				t.Fatalf("%s after %s", turn.Agent, prev)
			}
			prev = turn.Agent
			ep.Act(resps[i%len(resps)])
		}
		if r := ep.Reward(); r != 0 && r != 1 {
			t.Fatalf("reward %v", r)
		}
		if ts, ok := ep.(TurnScorer); ok {
			for _, s := range ts.TurnScores() {
				if s != 0 && s != 1 && s != -MathInvalidPenalty && s != 1-MathInvalidPenalty {
					t.Fatalf("score %v", s)
				}
			}
		}
	})
}
