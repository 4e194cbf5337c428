package workflows

// EpisodeF1 returns a finished episode's answer token F1 and whether its workflow scores one
// (F1Scorer: the search workflow does, math does not). A reward design's wrapper (withRewards)
// is looked through: the design changes the rows' scores, not what the answer is worth.
func EpisodeF1(e Episode) (float64, bool) {
	if s, ok := e.(*scoredEpisode); ok {
		e = s.Episode
	}
	if f, ok := e.(F1Scorer); ok {
		return f.F1(), true
	}
	return 0, false
}

// Verdict is one verifier turn: whether the candidate it judged was correct, and whether it
// approved it (an invalid verdict is no approval).
type Verdict struct{ CandidateCorrect, Approved bool }

// Verdicter is implemented by episodes with a verifier (math's): the verdicts so far, in order.
type Verdicter interface{ Verdicts() []Verdict }

// EpisodeVerdicts returns a finished episode's verifier verdicts and whether its workflow has a
// verifier; a reward design's wrapper is looked through.
func EpisodeVerdicts(e Episode) ([]Verdict, bool) {
	if s, ok := e.(*scoredEpisode); ok {
		e = s.Episode
	}
	if v, ok := e.(Verdicter); ok {
		return v.Verdicts(), true
	}
	return nil, false
}
