package ablate_test

import (
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/ablate"
)

// TestWriteReportLastEvalOfAnIdleAgent: the evaluation is of the published step, the same for
// every agent of an (estimator, seed); an agent without rows in the last iteration must still
// show the last evaluation, not an older one.
func TestWriteReportLastEvalOfAnIdleAgent(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	rows := []ablate.SummaryRow{
		{Estimator: "grpo", Seed: 1, Iteration: 0, Model: "m1", Agent: "solver", Rows: 8, GradNorm: 1, AvgAtK: f(0.1), PassAtK: f(0.2)},
		{Estimator: "grpo", Seed: 1, Iteration: 0, Model: "m1", Agent: "verifier", Rows: 8, GradNorm: 1, AvgAtK: f(0.1), PassAtK: f(0.2)},
		{Estimator: "grpo", Seed: 1, Iteration: 1, Model: "m1", Agent: "solver", Rows: 8, GradNorm: 2, AvgAtK: f(0.7), PassAtK: f(0.8)},
		{Estimator: "grpo", Seed: 1, Iteration: 1, Model: "m1", Agent: "verifier", AvgAtK: f(0.7), PassAtK: f(0.8)}, // idle
	}
	var buf strings.Builder
	if err := ablate.WriteReport(&buf, &ablate.Result{Mode: ablate.Replay, Source: "s", Rows: rows}); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "verifier") && !strings.Contains(line, "0.700") {
			t.Fatalf("the idle verifier's last evaluation is not the last one (0.700):\n%s", buf.String())
		}
	}
}
