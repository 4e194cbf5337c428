package openai

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/actors"
)

func TestBackoffIsDeterministicAndBounded(t *testing.T) {
	base := 100 * time.Millisecond
	for attempt := range 5 {
		a := backoff(base, attempt, 7, 99)
		if a != backoff(base, attempt, 7, 99) {
			t.Fatal("jitter is not deterministic")
		}
		lo := base << attempt
		if a < lo || a >= 2*lo {
			t.Fatalf("attempt %d: delay %s not in [%s, %s)", attempt, a, lo, 2*lo)
		}
	}
	if backoff(base, 1, 7, 99) == backoff(base, 1, 7, 100) {
		t.Fatal("different requests share a jitter")
	}
	if d := backoff(base, 40, 1, 1); d > maxBackoff {
		t.Fatalf("delay %s above the cap", d)
	}
}

// TestLogProbRoundTrips: every float32 log-prob survives JSON exactly.
func TestLogProbRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []float32{0, -1e-45, -math.MaxFloat32, -0.1, -5.5928345}
	for range 20000 {
		vals = append(vals, -float32(r.ExpFloat64()*r.Float64()*30))
	}
	for _, v := range vals {
		data, err := json.Marshal(LogProb{V: v})
		if err != nil {
			t.Fatal(err)
		}
		var back LogProb
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if math.Float32bits(back.V) != math.Float32bits(v) {
			t.Fatalf("%v → %s → %v", v, data, back.V)
		}
	}
	data, _ := json.Marshal([]LogProb{{Null: true}, {V: float32(math.Inf(-1))}})
	if string(data) != "[null,-9999]" {
		t.Fatal(string(data))
	}
}

func TestPromptText(t *testing.T) {
	r := actors.Request{Agent: "verifier", Prompt: actors.PromptIDs("verifier", "Q: 2+2\nA: 4")}
	if got := PromptText(r); got != "Q: 2+2\nA: 4" {
		t.Fatalf("%q", got)
	}
	if got := PromptText(actors.Request{Agent: "x", Prompt: []int32{'h', 'i'}}); got != "hi" {
		t.Fatalf("%q", got)
	}
}

func TestParseTokenID(t *testing.T) {
	for s, want := range map[string]int32{"token_id:0": 0, "token_id:151643": 151643} {
		if got, ok := ParseTokenID(s); !ok || got != want {
			t.Errorf("%s: %d %v", s, got, ok)
		}
	}
	for _, s := range []string{"token_id:", "token_id:-1", "token_id:x", "hello", "token_id:99999999999"} {
		if _, ok := ParseTokenID(s); ok {
			t.Errorf("%s parsed", s)
		}
	}
}
