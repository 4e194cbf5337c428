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
