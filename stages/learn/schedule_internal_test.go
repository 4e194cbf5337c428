package learn

import (
	"math"
	"testing"
)

// TestScheduleByHand: the learning rate per step, worked by hand from the formulas of verl's
// (transformers') warm-up and cosine schedules (LambdaLR: step k uses factor(k)).
func TestScheduleByHand(t *testing.T) {
	cos := schedule{Base: 1e-3, Cosine: true, Warmup: 4, MinRatio: 0.1, Total: 14}
	con := schedule{Base: 1e-3, Warmup: 4}
	for _, tc := range []struct {
		s    schedule
		k    int64
		want float64
	}{
		{cos, 0, 0}, {cos, 1, 2.5e-4}, {cos, 2, 5e-4}, {cos, 4, 1e-3},
		{cos, 9, 1e-3 * (0.1 + 0.9*0.5)},                           // progress 1/2: cos = 0
		{cos, 6, 1e-3 * (0.1 + 0.9*0.5*(1+math.Cos(math.Pi*0.2)))}, // progress 2/10
		{cos, 14, 1e-4}, {cos, 30, 1e-4}, // the end, and past it
		{con, 0, 0}, {con, 3, 7.5e-4}, {con, 4, 1e-3}, {con, 1000, 1e-3},
	} {
		if got := tc.s.at(tc.k); math.Abs(got-tc.want) > 1e-18 {
			t.Errorf("%+v at step %d: %v, want %v", tc.s, tc.k, got, tc.want)
		}
	}
	// The default is the configured rate bit for bit, whatever the step.
	def := schedule{Base: 3e-4, Total: 10}
	for k := range int64(20) {
		if def.at(k) != 3e-4 {
			t.Fatalf("constant without warm-up at step %d: %v", k, def.at(k))
		}
	}
}
