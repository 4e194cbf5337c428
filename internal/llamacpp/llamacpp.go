// Package llamacpp runs llama.cpp's greedy decode of a GGUF model through node-llama-cpp (an
// oracle that .ci/install-oracles.sh installs under $DRMAS_TOOLS/llamacpp), for the GGUF tests
// and `make bench-llamacpp`. It is never a runtime dependency of drmas.
package llamacpp

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed decode.mjs
var script []byte

// Request is one llama.cpp session: the model is loaded once, then for each batch size b
// prompts[0..b) are decoded together Reps times.
type Request struct {
	Model   string    `json:"model"`
	Prompts [][]int32 `json:"prompts"`
	New     int       `json:"new"`     // tokens generated per prompt
	Threads int       `json:"threads"` // llama.cpp's threads
	Reps    int       `json:"reps"`
	Batches []int     `json:"batches"`
	KV      string    `json:"kv"` // KV cache type: "F32" (default) or "F16"

	// Log, when set, receives the script's progress lines and llama.cpp's log as they come.
	Log io.Writer `json:"-"`
}

// Run is one batch size's measurements.
type Run struct {
	Batch      int       `json:"batch"`
	Seconds    []float64 `json:"seconds"`     // wall time of prompt + decode, per repetition
	CPUSeconds []float64 `json:"cpu_seconds"` // the node process's CPU time, per repetition
	Tokens     [][]int32 `json:"tokens"`      // the last repetition's greedy tokens, per prompt
}

// Response is what the script prints.
type Response struct {
	Runs []Run `json:"runs"`
}

// ErrMissing is returned when node or node-llama-cpp is not installed.
var ErrMissing = errors.New("llama.cpp oracle not installed (run: bash .ci/install-oracles.sh)")

// Modules is the node_modules folder .ci/install-oracles.sh fills with node-llama-cpp:
// $DRMAS_TOOLS/llamacpp/node_modules (default ~/.cache/drmas-tools).
func Modules() string {
	tools := os.Getenv("DRMAS_TOOLS")
	if tools == "" {
		home, _ := os.UserHomeDir()
		tools = filepath.Join(home, ".cache", "drmas-tools")
	}
	return filepath.Join(tools, "llamacpp", "node_modules")
}

// Available reports why the oracle cannot run (wrapping ErrMissing), or nil.
func Available() error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("%w: node: %v", ErrMissing, err)
	}
	if _, err := os.Stat(filepath.Join(Modules(), "node-llama-cpp", "package.json")); err != nil {
		return fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return nil
}

// Decode runs the request in a node process; what it writes to stderr is in the error.
func Decode(ctx context.Context, req Request) (Response, error) {
	if err := Available(); err != nil {
		return Response{}, err
	}
	if req.KV == "" {
		req.KV = "F32"
	}
	dir, err := os.MkdirTemp("", "llamacpp")
	if err != nil {
		return Response{}, err
	}
	defer os.RemoveAll(dir)
	in, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	for name, data := range map[string][]byte{"decode.mjs": script, "request.json": in} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return Response{}, err
		}
	}
	// ES modules resolve packages from the script's folder upwards, not NODE_PATH.
	if err := os.Symlink(Modules(), filepath.Join(dir, "node_modules")); err != nil {
		return Response{}, err
	}
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "decode.mjs"), filepath.Join(dir, "request.json"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if req.Log != nil {
		cmd.Stderr = io.MultiWriter(&stderr, req.Log)
	}
	out, err := cmd.Output()
	if err != nil {
		return Response{}, fmt.Errorf("llamacpp: node decode.mjs: %w\n%s", err, stderr.Bytes())
	}
	var resp Response
	if err := json.Unmarshal(out, &resp); err != nil {
		return Response{}, fmt.Errorf("llamacpp: node decode.mjs printed %q: %w", out, err)
	}
	return resp, nil
}
