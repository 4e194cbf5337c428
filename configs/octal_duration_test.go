package configs

import (
	"strings"
	"testing"
)

// TestYAMLOctalDurationSaysWriteAUnit: a leading-zero number for a duration key is an error
// whose advice works: a bare number is refused for a duration, so it says to add a unit.
func TestYAMLOctalDurationSaysWriteAUnit(t *testing.T) {
	p := write(t, "octal.yaml", "models:\n  m1: {dim: 64, layers: 3, heads: 4, context: 128, ff_mult: 4, tied_head: true, openai: {timeout: 010}}\n")
	_, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if want := "models.m1.openai.timeout: 010 is read as an octal number in YAML: write a duration with its unit, e.g. 10s"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v\nwant %q", err, want)
	}
}
