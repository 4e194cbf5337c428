package workflows

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestTasksDeterministicAndDisjoint(t *testing.T) {
	for _, name := range []string{"math", "search"} {
		w := newWF(t, name, nil)
		a, b := w.Tasks(42, Train, 500), w.Tasks(42, Train, 500)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: same seed, different tasks", name)
		}
		// Another workflow instance with the same options agrees too.
		if c := newWF(t, name, nil).Tasks(42, Train, 500); !reflect.DeepEqual(a, c) {
			t.Fatalf("%s: not deterministic across instances", name)
		}
		if c := w.Tasks(43, Train, 500); reflect.DeepEqual(a, c) {
			t.Fatalf("%s: seed ignored", name)
		}
		// A prefix property is not promised, but lengths are.
		if len(w.Tasks(1, Eval, 0)) != 0 || len(w.Tasks(1, Eval, 3)) != 3 {
			t.Fatal("wrong count")
		}
		train := map[string]bool{}
		ids := map[string]bool{}
		for seed := uint64(0); seed < 5; seed++ {
			for _, task := range w.Tasks(seed, Train, 2000) {
				train[task.Question] = true
				if SplitOf(name, task.Question) != Train {
					t.Fatalf("%s: train task %q hashes to eval", name, task.Question)
				}
				if seed == 0 {
					if ids[task.ID] {
						t.Fatalf("duplicate id %s", task.ID)
					}
					ids[task.ID] = true
				}
			}
		}
		evalQ := map[string]bool{}
		for seed := uint64(0); seed < 5; seed++ {
			for _, task := range w.Tasks(seed, Eval, 2000) {
				evalQ[task.Question] = true
				if train[task.Question] {
					t.Fatalf("%s: %q in both train and eval", name, task.Question)
				}
			}
		}
		t.Logf("%s: %d distinct train, %d distinct eval questions", name, len(train), len(evalQ))
	}
}

func TestTasksUniqueWhilePossibleAndAnswersRight(t *testing.T) {
	w := newWF(t, "math", nil)
	tasks := w.Tasks(3, Train, 300)
	seen := map[string]bool{}
	for _, task := range tasks {
		if seen[task.Question] {
			t.Fatalf("repeat %q within 300 train tasks", task.Question)
		}
		seen[task.Question] = true
		a, b, ok := strings.Cut(task.Question, "+")
		if !ok || len(a) != MathDigits || len(b) != MathDigits || len(task.Answer) != MathDigits+1 {
			t.Fatalf("task %+v: want two %d-digit operands and a %d-digit answer", task, MathDigits, MathDigits+1)
		}
		// Little-endian: reverse, add as integers, write back reversed.
		x, y := atoi(t, reverse(a)), atoi(t, reverse(b))
		if got := atoi(t, reverse(task.Answer)); got != x+y {
			t.Fatalf("%s: answer %s reads %d, want %d", task.Question, task.Answer, got, x+y)
		}
		// A carry into digit i shows as a sum digit other than (a_i + b_i) mod 10.
		carried := 0
		for i := 1; i <= MathDigits; i++ {
			ai, bi := 0, 0
			if i < MathDigits {
				ai, bi = int(a[i]-'0'), int(b[i]-'0')
			}
			if int(task.Answer[i]-'0') != (ai+bi)%10 {
				carried++
			}
		}
		wantSrc := SourceMathEasy
		if carried >= 2 {
			wantSrc = SourceMathHard
		}
		if task.DataSource != wantSrc {
			t.Fatalf("%s: %d carries, source %s", task.Question, carried, task.DataSource)
		}
	}
	s := searchWF(t, nil)
	for _, task := range s.Tasks(3, Train, 300) {
		kind, _ := s.parseQuestion(task.Question)
		if kind == qUnknown || (kind == qCountry2) != (task.DataSource == SourceSearch2Hop) {
			t.Fatalf("%+v: kind %d", task, kind)
		}
	}
}

func TestTasksHardFrac(t *testing.T) {
	for _, frac := range []float64{0, 0.3, 1} {
		for _, name := range []string{"math", "search"} {
			w := newWF(t, name, func(o *Options) { o.HardFrac = frac })
			hard := 0
			tasks := w.Tasks(9, Train, 1000)
			for _, task := range tasks {
				if task.DataSource == SourceMathHard || task.DataSource == SourceSearch2Hop {
					hard++
				}
			}
			if got := float64(hard) / 1000; math.Abs(got-frac) > 0.05 {
				t.Fatalf("%s hard_frac %v: got %v", name, frac, got)
			}
		}
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

func atoi(t *testing.T, s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMathEvalSplitDistinct: the default evaluation's 512 held-out prompts are 512 distinct
// questions, for any seed (the split holds about a thousand).
func TestMathEvalSplitDistinct(t *testing.T) {
	checkDistinctEval(t, newWF(t, "math", func(o *Options) { o.HardFrac = 0.3 }), 3, 512)
}

// TestSearchEvalSplitDistinct: configs/search.yaml's corpus of 2000 people (hard_frac 0.3) gives
// its 384 held-out prompts as distinct questions.
func TestSearchEvalSplitDistinct(t *testing.T) {
	checkDistinctEval(t, newWF(t, "search", func(o *Options) { o.CorpusPeople, o.HardFrac = 2000, 0.3 }), 10, 384)
}

// checkDistinctEval checks that n held-out tasks are n distinct questions for seeds 0..seeds-1.
func checkDistinctEval(t *testing.T, w Workflow, seeds uint64, n int) {
	t.Helper()
	for seed := range seeds {
		seen := map[string]bool{}
		for _, task := range w.Tasks(seed, Eval, n) {
			if seen[task.Question] {
				t.Fatalf("%s seed %d: %q repeats among %d held-out prompts", w.Name(), seed, task.Question, n)
			}
			seen[task.Question] = true
		}
	}
}
