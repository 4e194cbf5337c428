package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/layout"
)

// tinyObjectiveConfig is the smallest run the learner's options are smoked on: two iterations
// of two mini-batches each (the second trains off-policy, so clipping can act).
const tinyObjectiveConfig = `run: t
seed: 3
iterations: 2
tasks: {per_iteration: 3, eval_size: 0}
models:
  m1: {dim: 16, layers: 1, heads: 2, context: 96, ff_mult: 2, tied_head: true}
agents:
  solver: {model: m1}
  verifier: {model: m1}
rollout: {group_size: 4, parts: 1, max_tokens: 8}
warmup: {steps: 300, batch: 16, demos: 200, lr: 3.0e-3}
learn:
  mini_batches: 2
  micro_batch: 16
`

// stepFiles runs `drmas run` with the learn keys extra and returns the files (name and sha256)
// of the checkpoint step it ends on, and the config file and store it ran with.
func stepFiles(t *testing.T, extra string) (files []string, cfgFile, store string) {
	t.Helper()
	dir := t.TempDir()
	cfgFile = filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfgFile, []byte(tinyObjectiveConfig+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	store = filepath.Join(dir, "store")
	if _, errOut, err := execute(t, "-q", "--config", cfgFile, "--store", store, "run"); err != nil {
		t.Fatalf("drmas run with %q: %v\n%s", extra, err, errOut)
	}
	data, err := os.ReadFile(filepath.Join(store, layout.CheckpointDir("t", 2), commit.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m commit.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		files = append(files, f.Name+" "+f.SHA256)
	}
	slices.Sort(files)
	return files, cfgFile, store
}

// TestRunWithEachObjectiveOption: `drmas run` trains with each learner option on; where the
// option acts on this tiny run it trains other weights than the defaults, and setting every
// key to its default value trains exactly the default run's weights.
func TestRunWithEachObjectiveOption(t *testing.T) {
	def, _, _ := stepFiles(t, "")
	explicit, _, _ := stepFiles(t, `  lr_schedule: constant
  loss_agg: token-mean
  ratio_level: token
  agent_balance: none
  kl_type: k3
  rollout_is: none
  clip_c: 0
  entropy_coef: 0
`)
	if !slices.Equal(def, explicit) {
		t.Errorf("the defaults written out train other weights:\n%v\n%v", def, explicit)
	}
	for _, c := range []struct {
		keys string
		acts bool // changes the weights of this run (else: runs, e.g. a correction with nothing to correct)
	}{
		{"  lr_schedule: cosine\n  lr_warmup_steps: 1\n", true},
		{"  loss_agg: seq-mean-token-mean\n", true},
		{"  loss_agg: seq-mean-token-sum-norm\n  loss_norm_len: 16\n", true},
		{"  clip_c: 3\n", false},
		{"  ratio_level: sequence\n", true},
		{"  entropy_coef: 0.01\n", true},
		{"  agent_balance: inverse_count\n", true},
		{"  kl_coef: 0.1\n  kl_type: k1\n", true},
		{"  rollout_is: token\n", false},
		{"  rollout_is: sequence\n  rollout_is_mode: mask\n", false},
	} {
		got, cfgFile, store := stepFiles(t, c.keys)
		if changed := !slices.Equal(got, def); c.acts && !changed {
			t.Errorf("%s: trained the default run's weights", strings.TrimSpace(c.keys))
		}
		if c.keys == "  rollout_is: token\n" {
			// The metrics view has the objective's columns, the correction's filled.
			out, errOut, err := execute(t, "-q", "--config", cfgFile, "--store", store, "analyze", "--sql",
				"SELECT count(*) AS n FROM metrics WHERE rollout_is_mean IS NOT NULL AND clip_frac_low IS NOT NULL AND response_len_max > 0")
			if err != nil || !strings.Contains(out, "\n6\n(1 rows)") {
				t.Errorf("metrics view: %v\n%s%s", err, out, errOut)
			}
		}
	}
	// Dynamic sampling, from the environment (the config's rollout section is the base's).
	t.Setenv("DRMAS_ROLLOUT_FILTER_GROUPS", "true")
	t.Setenv("DRMAS_ROLLOUT_MAX_OVERSAMPLE", "3")
	stepFiles(t, "")
}
