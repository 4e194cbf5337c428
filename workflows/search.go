package workflows

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/drmas-dev/drmas/workflows/retriever"
)

// Search agents and data sources.
const (
	AgentRouter          = "router"
	AgentSearcher        = "searcher"
	AgentAnswerer        = "answerer"
	SourceSearch1Hop     = "search_1hop"
	SourceSearch2Hop     = "search_2hop"
	SearchInvalidPenalty = 0.01
	// SearchContextPassages is the most passages a prompt shows: the newest
	// ones are kept when more have been gathered.
	SearchContextPassages = 4
)

// maxSearchQuestion bounds the question bytes in a search prompt:
// 9 (header) + 3+64 (question line) + 4·(3+23) (passages) = 180.
const maxSearchQuestion = 64

func init() {
	Register("search", func(o Options) (Workflow, error) { return NewSearch(o) })
}

// Search is the Router → Searcher → Answerer workflow over a BM25 retriever.
//
// Steps s = 0..max_steps-1 (Turn.Step = s). In each step but the last the
// router sees the question and the gathered passages and says "enough" or
// "more". On "more" the searcher (same step) issues "q <words>"; the
// retriever's top_k passages not already gathered join the context, and step
// s+1 begins. On "enough" the answerer (same step) answers "a <answer>" and
// the episode ends. In the last step the router is skipped and the answerer
// must answer. Fallbacks: an invalid router action counts as "enough" (the
// answerer answers with what is there); an invalid query retrieves nothing;
// an invalid answer is graded wrong.
//
// Reward: 1 if the answer equals any of the task's golden answers (GoldenAnswers) after
// SQuAD normalization (package searchgrade), else 0. As an answer is printable ASCII of at
// most 40 bytes (see ParseAnswerer; a real model's last <answer>…</answer> is read too), a
// dataset task whose answers are not can never be solved. With workflow.retriever_url the
// passages come from a retrieval server and show as "Doc i: …" lines (searchremote.go).
// Prompts ("P" lines are passages, oldest first, at most
// SearchContextPassages of them):
//
//	router:   "router\nQ which country does kamo live in\nP kamo lives in oslo\n"
//	searcher: "searcher\nQ which country does kamo live in\nP kamo lives in oslo\n"
//	answerer: "answerer\nQ which country does kamo live in\nP kamo lives in oslo\nP oslo is in norway\n"
//
// Responses: router "enough" / "more", searcher "q oslo is", answerer
// "a norway" (see ParseRouter, ParseSearcher, ParseAnswerer). Agents in Options.PaperAgents
// get the paper format instead (paper.go).
//
// Questions (generated from the corpus of CorpusSeed): search_1hop
// "where does P live" (city; expert query "q P lives"), "what does P do"
// (job; "q P works"), "which country is C in" (country; "q C is");
// search_2hop "which country does P live in" (country; "q P lives" then
// "q <city> is"). With the generated corpus the expert query's fact always
// ranks first.
type Search struct {
	opts   Options
	corpus *retriever.Corpus
	index  *retriever.Index
}

// NewSearch builds the search workflow, generating its corpus and index.
func NewSearch(o Options) (*Search, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := o.Rewards.checkAgents("search", []string{AgentRouter, AgentSearcher, AgentAnswerer}); err != nil {
		return nil, err
	}
	if err := o.checkPaperAgents("search", []string{AgentRouter, AgentSearcher, AgentAnswerer}); err != nil {
		return nil, err
	}
	c := retriever.GenerateCorpus(o.CorpusSeed, o.CorpusPeople)
	return &Search{opts: o, corpus: c, index: retriever.New(c.Texts(), retriever.DefaultParams())}, nil
}

func (s *Search) Name() string            { return "search" }
func (s *Search) Agents() []string        { return []string{AgentRouter, AgentSearcher, AgentAnswerer} }
func (s *Search) InvalidPenalty() float64 { return SearchInvalidPenalty }

// Corpus returns the workflow's fact corpus (read-only).
func (s *Search) Corpus() *retriever.Corpus { return s.corpus }

// Index returns the workflow's BM25 index.
func (s *Search) Index() *retriever.Index { return s.index }

func (s *Search) NewEpisode(t Task) Episode {
	return withRewards(s.newEpisode(t), s.opts.Rewards, s.InvalidPenalty(), t)
}

type searchPhase int

const (
	phaseRoute searchPhase = iota
	phaseSearch
	phaseAnswer
	phaseDone
)

type searchEpisode struct {
	w        *Search
	question string
	task     string // the task's question, as the expert parses it
	want     string
	step     int
	phase    searchPhase
	passages []int // doc ids, oldest first
	reward   float64
	golden   []string // GoldenAnswers of the task
	remote   []string // a retrieval server's passages (searchremote.go)
	answer   string   // the parsed answer ("" for none or an invalid one)

	// The paper format (paper.go): which agents use it, the question and the valid queries so
	// far as its prompts show them.
	paper   paperAgents
	full    string
	queries []string
}

func (s *Search) newEpisode(t Task) *searchEpisode {
	e := &searchEpisode{w: s, question: promptText(t.Question, maxSearchQuestion), task: t.Question, want: NormalizeAnswer(t.Answer), golden: GoldenAnswers(t.Answer)}
	if e.paper = s.opts.paperSet(); e.paper != nil {
		e.full = paperQuestion(t.Question)
	}
	e.enter(0)
	return e
}

func (e *searchEpisode) enter(step int) {
	e.step = step
	if step >= e.w.opts.MaxSteps-1 {
		e.phase = phaseAnswer
	} else {
		e.phase = phaseRoute
	}
}

// visible returns the passages shown in prompts (newest SearchContextPassages).
func (e *searchEpisode) visible() []int {
	if len(e.passages) > SearchContextPassages {
		return e.passages[len(e.passages)-SearchContextPassages:]
	}
	return e.passages
}

func (e *searchEpisode) Next() (Turn, bool) {
	var agent string
	switch e.phase {
	case phaseRoute:
		agent = AgentRouter
	case phaseSearch:
		agent = AgentSearcher
	case phaseAnswer:
		agent = AgentAnswerer
	default:
		return Turn{}, false
	}
	if e.paper[agent] {
		return Turn{Agent: agent, Step: e.step, Prompt: e.paperPrompt(agent)}, true
	}
	var b strings.Builder
	b.WriteString(agent)
	b.WriteString("\nQ ")
	b.WriteString(e.question)
	b.WriteString("\n")
	e.passageLines(&b)
	return Turn{Agent: agent, Step: e.step, Prompt: b.String()}, true
}

func (e *searchEpisode) Act(resp string) bool {
	switch e.phase {
	case phaseRoute:
		enough, ok := ParseRouter(resp)
		if e.paper[AgentRouter] {
			enough, ok = ParsePaperRouter(resp)
		}
		if enough || !ok {
			e.phase = phaseAnswer
		} else {
			e.phase = phaseSearch
		}
		return ok
	case phaseSearch:
		q, ok := ParseSearcher(resp)
		if e.paper[AgentSearcher] {
			q, ok = ParsePaperSearcher(resp)
		}
		if ok {
			if e.paper != nil {
				e.queries = append(e.queries, q)
			}
			for _, d := range e.retrieve(q) {
				if !e.has(d) {
					e.passages = append(e.passages, d)
				}
			}
		}
		e.enter(e.step + 1)
		return ok
	case phaseAnswer:
		a, ok := parseAnswer(resp)
		if e.paper[AgentAnswerer] {
			a, ok = ParsePaperAnswerer(resp)
		}
		e.answer = a
		if ok && e.correct(a) {
			e.reward = 1
		}
		e.phase = phaseDone
		return ok
	}
	return false
}

func (e *searchEpisode) has(doc int) bool {
	for _, d := range e.passages {
		if d == doc {
			return true
		}
	}
	return false
}

func (e *searchEpisode) Reward() float64 { return e.reward }

// question kinds the expert understands.
type qKind int

const (
	qUnknown  qKind = iota
	qLives          // where does P live
	qJob            // what does P do
	qCity           // which country is C in
	qCountry2       // which country does P live in
)

func (s *Search) parseQuestion(q string) (qKind, string) {
	q = strings.TrimSpace(q)
	if x, ok := cutAround(q, "which country does ", " live in"); ok && s.corpus.LivesIn[x] != "" {
		return qCountry2, x
	}
	if x, ok := cutAround(q, "where does ", " live"); ok && s.corpus.LivesIn[x] != "" {
		return qLives, x
	}
	if x, ok := cutAround(q, "what does ", " do"); ok && s.corpus.JobOf[x] != "" {
		return qJob, x
	}
	if x, ok := cutAround(q, "which country is ", " in"); ok && s.corpus.CountryOf[x] != "" {
		return qCity, x
	}
	return qUnknown, ""
}

func cutAround(s, prefix, suffix string) (string, bool) {
	if !strings.HasPrefix(s, prefix) || !strings.HasSuffix(s, suffix) || len(s) <= len(prefix)+len(suffix) {
		return "", false
	}
	return s[len(prefix) : len(s)-len(suffix)], true
}

// fact returns the object of (subject, relation) if that fact is gathered.
func (e *searchEpisode) fact(subject, rel string) (string, bool) {
	for _, d := range e.visible() {
		if d < 0 {
			continue // a retrieval server's passage
		}
		f := e.w.corpus.Facts[d]
		if f.Subject == subject && f.Relation == rel {
			return f.Object, true
		}
	}
	return "", false
}

// derive answers the question from the visible passages, if they suffice.
func (e *searchEpisode) derive(kind qKind, x string) (string, bool) {
	switch kind {
	case qLives:
		return e.fact(x, retriever.RelLives)
	case qJob:
		return e.fact(x, retriever.RelWorks)
	case qCity:
		return e.fact(x, retriever.RelIs)
	case qCountry2:
		if city, ok := e.fact(x, retriever.RelLives); ok {
			return e.fact(city, retriever.RelIs)
		}
	}
	return "", false
}

// Demonstrations plays the expert. Router: "enough" iff the visible passages
// answer the question (a mistake flips it). Searcher: the query of the next
// missing fact (a mistake queries a random person and relation). Answerer: the
// answer derived from the passages, or, if they do not suffice, a random guess
// of the right type; a mistake answers a wrong value of the right type. For a
// question the expert does not recognise (dataset tasks), it searches once,
// for the question's words that fit in ResponseBudget, and answers the task's
// answer (which may be longer than ResponseBudget, or not a legal answer).
func (s *Search) Demonstrations(t Task, rng *rand.Rand, noise float64) []Demo {
	e := s.newEpisode(t)
	kind, x := s.parseQuestion(t.Question)
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	var demos []Demo
	for {
		turn, ok := e.Next()
		if !ok {
			return demos
		}
		mistake := noise > 0 && rng.Float64() < noise
		var resp string
		switch turn.Agent {
		case AgentRouter:
			var enough bool
			if kind == qUnknown {
				enough = e.step > 0 // searched once (a step ends with a search)
			} else {
				_, enough = e.derive(kind, x)
			}
			if mistake {
				enough = !enough
			}
			resp = map[bool]string{true: "enough", false: "more"}[enough]
			if e.paper[AgentRouter] {
				resp = paperKeywordDemo(enough, "yes", "no")
			}
		case AgentSearcher:
			q := s.expertQuery(e, kind, x, t.Question)
			if mistake {
				p := s.corpus.People[rng.IntN(len(s.corpus.People))]
				rel := []string{retriever.RelLives, retriever.RelWorks}[rng.IntN(2)]
				q = p + " " + rel
			}
			resp = "q " + q
			if e.paper[AgentSearcher] {
				resp = paperSearchDemo(q)
			}
		case AgentAnswerer:
			a := s.expertAnswer(e, kind, x, t, rng, mistake)
			resp = "a " + a
			if e.paper[AgentAnswerer] {
				resp = paperAnswerDemo(a)
			}
		}
		demos = append(demos, Demo{Agent: turn.Agent, Prompt: turn.Prompt, Response: resp, Step: turn.Step})
		e.Act(resp)
	}
}

func (s *Search) expertQuery(e *searchEpisode, kind qKind, x, question string) string {
	switch kind {
	case qLives:
		return x + " " + retriever.RelLives
	case qJob:
		return x + " " + retriever.RelWorks
	case qCity:
		return x + " " + retriever.RelIs
	case qCountry2:
		if city, ok := e.fact(x, retriever.RelLives); ok {
			return city + " " + retriever.RelIs
		}
		return x + " " + retriever.RelLives
	}
	var words []string
	size := len("q") // the response so far: "q", then " <word>" per word
	for _, w := range retriever.Tokenize(question) {
		if isQueryWord(w) && len(words) < maxQueryWords && size+1+len(w) <= ResponseBudget {
			words = append(words, w)
			size += 1 + len(w)
		}
	}
	if len(words) == 0 {
		words = []string{"none"}
	}
	return strings.Join(words, " ")
}

func isQueryWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if !(w[i] >= 'a' && w[i] <= 'z' || w[i] >= '0' && w[i] <= '9') {
			return false
		}
	}
	return len(w) > 0 && len(w) <= 12
}

func (s *Search) expertAnswer(e *searchEpisode, kind qKind, x string, t Task, rng *rand.Rand, mistake bool) string {
	if kind == qUnknown {
		return NormalizeAnswer(GoldenAnswers(t.Answer)[0])
	}
	var pool []string
	switch kind {
	case qLives:
		pool = s.corpus.Cities
	case qJob:
		pool = s.corpus.Jobs
	default:
		pool = s.corpus.Countries
	}
	a, ok := e.derive(kind, x)
	if !ok {
		return pool[rng.IntN(len(pool))] // a guess: the passages do not say
	}
	if mistake {
		for {
			if w := pool[rng.IntN(len(pool))]; w != a {
				return w
			}
		}
	}
	return a
}

// Tasks generates questions over the corpus; IDs are "search-<split>-<seed>-<i>".
func (s *Search) Tasks(seed uint64, split Split, n int) []Task {
	rng := newRand(seed, "search/"+split.String())
	c := s.corpus
	tasks := drawItems(rng, s.Name(), split, n, s.opts.HardFrac, func(rng *rand.Rand, hard bool) (string, Task) {
		p := c.People[rng.IntN(len(c.People))]
		if hard {
			q := "which country does " + p + " live in"
			return q, Task{Question: q, Answer: c.CountryOf[c.LivesIn[p]], DataSource: SourceSearch2Hop}
		}
		var q, a string
		switch rng.IntN(3) {
		case 0:
			q, a = "where does "+p+" live", c.LivesIn[p]
		case 1:
			q, a = "what does "+p+" do", c.JobOf[p]
		default:
			city := c.Cities[rng.IntN(len(c.Cities))]
			q, a = "which country is "+city+" in", c.CountryOf[city]
		}
		return q, Task{Question: q, Answer: a, DataSource: SourceSearch1Hop}
	})
	for i := range tasks {
		tasks[i].ID = fmt.Sprintf("search-%s-%d-%05d", split, seed, i)
	}
	return tasks
}

// searchJob is what a router's or searcher's job reward needs from before its action.
type searchJob struct {
	known  bool // the expert parses the question (else the row keeps the outcome)
	agent  string
	kind   qKind
	x      string
	enough bool // router: the expert's decision
	before int  // searcher: needed facts in view before the query
}

// startJob records the expert's view of the turn agent is about to take.
func (e *searchEpisode) startJob(agent string) searchJob {
	kind, x := e.w.parseQuestion(e.task)
	if kind == qUnknown {
		return searchJob{}
	}
	_, enough := e.derive(kind, x)
	return searchJob{known: true, agent: agent, kind: kind, x: x, enough: enough, before: e.factsInView(kind, x)}
}

// done scores the job: 1 if the router decided as the expert would (an invalid action is no
// decision), or if the searcher's query brought a needed fact into view (or, with none
// missing, kept them all in view).
func (j searchJob) done(e *searchEpisode, valid bool) float64 {
	right := false
	switch {
	case !valid:
	case j.agent == AgentRouter:
		stopped := e.phase == phaseAnswer
		right = stopped == j.enough
	case j.agent == AgentSearcher:
		after := e.factsInView(j.kind, j.x)
		right = after > j.before || after == factsNeeded(j.kind)
	}
	if right {
		return 1
	}
	return 0
}

// factsInView counts the facts of the question's chain the visible passages hold, in order
// (the second hop of a two-hop question counts only after the first).
func (e *searchEpisode) factsInView(kind qKind, x string) int {
	if _, ok := e.derive(kind, x); ok {
		return factsNeeded(kind)
	}
	if _, ok := e.fact(x, retriever.RelLives); kind == qCountry2 && ok {
		return 1
	}
	return 0
}

func factsNeeded(kind qKind) int {
	if kind == qCountry2 {
		return 2
	}
	return 1
}
