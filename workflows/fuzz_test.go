package workflows

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/workflows/retriever"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; run one with e.g.
// go test ./workflows -run '^$' -fuzz '^FuzzParseSolver$' -fuzztime 30s

func FuzzParseSolver(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseSolver(s)
		if !ok {
			if v != 0 {
				t.Fatalf("invalid but value %d", v)
			}
			return
		}
		if !strings.HasPrefix(trimASCII(s), "ans ") || v >= 1e9 || v <= -1e9 {
			t.Fatalf("%q → %d", s, v)
		}
		if w, ok := ParseSolver(FormatSolver(v)); !ok || w != v {
			t.Fatalf("canonical form of %d does not round-trip", v)
		}
	})
}

// verifierAction is ParseVerifier's grammar written independently: optional work of 1..9
// digits and one space, then the verdict.
var verifierAction = regexp.MustCompile(`^(?:[0-9]{1,9} )?(yes|no)$`)

func FuzzParseVerifier(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		approve, ok := ParseVerifier(s)
		m := verifierAction.FindStringSubmatch(trimASCII(s))
		if ok != (m != nil) || approve != (m != nil && m[1] == "yes") {
			t.Fatalf("%q → %v,%v", s, approve, ok)
		}
	})
}

// verifierMarks and verifierWork are ParseVerifierMarks's and ParseVerifierWork's grammars
// written independently (a bare verdict, or work and marks / work alone); that the marks number
// the work's digits is checked beside the regexp.
var (
	verifierMarks = regexp.MustCompile(`^(?:(yes|no)|([0-9]{1,9}) ([yn]{1,9}))$`)
	verifierWork  = regexp.MustCompile(`^(?:(yes|no)|([0-9]{1,9}))$`)
)

func FuzzParseVerifierMarks(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		approve, ok := ParseVerifierMarks(s)
		m := verifierMarks.FindStringSubmatch(trimASCII(s))
		want := m != nil && (m[1] != "" || len(m[2]) == len(m[3]))
		wantApprove := want && (m[1] == "yes" || (m[1] == "" && !strings.Contains(m[3], "n")))
		if ok != want || approve != wantApprove {
			t.Fatalf("%q → %v,%v", s, approve, ok)
		}
	})
}

func FuzzParseVerifierWork(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		work, isWork, approve, ok := ParseVerifierWork(s)
		m := verifierWork.FindStringSubmatch(trimASCII(s))
		if ok != (m != nil) || isWork != (m != nil && m[2] != "") || approve != (m != nil && m[1] == "yes") {
			t.Fatalf("%q → %d,%v,%v,%v", s, work, isWork, approve, ok)
		}
		if isWork && strings.TrimLeft(m[2], "0") != strings.TrimLeft(strconv.Itoa(work), "0") {
			t.Fatalf("%q → work %d", s, work)
		}
	})
}

func FuzzParseRouter(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		enough, ok := ParseRouter(s)
		tr := trimASCII(s)
		if ok != (tr == "enough" || tr == "more") || enough != (tr == "enough") {
			t.Fatalf("%q → %v,%v", s, enough, ok)
		}
	})
}

func FuzzParseSearcher(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		q, ok := ParseSearcher(s)
		if !ok {
			return
		}
		if q == "" || len(q) > maxQueryBytes || strings.Join(retriever.Tokenize(q), " ") != q {
			t.Fatalf("%q → %q: not a clean query", s, q)
		}
		if n := len(strings.Fields(q)); n < 1 || n > maxQueryWords {
			t.Fatalf("%q → %d words", s, n)
		}
		if r, ok := ParseSearcher("q " + q); !ok || r != q {
			t.Fatalf("%q does not round-trip", q)
		}
	})
}

func FuzzParseAnswerer(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseAnswerer(s)
		if !ok {
			return
		}
		if a == "" || a != NormalizeAnswer(a) || len(a) > maxAnswerBytes {
			t.Fatalf("%q → %q", s, a)
		}
		if r, ok := ParseAnswerer("a " + a); !ok || r != a {
			t.Fatalf("%q does not round-trip", a)
		}
	})
}

// FuzzEpisodes drives both workflows with arbitrary responses: no panic, the
// episode ends within its bound, prompts stay within PromptBudget, rewards
// are 0 or 1.
func FuzzEpisodes(f *testing.F) {
	m := newWF(f, "math", func(o *Options) { o.MaxLoop = 3 })
	s := newWF(f, "search", func(o *Options) { o.TopK = 2; o.MaxSteps = 6 })
	mt, st := m.Tasks(1, Train, 50), s.Tasks(1, Train, 50)
	people := s.(*Search).Corpus().People
	f.Fuzz(func(t *testing.T, pick uint8, r1, r2, r3 string) {
		w, task := m, mt[int(pick)%len(mt)]
		if pick&1 == 1 {
			w, task = s, st[int(pick)%len(st)]
		}
		ep := w.NewEpisode(task)
		resps := []string{r1, r2, r3, "more", "q " + people[int(pick)%len(people)] + " lives"}
		for i := 0; ; i++ {
			turn, ok := ep.Next()
			if !ok {
				break
			}
			if i > 20 {
				t.Fatal("episode does not end")
			}
			if len(turn.Prompt) > PromptBudget {
				t.Fatalf("prompt %d bytes: %q", len(turn.Prompt), turn.Prompt)
			}
			ep.Act(resps[i%len(resps)])
		}
		if r := ep.Reward(); r != 0 && r != 1 {
			t.Fatalf("reward %v", r)
		}
	})
}
