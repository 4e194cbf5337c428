package openai

import "testing"

// TestAdapterStep: only "<model>@step=<N>" with N a canonical non-negative integer is one of
// model's adapters; other names (other models, other spellings) are never unloaded as stale.
func TestAdapterStep(t *testing.T) {
	for _, c := range []struct {
		name string
		step int64
		ok   bool
	}{
		{AdapterName("m", 3), 3, true},
		{"m@step=0", 0, true},
		{"m@step=03", 0, false},
		{"m@step=-1", 0, false},
		{"m@step=1x", 0, false},
		{"m@step=", 0, false},
		{"mx@step=1", 0, false},
		{"m", 0, false},
		{"m@step=99999999999999999999", 0, false},
	} {
		step, ok := adapterStep("m", c.name)
		if ok != c.ok || (ok && step != c.step) {
			t.Errorf("adapterStep(m, %q) = %d %v, want %d %v", c.name, step, ok, c.step, c.ok)
		}
	}
}
