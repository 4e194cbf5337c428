package learn

import (
	"errors"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/invariants"
)

// TestCheckFirstUpdate: the invariants build's first-update check passes ratios of exactly 1
// and names the agent whose ratio is not.
func TestCheckFirstUpdate(t *testing.T) {
	ok := &AgentStats{Tokens: 5, Rows: 2, SumRatio: 5, MaxRatio: 1}
	if err := checkFirstUpdate(Stats{Agents: map[string]*AgentStats{"solver": ok, "empty": {}}}); err != nil {
		t.Fatalf("exact ratios refused: %v", err)
	}
	for _, bad := range []AgentStats{
		{Tokens: 5, SumRatio: 5, MaxRatio: 1.0000001},
		{Tokens: 5, SumRatio: 4.9999999, MaxRatio: 1},
		{Tokens: 5, SumRatio: 5, MaxRatio: 1, SumLogRatioSq: 1e-20},
	} {
		err := checkFirstUpdate(Stats{Agents: map[string]*AgentStats{"solver": ok, "verifier": &bad}})
		if !errors.Is(err, invariants.ErrViolated) || !strings.Contains(err.Error(), "agent verifier") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
