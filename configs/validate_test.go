package configs

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestNonFiniteNumbersRejected(t *testing.T) {
	p := write(t, "nan.yaml", `models:
  m1: {dim: 16, layers: 1, heads: 2, context: 32, ff_mult: 2}
agents:
  solver: {model: m1, lr: .nan}
rollout: {temperature: .inf}
evaluate: {top_p: .nan}
normalize: {eps: .nan}
`)
	env := map[string]string{"DRMAS_LEARN_KL_COEF": "nan", "DRMAS_LEARN_WEIGHT_DECAY": "NaN", "DRMAS_WARMUP_LR": "+Inf"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	_, err := Load(LoadOptions{File: p, LookupEnv: lookup})
	if err == nil {
		t.Fatal("non-finite numbers accepted")
	}
	for _, key := range []string{"learn.kl_coef: NaN", "learn.weight_decay: NaN", "warmup.lr: +Inf", "agents.solver.lr: NaN", "rollout.temperature: +Inf", "evaluate.top_p: NaN", "normalize.eps: NaN"} {
		if n := strings.Count(err.Error(), key+" is not a finite number"); n != 1 {
			t.Errorf("%q reported %d times, want once: %v", key, n, err)
		}
	}
	// Every float of the config is checked, including those with no range check.
	c := Default()
	c.Workflow.HardFrac = math.Inf(-1)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "workflow.hard_frac: -Inf is not a finite number") {
		t.Errorf("hard_frac -Inf: %v", err)
	}
}

func TestDigestDoesNotPanicOnNaN(t *testing.T) {
	c := Default()
	want := Digest(c.Learn)
	c.Learn.KLCoef = math.NaN()
	got := Digest(c.Learn)
	if got == "" || got == want {
		t.Fatalf("digest of a NaN section: %q (finite: %q)", got, want)
	}
	if again := Digest(c.Learn); again != got {
		t.Fatalf("digest of a NaN section is not stable: %q, %q", got, again)
	}
}

func TestUnknownEstimatorsRejected(t *testing.T) {
	p := write(t, "est.yaml", "normalize: {estimators: [drmas, nope, grpo, drmas_eps1e-6]}\nlearn: {estimator: nope2}\n")
	_, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err == nil {
		t.Fatal("unknown estimators accepted")
	}
	for _, want := range []string{
		`normalize.estimators[1]: unknown estimator "nope" (want grpo, drmas`,
		`normalize.estimators[3]: drmas is listed twice`,
		`learn.estimator: unknown estimator "nope2" (want grpo, drmas`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "normalize.estimators[2]") || strings.Contains(err.Error(), "estimators:") {
		t.Errorf("error blames a good estimator or names a package: %v", err)
	}
	ok := write(t, "ok.yaml", "normalize: {estimators: [drmas, grpo_step_nostd, rloo_agent, drgrpo, drmas_eps1e-4]}\nlearn: {estimator: drgrpo}\n")
	if _, err := Load(LoadOptions{File: ok, LookupEnv: noEnv}); err != nil {
		t.Fatal(err)
	}
	// An ε spelled out is that ε, also when it is the default and normalize.eps is another.
	eps := write(t, "eps.yaml", "normalize: {eps: 1.0e-8, estimators: [drmas, drmas_eps1e-6]}\n")
	if _, err := Load(LoadOptions{File: eps, LookupEnv: noEnv}); err != nil {
		t.Fatalf("drmas with ε 1e-8 and drmas_eps1e-6 are two estimators: %v", err)
	}
}

func TestBadEnvValueNamesTheVariable(t *testing.T) {
	p := write(t, "ok.yaml", "run: fromfile\n")
	env := map[string]string{"DRMAS_LEARN_LR": "abc"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	_, err := Load(LoadOptions{File: p, LookupEnv: lookup})
	if want := `DRMAS_LEARN_LR="abc": learn.lr: not a decimal number (e.g. 0.001 or 1e-3)`; err == nil || err.Error() != want {
		t.Fatalf("want %q, got %v", want, err)
	}
	// Every bad variable, one line each, and the file's own problems too.
	bad := write(t, "bad.yaml", "rollout: {group_size: 0}\n")
	env = map[string]string{"DRMAS_SEED": "-1", "DRMAS_S3_INSECURE": "maybe", "DRMAS_LEARN_EPOCHS": "1.5"}
	_, err = Load(LoadOptions{File: bad, LookupEnv: lookup})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`DRMAS_SEED="-1": seed: not an integer ≥ 0`,
		`DRMAS_S3_INSECURE="maybe": s3.insecure: not true or false`,
		`DRMAS_LEARN_EPOCHS="1.5": learn.epochs: not an integer`,
		"config " + bad + ": rollout.group_size: 0, want ≥ 1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestOverrides(t *testing.T) {
	env := map[string]string{"DRMAS_RUN": "fromenv", "DRMAS_LEARN_LR": "0.25", "DRMAS_S3_SECRET_KEY": "s3cr3t", "DRMAS_NOPE": "1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("run", "", "")
	fs.String("store", "", "")
	if err := fs.Parse([]string{"--run", "fromflag"}); err != nil {
		t.Fatal(err)
	}
	got := Overrides(LoadOptions{Flags: fs, LookupEnv: lookup})
	want := map[string]string{"DRMAS_RUN": "fromflag", "DRMAS_LEARN_LR": "0.25"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestConfigFileFormats(t *testing.T) {
	for name, body := range map[string]string{
		"c.yaml": "run: y\n",
		"c.yml":  "run: y\n",
		"C.YAML": "run: y\n",
		"c.json": `{"run": "y"}`,
		"c.toml": "run = \"y\"\n",
	} {
		c, err := Load(LoadOptions{File: write(t, name, body), LookupEnv: noEnv})
		if err != nil || c.Run != "y" {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, p := range []string{"/dev/stdin", write(t, "c.ini", "run = y\n"), write(t, "config", "run: y\n")} {
		_, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
		if want := "config " + p + ": unknown format: name the file .yaml, .yml, .json or .toml"; err == nil || err.Error() != want {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

// TestModelNamesFoldCase: a file that names a model M1 and refers to it as M1 loads (viper folds
// keys to lower case, so the reference is folded too); a reference to a model that is not
// there is still an error.
func TestModelNamesFoldCase(t *testing.T) {
	p := write(t, "case.yaml", "models:\n  Big: {dim: 32, layers: 1, heads: 2, context: 128, ff_mult: 4, tied_head: true}\nagents:\n  solver: {model: Big}\n  verifier: {model: Big}\n")
	cfg, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agents["solver"].Model != "big" || cfg.Models["big"].Dim != 32 {
		t.Fatalf("agents %+v, models %+v", cfg.Agents, cfg.Models)
	}
	bad := write(t, "bad.yaml", "models:\n  Big: {dim: 32, layers: 1, heads: 2, context: 128, ff_mult: 4, tied_head: true}\nagents:\n  solver: {model: Small}\n  verifier: {model: Big}\n")
	if _, err := Load(LoadOptions{File: bad, LookupEnv: noEnv}); err == nil || !strings.Contains(err.Error(), `agents.solver.model: "Small" is not in models`) {
		t.Fatalf("a reference to no model: %v", err)
	}
}

// TestProblemsNameTheirKeyAndSource: each range problem names its key and value; unknown keys
// come with a suggestion and in the same report as the value problems; a value set by a flag
// or a variable is not blamed on the file alone; a NaN is not also an optimizer mismatch.
func TestProblemsNameTheirKeyAndSource(t *testing.T) {
	p := write(t, "bad.yaml", `models:
  m1: {dim: 16, layers: 1, heads: 0, context: 32, ff_mult: 2}
agents:
  solver: {model: m1, micro_batch: -1}
  verifier: {model: m1, micro_batch: -1}
learn: {epochs: 0, weigth_decay: 0.1}
warmup: {noise: 2}
evaluate: {k: 0}
rolout: {parts: 2}
`)
	env := map[string]string{"DRMAS_LEARN_LR": "NaN"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("run", "", "")
	if err := fs.Parse([]string{"--run", "My Run"}); err != nil {
		t.Fatal(err)
	}
	_, err := Load(LoadOptions{File: p, LookupEnv: lookup, Flags: fs})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"config " + p + ": unknown key learn.weigth_decay (did you mean learn.weight_decay?)",
		"unknown key rolout (did you mean rollout?)",
		"config " + p + " as overridden by DRMAS_LEARN_LR, --run: ",
		`run: run name "My Run"`,
		"learn.lr: NaN is not a finite number",
		"models.m1.heads: 0, want > 0",
		"agents.solver.micro_batch (own, or learn.micro_batch): -1, want > 0",
		"learn.epochs: 0, want ≥ 1",
		"warmup.noise: 2, want in [0, 1]",
		"evaluate.k: 0, want ≥ 1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, not := range []string{"optimizer settings differ", "models.m1.dim", "is not a multiple"} {
		if strings.Contains(err.Error(), not) {
			t.Errorf("error has %q:\n%v", not, err)
		}
	}
}

func TestConfigFolderNamed(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(LoadOptions{File: dir, LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), "config "+dir+" is a folder: give a file in it") {
		t.Fatalf("a folder as --config: %v", err)
	}
}

// TestUnknownKeySuggestionsMakeSense: a suggestion is a key the unknown one begins (kl:
// kl_coef, not lr, one edit away) or a near spelling of it, never a key with nothing in common
// (a top-level lr is not "s3", though two edits make one of the other).
func TestUnknownKeySuggestionsMakeSense(t *testing.T) {
	p := write(t, "keys.yaml", "lr: 0.1\nlearn: {kl: 0.1}\nrollout: {grop_size: 4}\n")
	_, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"unknown key learn.kl (did you mean learn.kl_coef?)",
		"unknown key rollout.grop_size (did you mean rollout.group_size?)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "unknown key lr (") {
		t.Errorf("a suggestion for lr, which resembles no key:\n%v", err)
	}
}

// TestFileValuesAreNotSilentlyChanged: a value of a config file that the weak decoder would
// turn into another one (a fraction or a boolean for an integer, a negative seed, a bare number
// for a duration, no value at all) is an error naming its key, with the decoder's own
// complaints, and nothing is loaded.
func TestFileValuesAreNotSilentlyChanged(t *testing.T) {
	p := write(t, "types.yaml", `seed: -3
iterations: [1, 2]
learn: {epochs: 1.5, micro_batch: 2.9, lr: true}
rollout: {parts: true, max_tokens: 1e30}
s3: {insecure: 1}
run: false
warmup:
  lr:
models:
  m1: {dim: 64, layers: 3, heads: 4, context: 128, ff_mult: 4, backend: openai, openai: {endpoint: "http://x", timeout: 120}}
agents:
  solver: {model: m1}
  verifier: {model: m1}
`)
	_, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err == nil {
		t.Fatal("values that decode to something else accepted")
	}
	for _, want := range []string{
		"seed: -3, want an integer ≥ 0",
		"learn.epochs: 1.5 is not an integer",
		"learn.micro_batch: 2.9 is not an integer",
		"learn.lr: true, want a number",
		"rollout.parts: true, want an integer",
		"rollout.max_tokens: 1e+30 is out of range",
		"s3.insecure: 1, want true or false",
		"run: false, want a string: quote it",
		"warmup.lr has no value",
		"models.m1.openai.timeout: 120, want a duration with its unit",
		"'iterations' expected type 'int'",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	// JSON numbers are floats: whole ones are integers, the digits of a large one must be quoted.
	ok := write(t, "ok.json", `{"seed": "18446744073709551615", "learn": {"epochs": 2}, "models": {"m1": {"dim": 64, "layers": 3, "heads": 4, "context": 128, "ff_mult": 4, "backend": "openai", "openai": {"endpoint": "http://x", "timeout": "2m"}}}}`)
	if c, err := Load(LoadOptions{File: ok, LookupEnv: noEnv}); err != nil || c.Seed != math.MaxUint64 || c.Learn.Epochs != 2 || c.Models["m1"].OpenAI.Timeout != 2*time.Minute {
		t.Errorf("whole JSON numbers: %+v %v", c, err)
	}
	inexact := write(t, "inexact.json", `{"seed": 9007199254740993}`)
	if _, err := Load(LoadOptions{File: inexact, LookupEnv: noEnv}); err == nil || !strings.Contains(err.Error(), "seed: 9.007199254740992e+15 is not exact as a number: quote it") {
		t.Errorf("a seed JSON cannot hold: %v", err)
	}
	okYAML := write(t, "ok.yaml", "seed: 18446744073709551615\n")
	if c, err := Load(LoadOptions{File: okYAML, LookupEnv: noEnv}); err != nil || c.Seed != math.MaxUint64 {
		t.Errorf("largest seed: %v", err)
	}
}

// TestHiddenKeysRejected: what viper's reading would drop without a word (keys that differ
// only in case, of which one silently wins; a JSON key given twice; a second YAML document) is
// an error naming the keys, in every format.
func TestHiddenKeysRejected(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"case.yaml":  {"learn:\n  lr: 0.1\nLearn:\n  epochs: 7\n", "keys Learn and learn differ only in case"},
		"leaf.yaml":  {"learn:\n  lr: 0.1\n  LR: 0.2\n", "keys learn.LR and learn.lr differ only in case"},
		"case.toml":  {"[learn]\nlr = 0.1\n[Learn]\nepochs = 7\n", "keys Learn and learn differ only in case"},
		"case.json":  {`{"run": "a", "RUN": "b"}`, "keys RUN and run differ only in case"},
		"dup.json":   {`{"learn": {"lr": 0.1, "epochs": 1, "lr": 0.2}}`, "key learn.lr is given twice"},
		"multi.yaml": {"run: a\n---\nrun: b\n", "more than one YAML document"},
	} {
		_, err := Load(LoadOptions{File: write(t, name, c.body), LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %q, got %v", name, c.want, err)
		}
	}
	// A file that ends its one document with --- or ... is one document.
	if _, err := Load(LoadOptions{File: write(t, "end.yaml", "---\nrun: a\n...\n"), LookupEnv: noEnv}); err != nil {
		t.Errorf("one document with markers: %v", err)
	}
}

// TestUnusedModelRejected: a model no agent names is refused up front; warm-up would otherwise
// train the models before it, then fail on it.
func TestUnusedModelRejected(t *testing.T) {
	c := Default()
	c.Models["spare"] = c.Models["m1"]
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "models.spare: no agent uses it") {
		t.Fatalf("unused model: %v", err)
	}
}

// TestNumbersAreReadAsWritten: a number is what its decimal digits say, wherever it comes
// from. The decoder parses strings in Go syntax (010 is octal 8, 0x2 is 2, 1_0 is 10, 0x1p-3 a
// hex float; an empty string is 0) and YAML reads a plain 010 as octal 8: each is an error
// naming the key and what to write, and plain decimals keep working.
func TestNumbersAreReadAsWritten(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	for _, c := range []struct{ key, val, want string }{
		{"DRMAS_LEARN_EPOCHS", "010", `DRMAS_LEARN_EPOCHS="010": learn.epochs: a leading zero makes it octal: write 10`},
		{"DRMAS_SEED", "0042", `DRMAS_SEED="0042": seed: a leading zero makes it octal: write 42`},
		{"DRMAS_SEED", "0x2", "seed: not an integer: write decimal digits"},
		{"DRMAS_SEED", "+5", "seed: write it without the +"},
		{"DRMAS_LEARN_EPOCHS", "+5", "learn.epochs: write it without the +"},
		{"DRMAS_SEED", "18446744073709551616", "seed: out of range for a 64-bit integer"},
		{"DRMAS_ITERATIONS", "99999999999999999999", "iterations: out of range for a 64-bit integer"},
		{"DRMAS_LEARN_LR", "1e400", "learn.lr: out of range for a float64"},
		{"DRMAS_SEED", "-5", "seed: not an integer ≥ 0"},
		{"DRMAS_SEED", "", `DRMAS_SEED="": seed: empty: give a value`},
		{"DRMAS_LEARN_LR", "1_0", "learn.lr: not a decimal number"},
		{"DRMAS_LEARN_LR", "0x1p-3", "learn.lr: not a decimal number"},
		{"DRMAS_LEARN_KL_COEF", "", "learn.kl_coef: empty"},
		{"DRMAS_S3_INSECURE", "", "s3.insecure: empty"},
		{"DRMAS_S3_INSECURE", "yes", "s3.insecure: not true or false"},
	} {
		_, err := Load(LoadOptions{LookupEnv: env(c.key, c.val)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%q: want %q, got %v", c.key, c.val, c.want, err)
		}
	}
	c, err := Load(LoadOptions{LookupEnv: env("DRMAS_SEED", "42", "DRMAS_LEARN_LR", "1e-3",
		"DRMAS_LEARN_EPOCHS", "3", "DRMAS_LEARN_WEIGHT_DECAY", "0", "DRMAS_S3_INSECURE", "1",
		"DRMAS_LEARN_CLIP_LOW", "0.25")})
	if err != nil || c.Seed != 42 || c.Learn.LR != 1e-3 || c.Learn.Epochs != 3 || c.Learn.WeightDecay != 0 || !c.S3.Insecure || c.Learn.ClipLow != 0.25 {
		t.Fatalf("plain decimals: %+v %v", c, err)
	}

	// A flag's string is read the same way (cmd/drmas binds --seed as a string for this).
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("seed", "", "")
	if err := fs.Parse([]string{"--seed", "010"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(LoadOptions{Flags: fs, LookupEnv: noEnv}); err == nil || !strings.Contains(err.Error(), `--seed "010": a leading zero makes it octal: write 10`) {
		t.Errorf("--seed 010: %v", err)
	}

	p := write(t, "octal.yaml", "seed: 010\nlearn:\n  epochs: \"010\"\n  lr: 010\n  micro_batch: -0_7\n  mini_batches: \"1_0\"\nrollout:\n  max_tokens: \"\"\n")
	_, err = Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err == nil {
		t.Fatal("octal and Go-syntax numbers accepted")
	}
	for _, want := range []string{
		"seed: 010 is read as octal in YAML: write 10 (or 0o10 for octal)",
		"learn.lr: 010 is read as octal in YAML: write 10",
		"learn.micro_batch: -0_7 is read as octal in YAML: write -7",
		`learn.epochs: "010": a leading zero makes it octal: write 10`,
		`learn.mini_batches: "1_0": not an integer`,
		`rollout.max_tokens: "": empty`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	// Each problem once: the decoder does not repeat what the checks reported.
	if strings.Contains(err.Error(), "decoding failed") || strings.Count(err.Error(), "learn.epochs") != 1 {
		t.Errorf("a problem reported twice:\n%v", err)
	}
	// YAML's explicit spellings and plain numbers are read as they say.
	ok := write(t, "ok.yaml", "seed: 0o10\nlearn:\n  epochs: 0x2\n  lr: 0.001\n  micro_batch: 4\n  mini_batches: \"3\"\n")
	if c, err := Load(LoadOptions{File: ok, LookupEnv: noEnv}); err != nil || c.Seed != 8 || c.Learn.Epochs != 2 || c.Learn.LR != 0.001 || c.Learn.MiniBatches != 3 {
		t.Errorf("explicit YAML numbers: %+v %v", c, err)
	}
}

// TestWorkflowCheckedWithTheConfig: the workflow's name, its options and its agents are
// checked when the config loads (so `drmas config show` and every command refuse them before
// any work), each with the config's other problems.
func TestWorkflowCheckedWithTheConfig(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"name.yaml":  {"workflow: {name: maths}\n", `workflow.name: "maths", want one of math, math_critic, program, search`},
		"loop.yaml":  {"workflow: {max_loop: 9, top_k: 0, hard_frac: 1.5}\n", "workflow.max_loop: 9, want 1..8\nworkflow.top_k: 0, want 1..2 to fit the prompt budget\nworkflow.hard_frac: 1.5, want 0..1"},
		"zero.yaml":  {"workflow: {max_steps: 0, corpus_people: 5}\n", "workflow.max_steps: 0, want 1..8\nworkflow.corpus_people: 5, want 13..2000"},
		"extra.yaml": {"agents:\n  solver: {model: m1}\n  verifier: {model: m1}\n  critic: {model: m1}\n", "agents.critic: workflow math has no such agent (its agents: solver, verifier)"},
		"missing.yaml": {"workflow: {name: search}\nagents:\n  router: {model: m1}\n  searcher: {model: m1}\n",
			"workflow search needs agents router, searcher, answerer, but the config has no agents.answerer entry (it has router, searcher)"},
	} {
		_, err := Load(LoadOptions{File: write(t, name, c.body+"learn: {epochs: 0}\n"), LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "learn.epochs: 0, want ≥ 1") {
			t.Errorf("%s: want %q with the other problems, got %v", name, c.want, err)
		}
	}
	if _, err := Load(LoadOptions{File: "search.yaml", LookupEnv: noEnv}); err != nil {
		t.Errorf("search example: %v", err)
	}
}

// TestNumberForStringRefused: a number where a string is wanted is refused, not read back in
// Go's shortest form (run: 1.50 would be the run "1.5", run: 0x1F the run "31").
func TestNumberForStringRefused(t *testing.T) {
	for _, body := range []string{"run: 1.50", "run: 0x1F", "run: 1_000", `{"run": 1.0}`} {
		name := "c.yaml"
		if strings.HasPrefix(body, "{") {
			name = "c.json"
		}
		_, err := Load(LoadOptions{File: write(t, name, body), LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), "want a string: quote it") {
			t.Errorf("%q: %v", body, err)
		}
	}
}

// TestYAMLOctalReportedOnce: a YAML integer with a leading zero is reported once, as written,
// not again as the octal value the parser made of it (seed: -010 is not also "-8, want ≥ 0").
func TestYAMLOctalReportedOnce(t *testing.T) {
	for _, body := range []string{"seed: -010", "iterations: -010\ns3:\n  max_retries: -07", "bogus: 010\nseed: -010", "normalize:\n  estimators: [010]\nseed: -010"} {
		_, err := Load(LoadOptions{File: write(t, "c.yaml", body), LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), "is read as octal") {
			t.Fatalf("%q: %v", body, err)
		}
		for _, bad := range []string{"-8", ": -7,", "want an integer ≥ 0", "< 0", "want ≥ 0"} {
			if strings.Contains(err.Error(), bad) {
				t.Errorf("%q: reported again as the octal value:\n%v", body, err)
				break
			}
		}
	}
	if _, err := Load(LoadOptions{File: write(t, "z.yaml", "iterations: 00\n"), LookupEnv: noEnv}); err == nil || !strings.Contains(err.Error(), "iterations: 00 is read as octal in YAML: write 0 (or 0o0 for octal") {
		t.Errorf("00: %v", err)
	}
}

// TestYAMLOctalForTextSaysQuoteIt: a leading-zero number for a text key (a run name, a model's
// name, an estimator) is read as an octal number; the error says to quote it, and for a
// number key to write it without the zero; an unknown key gets both.
func TestYAMLOctalForTextSaysQuoteIt(t *testing.T) {
	for body, want := range map[string]string{
		"run: 010":                                        `run: 010 is read as an octal number in YAML: quote it ("010") for the text`,
		"normalize:\n  estimators: [drmas, 0_7]":          `normalize.estimators[1]: 0_7 is read as an octal number in YAML: quote it ("0_7") for the text`,
		"models:\n  Big:\n    OpenAI:\n      model: 0100": `models.Big.OpenAI.model: 0100 is read as an octal number in YAML: quote it ("0100") for the text`,
		"agents:\n  solver:\n    lr: 01":                  "agents.solver.lr: 01 is read as octal in YAML: write 1 (or 0o1 for octal)",
		"Learn:\n  Epochs: -02":                           "Learn.Epochs: -02 is read as octal in YAML: write -2 (or -0o2 for octal)",
		"learn:\n  bogus: 010":                            "learn.bogus: 010 is read as octal in YAML: write 10 (or 0o10 for octal; quote it for text)",
	} {
		_, err := Load(LoadOptions{File: write(t, "c.yaml", body), LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v\nwant %s", body, err, want)
		}
	}
	if ty := fieldAt(reflect.TypeOf(Config{}), "agents.x.clip_high"); ty == nil || ty.Kind() != reflect.Float64 {
		t.Errorf("agents.x.clip_high: %v", ty)
	}
	for _, p := range []string{"seed[0]", "learn.lr.x", "models", "nope", ""} {
		if ty := fieldAt(reflect.TypeOf(Config{}), p); p != "models" && ty != nil || p == "models" && (ty == nil || ty.Kind() != reflect.Map) {
			t.Errorf("%q: %v", p, ty)
		}
	}
}

// TestTemperaturesFitFloat32: sampling runs in float32, so a rollout temperature that rounds
// to 0 (greedy, which "> 0" forbids) or overflows (+Inf, an error only when sampling starts)
// is refused when the config loads, and so is an evaluation temperature that overflows.
func TestTemperaturesFitFloat32(t *testing.T) {
	for body, want := range map[string]string{
		"rollout: {temperature: 1e-50}\n": "rollout.temperature: 1e-50, want > 0 and within float32",
		"rollout: {temperature: 1e300}\n": "rollout.temperature: 1e+300, want > 0 and within float32",
		"evaluate: {temperature: 1e39}\n": "evaluate.temperature: 1e+39, want ≥ 0 and at most 3.4e38",
		"rollout: {temperature: -1}\n":    "rollout.temperature: -1, want > 0",
		"evaluate: {temperature: -0.5}\n": "evaluate.temperature: -0.5, want ≥ 0",
	} {
		if _, err := Load(LoadOptions{File: write(t, "t.yaml", body), LookupEnv: noEnv}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", body, want, err)
		}
	}
	if _, err := Load(LoadOptions{File: write(t, "ok.yaml", "rollout: {temperature: 1e-40}\nevaluate: {temperature: 0}\n"), LookupEnv: noEnv}); err != nil {
		t.Errorf("temperatures float32 holds: %v", err)
	}
}

// TestTinyEpsRefused: ε below estimators.MinEps (in normalize.eps or an estimator's _eps suffix)
// would turn scores closer than about 1e-154 (σ = 0 in float64) into huge advantages.
func TestTinyEpsRefused(t *testing.T) {
	for body, want := range map[string]string{
		"normalize: {eps: 1.0e-200}\n":                       "normalize.eps: 1e-200, want ≥ 1e-100",
		"normalize: {eps: 0}\n":                              "normalize.eps: 0, want ≥ 1e-100",
		"normalize: {estimators: [drmas, grpo_eps1e-150]}\n": `normalize.estimators[1]: estimator "grpo_eps1e-150": eps must be a finite number ≥ 1e-100`,
	} {
		if _, err := Load(LoadOptions{File: write(t, "e.yaml", body), LookupEnv: noEnv}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", body, want, err)
		}
	}
	if _, err := Load(LoadOptions{File: write(t, "ok.yaml", "normalize: {eps: 1.0e-100, estimators: [drmas, grpo_eps1e-100]}\n"), LookupEnv: noEnv}); err != nil {
		t.Errorf("ε = 1e-100: %v", err)
	}
}

// TestTopK: top_k is refused below 0 with the key named, and at 0 (off) it leaves the rollout
// section's digest as it was before the key existed (omitempty); set, it changes it.
func TestTopK(t *testing.T) {
	c := Default()
	c.Rollout.TopK, c.Evaluate.TopK = -1, -3
	err := c.Validate()
	for _, key := range []string{"rollout.top_k", "evaluate.top_k"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("negative %s: %v", key, err)
		}
	}
	c = Default()
	off := Digest(c.Rollout)
	if data, _ := json.Marshal(c.Rollout); strings.Contains(string(data), "top_k") {
		t.Errorf("rollout section with top_k 0 encodes top_k: %s", data)
	}
	c.Rollout.TopK = 20
	if Digest(c.Rollout) == off {
		t.Error("top_k 20 leaves the rollout digest unchanged")
	}
}
