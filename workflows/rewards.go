package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/drmas-dev/drmas/internal/excerpt"
)

// Verifier reward designs (Rewards.VerifierReward).
const (
	// VerifierOutcome scores the verifier's rows by the episode outcome, like every other row.
	VerifierOutcome = "outcome"
	// VerifierVerdict scores them by whether the verdict was right: approve a correct answer,
	// reject a wrong one.
	VerifierVerdict = "verdict"
)

// Router and searcher reward designs (Rewards.RouterReward, Rewards.SearcherReward).
const (
	// RouterDecision scores a router row by whether its decision was the expert's: "enough"
	// exactly when the visible passages answer the question.
	RouterDecision = "decision"
	// SearcherRetrieval scores a searcher row by whether its query brought a missing fact the
	// question needs into view (or kept them all in view when none was missing).
	SearcherRetrieval = "retrieval"
	// JobOutcome is the outcome reward for the router's and the searcher's rows, as unset.
	JobOutcome = "outcome"
	// CriticVerdict (math_critic) scores a critic row by whether its verdict was right.
	CriticVerdict = "verdict"
)

// Rewards are per-agent reward designs that give agents different score distributions by
// construction, where a global baseline then deviates from an agent's own (the case Dr. MAS's
// Lemma 4.2 is about). The zero value is the outcome reward for every row: episodes are then
// not wrapped, and rollouts are the same bytes as without these settings. JSON names match the
// config keys.
type Rewards struct {
	// VerifierReward (math) is "" or "outcome" (the episode outcome) or "verdict".
	VerifierReward string `json:"verifier_reward,omitempty"`
	// VerdictShare (math, with verdict) mixes the two: a verifier row scores
	// (1 − share)·outcome + share·[verdict right]. 0 (unset) with verdict means 1.
	VerdictShare float64 `json:"verdict_share,omitempty"`
	// RouterReward (search) is "" or "outcome" or "decision". On a question the expert does not
	// parse (dataset tasks) the router's rows keep the outcome.
	RouterReward string `json:"router_reward,omitempty"`
	// SearcherReward (search) is "" or "outcome" or "retrieval", with the same fallback.
	SearcherReward string `json:"searcher_reward,omitempty"`
	// CriticReward (math_critic) is "" or "outcome" or "verdict": a critic row scores 1 when it
	// approved a correct answer or rejected a wrong one, else 0 (no mixing with the outcome).
	CriticReward string `json:"critic_reward,omitempty"`
	// FormatPenalty replaces the workflow's invalid-action penalty for the named agents.
	FormatPenalty map[string]float64 `json:"format_penalty,omitempty"`
	// StepCost is subtracted from every row's score once per environment step the episode took
	// (math: loops; search: router steps), so long episodes score lower.
	StepCost float64 `json:"step_cost,omitempty"`
}

// IsZero reports whether r is the outcome reward for every row.
func (r Rewards) IsZero() bool {
	return (r.VerifierReward == "" || r.VerifierReward == VerifierOutcome) && r.VerdictShare == 0 &&
		len(r.FormatPenalty) == 0 && r.StepCost == 0 && !r.routerJob() && !r.searcherJob() && !r.criticJob()
}

// share is the verdict's weight in a verifier row's score.
func (r Rewards) share() float64 {
	if r.VerifierReward != VerifierVerdict {
		return 0
	}
	if r.VerdictShare == 0 {
		return 1
	}
	return r.VerdictShare
}

func (r Rewards) routerJob() bool   { return r.RouterReward == RouterDecision }
func (r Rewards) searcherJob() bool { return r.SearcherReward == SearcherRetrieval }
func (r Rewards) criticJob() bool   { return r.CriticReward == CriticVerdict }

// problems lists the settings out of range, by key, as Options.Problems does.
func (r Rewards) problems() []error {
	var errs []error
	switch r.VerifierReward {
	case "", VerifierOutcome, VerifierVerdict:
	default:
		errs = append(errs, fmt.Errorf("verifier_reward: %s, want outcome or verdict", excerpt.Quote(r.VerifierReward)))
	}
	if r.RouterReward != "" && r.RouterReward != JobOutcome && r.RouterReward != RouterDecision {
		errs = append(errs, fmt.Errorf("router_reward: %s, want outcome or decision", excerpt.Quote(r.RouterReward)))
	}
	if r.SearcherReward != "" && r.SearcherReward != JobOutcome && r.SearcherReward != SearcherRetrieval {
		errs = append(errs, fmt.Errorf("searcher_reward: %s, want outcome or retrieval", excerpt.Quote(r.SearcherReward)))
	}
	if r.CriticReward != "" && r.CriticReward != JobOutcome && r.CriticReward != CriticVerdict {
		errs = append(errs, fmt.Errorf("critic_reward: %s, want outcome or verdict", excerpt.Quote(r.CriticReward)))
	}
	if !(r.VerdictShare >= 0 && r.VerdictShare <= 1) {
		errs = append(errs, fmt.Errorf("verdict_share: %v, want 0..1", r.VerdictShare))
	} else if r.VerdictShare > 0 && r.VerifierReward != VerifierVerdict {
		errs = append(errs, fmt.Errorf("verdict_share: %v needs verifier_reward: verdict", r.VerdictShare))
	}
	if !(r.StepCost >= 0 && r.StepCost <= 1) {
		errs = append(errs, fmt.Errorf("step_cost: %v, want 0..1", r.StepCost))
	}
	for _, a := range sortedAgents(r.FormatPenalty) {
		if p := r.FormatPenalty[a]; !(p >= 0 && p <= 10) {
			errs = append(errs, fmt.Errorf("format_penalty.%s: %v, want 0..10", a, p))
		}
	}
	return errs
}

func sortedAgents(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// checkAgents reports reward settings that name agents the workflow does not run.
func (r Rewards) checkAgents(workflow string, agents []string) error {
	if r.VerifierReward == VerifierVerdict && !slices.Contains(agents, AgentVerifier) {
		return fmt.Errorf("verifier_reward: verdict: workflow %s has no verifier (its agents: %s)", workflow, strings.Join(agents, ", "))
	}
	if r.routerJob() && !slices.Contains(agents, AgentRouter) {
		return fmt.Errorf("router_reward: decision: workflow %s has no router (its agents: %s)", workflow, strings.Join(agents, ", "))
	}
	if r.searcherJob() && !slices.Contains(agents, AgentSearcher) {
		return fmt.Errorf("searcher_reward: retrieval: workflow %s has no searcher (its agents: %s)", workflow, strings.Join(agents, ", "))
	}
	if r.criticJob() && !slices.Contains(agents, AgentCritic) {
		return fmt.Errorf("critic_reward: verdict: workflow %s has no critic (its agents: %s)", workflow, strings.Join(agents, ", "))
	}
	for _, a := range sortedAgents(r.FormatPenalty) {
		if !slices.Contains(agents, a) {
			return fmt.Errorf("format_penalty.%s: workflow %s has no such agent (its agents: %s)", a, workflow, strings.Join(agents, ", "))
		}
	}
	return nil
}

// TurnScorer is implemented by episodes whose rows are scored per turn rather than by
// RowScore(outcome, valid, penalty) alone. The rollout uses TurnScores when it is not nil.
type TurnScorer interface {
	// TurnScores returns one score per Act call of the finished episode, in order.
	TurnScores() []float64
}

// scoredEpisode wraps an episode with a reward design. It watches the turns go by: which agent
// acted, in which step, whether its action was valid and, for a verifier, whether its verdict
// was right about the solver's last answer (parsed as the math episode parses it); for a search
// router or searcher under a job reward, whether it did its job.
type scoredEpisode struct {
	Episode
	r       Rewards
	penalty float64 // the workflow's invalid-action penalty
	want    int
	wantOK  bool

	pending   Turn
	isPending bool
	correct   bool // the solver's last answer is right
	turns     []scoredTurn
	steps     int
}

type scoredTurn struct {
	agent string
	valid bool
	job   float64 // 1 for a job done right (a right verdict, routing, retrieval), else 0
	// hasJob: the turn is scored by job alone (router and searcher under their job rewards,
	// on questions the expert parses); the verifier's verdict mixes in by VerdictShare.
	hasJob bool
}

// withRewards wraps e when r is not the zero design.
func withRewards(e Episode, r Rewards, penalty float64, t Task) Episode {
	if r.IsZero() {
		return e
	}
	want, ok := parseTaskInt(t.Answer)
	return &scoredEpisode{Episode: e, r: r, penalty: penalty, want: want, wantOK: ok}
}

func (e *scoredEpisode) Next() (Turn, bool) {
	t, ok := e.Episode.Next()
	e.pending, e.isPending = t, ok
	return t, ok
}

func (e *scoredEpisode) Act(resp string) bool {
	if !e.isPending { // Act before Next: learn the turn first
		if _, ok := e.Next(); !ok {
			return e.Episode.Act(resp)
		}
	}
	t := e.pending
	e.isPending = false
	se, _ := e.Episode.(*searchEpisode)
	var job searchJob
	if se != nil && (t.Agent == AgentRouter && e.r.routerJob() || t.Agent == AgentSearcher && e.r.searcherJob()) {
		job = se.startJob(t.Agent)
	}
	valid := e.Episode.Act(resp)
	st := scoredTurn{agent: t.Agent, valid: valid}
	if job.known {
		st.job, st.hasJob = job.done(se, valid), true
	}
	if g, ok := e.Episode.(verdictGrader); ok {
		if g.lastVerdictRight() {
			st.job = 1
		}
	} else {
		e.gradeMathTurn(t.Agent, resp, &st)
	}
	e.turns = append(e.turns, st)
	e.steps = max(e.steps, t.Step+1)
	return valid
}

// verdictGrader is implemented by episodes that grade their judging turns themselves
// (math_critic's critic and verifier): after Act, whether the turn just played was a verdict
// that was right about the answer it judged.
type verdictGrader interface{ lastVerdictRight() bool }

// gradeMathTurn follows a math episode's turn: the solver's answer, and whether the verifier's
// verdict on it was right (st.job).
func (e *scoredEpisode) gradeMathTurn(agent, resp string, st *scoredTurn) {
	me, _ := e.Episode.(*mathEpisode)
	switch agent {
	case AgentSolver:
		v, ok := ParseSolver(resp)
		e.correct = ok && e.wantOK && v == e.want
		if me != nil && me.paper[AgentSolver] {
			e.correct = me.correct() // a paper answer is graded as the episode grades it
		}
	case AgentVerifier:
		approve, ok := ParseVerifier(resp)
		if me != nil {
			approve, ok = me.parseVerdict(resp) // the episode's format (paper, digit marks)
		}
		// An invalid verdict acts as a reject, but it is no verdict: never right.
		if ok && approve == e.correct {
			st.job = 1
		}
	}
}

// TurnScores scores each turn: the outcome (for a verifier under verdict, mixed with the
// verdict by VerdictShare; for a router or searcher under its job reward, and a critic under
// its verdict reward, the job alone), minus StepCost per step the episode took, minus the agent's
// format penalty if its action was invalid. Products are rounded before they are added
// (explicit conversions), so no build fuses them into a multiply-add.
func (e *scoredEpisode) TurnScores() []float64 {
	outcome := e.Episode.Reward()
	cost := float64(e.r.StepCost * float64(e.steps))
	s := e.r.share()
	out := make([]float64, len(e.turns))
	for i, t := range e.turns {
		score := outcome
		switch {
		case t.hasJob:
			score = t.job
		case t.agent == AgentVerifier && s > 0:
			score = float64((1-s)*outcome) + float64(s*t.job)
		case t.agent == AgentCritic && e.r.criticJob():
			score = t.job
		}
		score -= cost
		if !t.valid {
			p, ok := e.r.FormatPenalty[t.agent]
			if !ok {
				p = e.penalty
			}
			score -= p
		}
		out[i] = score
	}
	return out
}
