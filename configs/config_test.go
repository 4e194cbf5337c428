package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func noEnv(string) (string, bool) { return "", false }

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if c.Run != "demo" || c.Workflow.Name != "math" || c.Agents["solver"].Model != "m1" || c.Models["m1"].Dim != 64 {
		t.Fatalf("unexpected default: %+v", c)
	}
	if c.Normalize.Eps != 1e-6 || c.Learn.ClipLow != 0.2 {
		t.Fatalf("numbers not decoded: %+v %+v", c.Normalize, c.Learn)
	}
}

func TestExampleConfigsLoad(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	if len(files) < 3 {
		t.Fatalf("want the default and example configs, found %v", files)
	}
	for _, f := range files {
		if _, err := Load(LoadOptions{File: f, LookupEnv: noEnv}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestUnknownKeysNamed(t *testing.T) {
	p := write(t, "bad.yaml", "run: x\nlearn:\n  lr: 0.1\n  lrr: 0.2\nagents:\n  solver: {model: m1, temprature: 1}\nmodels:\n  m1: {dim: 8, layers: 1, heads: 2, context: 16, ff_mult: 2}\nbogus: 1\n")
	_, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{p, "unknown key learn.lrr", "unknown key agents.solver.temprature", "unknown key bogus"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestPrecedence(t *testing.T) {
	p := write(t, "c.yaml", "run: fromfile\nstore: /tmp/file\nlearn: {lr: 0.5}\nmodels:\n  big: {dim: 16, layers: 1, heads: 2, context: 32, ff_mult: 2}\nagents:\n  solver: {model: big}\n  verifier: {model: big}\n")
	env := map[string]string{"DRMAS_RUN": "fromenv", "DRMAS_LEARN_LR": "0.25"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("run", "", "")
	fs.String("store", "", "")
	if err := fs.Parse([]string{"--run", "fromflag"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{File: p, Flags: fs, LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if c.Run != "fromflag" || c.Learn.LR != 0.25 || c.Store != "/tmp/file" {
		t.Fatalf("precedence broken: run=%s lr=%v store=%s", c.Run, c.Learn.LR, c.Store)
	}
	if c.Warmup.Steps != Default().Warmup.Steps {
		t.Fatalf("unset key lost its default: %d", c.Warmup.Steps)
	}
	if len(c.Agents) != 2 || len(c.Models) != 1 {
		t.Fatalf("file maps must replace default maps, got agents %v models %v", c.AgentNames(), c.ModelNames())
	}
}

func TestValidateReportsEverything(t *testing.T) {
	p := write(t, "v.yaml", `run: "../x"
models:
  m1: {dim: 10, layers: 1, heads: 4, context: 16, ff_mult: 2}
agents:
  solver: {model: m1, lr: 0.1}
  verifier: {model: m1, lr: 0.2}
  critic: {model: m9}
rollout: {group_size: 0}
`)
	_, err := Load(LoadOptions{File: p, LookupEnv: noEnv})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"contains ..", "dim 10 is not a multiple of heads 4", `agents.critic.model: "m9" is not in models`, "share model m1", "lr 0.1 vs 0.2", "group_size"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestRunNamesRejected(t *testing.T) {
	for _, run := range []string{"", "a/b", "..", "a..b", "/abs", ".hidden"} {
		env := map[string]string{"DRMAS_RUN": run}
		_, err := Load(LoadOptions{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		if err == nil {
			t.Errorf("run %q accepted", run)
		}
	}
}

func TestRedacted(t *testing.T) {
	c := Default()
	c.S3.SecretKey = "supersecret"
	c.S3.AccessKey = "AKIAXXXX"
	r := c.Redacted()
	if r.S3.SecretKey != "<redacted>" || r.S3.AccessKey != "<redacted>" || c.S3.SecretKey != "supersecret" {
		t.Fatal("redaction wrong")
	}
}

// TestSyntaxErrorsNameTheLine: JSON and TOML syntax errors say where (YAML's already did).
func TestSyntaxErrorsNameTheLine(t *testing.T) {
	for name, c := range map[string]struct{ body, where string }{
		"c.json": {"{\n  \"run\": \"x\",\n  \"seed\": 1,,\n}\n", "line 3, column 13"},
		"d.json": {"{\"run\": \"x\", \"seed\": 1\n", "line 1, column 23"},
		"c.toml": {"run = \"x\"\nseed = \n", "line 2, column 8"},
		"é.json": {"{\"run\": \"é\", x}", "line 1, column 14"}, // runes, not bytes (é is two),
	} {
		_, err := Load(LoadOptions{File: write(t, name, c.body), LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), name+", "+c.where+":") {
			t.Errorf("%s: %v, want it to say %s", name, err, c.where)
		}
	}
}
