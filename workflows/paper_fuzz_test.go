package workflows

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; run one with e.g.
// go test ./workflows -run '^$' -fuzz '^FuzzParsePaper$' -fuzztime 30s

// FuzzParsePaper: every paper parser on arbitrary text: no panic, a parsed action is clean and
// bounded, and it reads back the same from its canonical tag.
func FuzzParsePaper(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		for _, name := range []string{"verify", "search", "answer"} {
			c, ok := ParseTag(s, name)
			if !ok {
				continue
			}
			if c == "" || c != strings.TrimSpace(c) || strings.Contains(asciiLower(c), "</"+name+">") {
				t.Fatalf("%s: %q → %q", name, s, c)
			}
			if r, ok := ParseTag("<"+name+">"+c+"</"+name+">", name); !ok || r != c {
				t.Fatalf("%s: %q does not read back (%q)", name, c, r)
			}
		}
		for _, kw := range []struct {
			parse   func(string) (bool, bool)
			yes, no string
		}{{ParsePaperVerifier, "approve", "reject"}, {ParsePaperRouter, "yes", "no"}} {
			v, ok := kw.parse(s)
			c, _ := ParseTag(s, "verify")
			if ok != (strings.EqualFold(c, kw.yes) || strings.EqualFold(c, kw.no)) || v != (ok && strings.EqualFold(c, kw.yes)) {
				t.Fatalf("%q → %v,%v (tag %q)", s, v, ok, c)
			}
		}
		if q, ok := ParsePaperSearcher(s); ok {
			if q == "" || len(q) > PaperQueryBytes || !utf8.ValidString(q) || strings.Join(strings.Fields(q), " ") != q {
				t.Fatalf("%q → query %q", s, q)
			}
			if r, ok := ParsePaperSearcher(paperSearchDemo(q)); !ok || r != q {
				t.Fatalf("query %q does not read back (%q)", q, r)
			}
		}
		if a, ok := ParsePaperAnswerer(s); ok {
			if a == "" || a != NormalizeAnswer(a) || !utf8.ValidString(a) {
				t.Fatalf("%q → answer %q", s, a)
			}
			if r, ok := ParsePaperAnswerer(paperAnswerDemo(a)); len(a) <= PaperAnswerBytes && (!ok || r != a) {
				t.Fatalf("answer %q does not read back (%q)", a, r)
			}
		}
		if b, ok := ParsePaperSolver(s); ok && (b == "" || b != strings.TrimSpace(b) || len(b) > len(s)) {
			t.Fatalf("%q → boxed %q", s, b)
		}
	})
}

// FuzzPaperEpisodes drives both workflows, with each agent's format picked by the fuzzer, on
// arbitrary responses: no panic, the episode ends, prompts are the same when replayed, paper
// prompts are valid UTF-8 within their documented bound and compact ones within PromptBudget.
func FuzzPaperEpisodes(f *testing.F) {
	agents := map[string][]string{"math": {AgentSolver, AgentVerifier}, "search": {AgentRouter, AgentSearcher, AgentAnswerer}}
	type wfs = map[uint8]Workflow
	built := map[string]wfs{"math": {}, "search": {}}
	for name, as := range agents {
		for mask := uint8(0); mask < 1<<len(as); mask++ {
			var paper []string
			for i, a := range as {
				if mask&(1<<i) != 0 {
					paper = append(paper, a)
				}
			}
			built[name][mask] = newWF(f, name, func(o *Options) { o.MaxLoop, o.MaxSteps, o.TopK, o.PaperAgents = 3, 6, 2, paper })
		}
	}
	mt, st := built["math"][0].Tasks(1, Train, 20), built["search"][0].Tasks(1, Train, 20)
	people := built["search"][0].(*Search).Corpus().People
	// The fixed text of a prompt is under 1000 bytes; the rest is bounded by the constants.
	mathBound := 1000 + PaperQuestionBytes + 2*(len(paperCut)+PaperResponseBytes)
	searchBound := 1000 + PaperQuestionBytes + 6*(PaperQueryBytes+6) + SearchContextPassages*100
	f.Fuzz(func(t *testing.T, pick uint8, r1, r2, r3 string) {
		name, tasks, bound := "math", mt, mathBound
		if pick&1 == 1 {
			name, tasks, bound = "search", st, searchBound
		}
		w := built[name][(pick>>1)%uint8(len(built[name]))]
		task := tasks[int(pick>>4)%len(tasks)]
		resps := []string{r1, r2, r3, "<verify>no</verify>", "<search>" + people[int(pick)%len(people)] + " lives</search>"}
		run := func() []Turn {
			ep := w.NewEpisode(task)
			var turns []Turn
			for i := 0; ; i++ {
				turn, ok := ep.Next()
				if !ok {
					break
				}
				if i > 30 {
					t.Fatal("episode does not end")
				}
				turns = append(turns, turn)
				ep.Act(resps[i%len(resps)])
			}
			if r := ep.Reward(); r != 0 && r != 1 {
				t.Fatalf("reward %v", r)
			}
			return turns
		}
		a, b := run(), run()
		for i, turn := range a {
			if b[i] != turn {
				t.Fatalf("turn %d differs on replay", i)
			}
			compact := strings.HasPrefix(turn.Prompt, turn.Agent+"\n")
			if compact && len(turn.Prompt) > PromptBudget || !compact && (len(turn.Prompt) > bound || !utf8.ValidString(turn.Prompt)) {
				t.Fatalf("%s prompt of %d bytes (bound %d): %q", turn.Agent, len(turn.Prompt), bound, turn.Prompt)
			}
		}
	})
}
