package hf

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/model"
)

// measuredSpec is the model TestStepMemoryMeasured trains: a Qwen3 whose activations, head
// and weights are all a sizeable share of a step.
var measuredSpec = InitSpec{Arch: "qwen3", Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Intermediate: 384, Vocab: 8192, MaxPositions: 4096}

// measuredCase is one step TestStepMemoryMeasured measures: seqs sequences of 1,024 tokens of
// measuredSpec with layers layers, with or without activation checkpointing.
type measuredCase struct {
	seqs, layers int
	ckpt         bool
}

func (c measuredCase) spec() InitSpec {
	s := measuredSpec
	s.Layers = c.layers
	return s
}

// TestStepMemoryMeasured: the peak of one full AdamW training step (forward, backward,
// optimizer) measured in a child process whose collector runs at GOGC=10 (so that its peak
// resident memory is about the Go heap's high-water mark), less the child's memory before the
// model exists, lies within ±25 % of the estimate, at micro-batches of 2 and 8 sequences of
// 1,024 tokens: StepOf's for 2 layers, and CheckpointedStepOf's with activation checkpointing
// for 8 layers, whose peak also lies below three quarters of StepOf's estimate without.
func TestStepMemoryMeasured(t *testing.T) {
	if spec := os.Getenv("DRMAS_STEP_MEMORY_CHILD"); spec != "" {
		stepMemoryChild(t, spec)
		return
	}
	if testing.Short() {
		t.Skip("trains a model in a child process")
	}
	for _, c := range []measuredCase{{2, 2, false}, {8, 2, false}, {2, 8, true}, {8, 8, true}} {
		cfg, err := NewConfig(c.spec())
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestStepMemoryMeasured$", "-test.v")
		cmd.Env = append(os.Environ(), fmt.Sprintf("DRMAS_STEP_MEMORY_CHILD=%d,%d,%v", c.seqs, c.layers, c.ckpt), "GOGC=10")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		var base, peak int64
		for _, line := range strings.Split(string(out), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "STEP "); ok {
				fmt.Sscan(rest, &base, &peak)
			}
		}
		est, without := StepOf(cfg, 0, c.seqs, 1024), StepOf(cfg, 0, c.seqs, 1024)
		if c.ckpt {
			est = CheckpointedStepOf(cfg, 0, c.seqs, 1024)
		}
		got := peak - base
		ratio := float64(got) / float64(est.Total())
		t.Logf("%+v: measured %.1f MiB, estimated %.1f MiB (%+v), ratio %.2f; without checkpointing estimated %.1f MiB", c, float64(got)/(1<<20),
			float64(est.Total())/(1<<20), est, ratio, float64(without.Total())/(1<<20))
		if ratio < 0.75 || ratio > 1.25 {
			t.Errorf("%+v: measured peak %d bytes is %.2f × the estimate %d", c, got, ratio, est.Total())
		}
		if c.ckpt && float64(got) > 0.75*float64(without.Total()) {
			t.Errorf("%+v: measured peak %d bytes with checkpointing, over 3/4 of the estimate without (%d)", c, got, without.Total())
		}
	}
}

// stepMemoryChild runs one training step of the case spec ("seqs,layers,checkpointing") and
// prints its resident memory before the model and at the peak.
func stepMemoryChild(t *testing.T, spec string) {
	var c measuredCase
	if _, err := fmt.Sscanf(spec, "%d,%d,%t", &c.seqs, &c.layers, &c.ckpt); err != nil {
		t.Fatal(err)
	}
	cfg, err := NewConfig(c.spec())
	if err != nil {
		t.Fatal(err)
	}
	debug.FreeOSMemory()
	base := procStatus(t, "VmRSS:")
	m, err := model.InitLLM(cfg.ArchConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	m.SetActivationCheckpointing(c.ckpt)
	batch := make([]model.Sequence, c.seqs)
	d := make([][]float32, c.seqs)
	for i := range batch {
		s := model.Sequence{Prompt: []int32{int32(i)}, Response: make([]int32, 1023)}
		for j := range s.Response {
			s.Response[j] = int32((i*7919 + j*104729) % cfg.Vocab)
		}
		batch[i], d[i] = s, make([]float32, 1023)
		for j := range d[i] {
			d[i][j] = 1e-3
		}
	}
	opt := m.NewOptimizer(model.DefaultAdamWConfig())
	g := m.NewGradBuf()
	p, err := m.TrainForward(batch, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Backward(d, nil, g); err != nil {
		t.Fatal(err)
	}
	if err := opt.Apply(g); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("STEP %d %d\n", base, procStatus(t, "VmHWM:"))
}

// procStatus reads a kB field of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestStepMemoryHandWorked: the estimate's terms for a tiny untied qwen2 (hidden 16, 2 layers,
// 4 heads of 4, 2 KV heads, intermediate 24, vocab 40), one sequence of 10 tokens, LoRA rank
// 2, worked by hand: P = 2·640 (embeddings, lm_head) + 16 + 2·(256+128+128+256 + 32 biases +
// 1152 MLP + 32 norms) = 5,264; A = 2·2·232 = 928; activations 4·10·(2·(4·16 + 2 + 32 + 16 +
// 3·24) + 5·16 + 4 + 8) = 18,560 (+ 4·10·7·2·2 = 1,120 with LoRA), with checkpointing each
// block's input and one block's: 4·10·(2·16 + 186 + 92) = 12,400; scratch 4·(10·(64+72+16+32)
// + 10·24) = 8,320 (10 rows stream the weights in panels: no packed weight); head (four
// buffers of one chunk of 10 rows, each a power-of-two size class of the scratch pools, and no
// packed head) 4·4·512 = 8,192;
// attention 4·3·workers·10·10.
func TestStepMemoryHandWorked(t *testing.T) {
	cfg := tinyConfig(t, "qwen2", true)
	if p := cfg.Params(); p != 5264 {
		t.Fatalf("params %d, want 5264", p)
	}
	if a := LoRAParams(cfg, 2); a != 928 {
		t.Errorf("adapter parameters %d, want 928", a)
	}
	att := int64(1200 * runtime.GOMAXPROCS(0))
	want := Step{Weights: 4 * 5264, Optimizer: 12 * 5264, Activations: 18560, Scratch: 8320, Head: 8192, Attention: att}
	if got := StepOf(cfg, 0, 1, 10); got != want {
		t.Errorf("full: %+v, want %+v", got, want)
	}
	wantL := Step{Weights: 4*5264 + 4*928, Optimizer: 12 * 928, Activations: 18560 + 1120, Scratch: 8320, Head: 8192, Attention: att}
	if got := StepOf(cfg, 2, 1, 10); got != wantL {
		t.Errorf("LoRA: %+v, want %+v", got, wantL)
	}
	// With checkpointing: 4·10·(2·16 inputs + 186 one block + 92) = 12,400 (+ 1,120 with LoRA).
	wantC, wantCL := want, wantL
	wantC.Activations, wantCL.Activations = 12400, 12400+1120
	if got := CheckpointedStepOf(cfg, 0, 1, 10); got != wantC {
		t.Errorf("full, checkpointed: %+v, want %+v", got, wantC)
	}
	if got := CheckpointedStepOf(cfg, 2, 1, 10); got != wantCL {
		t.Errorf("LoRA, checkpointed: %+v, want %+v", got, wantCL)
	}
	full, lora := StepMemory(cfg, 2, 10)
	if full != want.Total() || lora != wantL.Total() {
		t.Errorf("StepMemory: full %d lora %d", full, lora)
	}
	// A base from a BF16 folder: the matrices, 2·640 + 2·(256+128+128+256 + 1152) = 5,120
	// values, at 2 bytes; the other 144 at 4. Training in full is float32 whatever the folder.
	cfg.TorchDtype = "bfloat16"
	if m := MatrixParams(cfg.ArchConfig()); m != 5120 {
		t.Errorf("matrix values %d, want 5120", m)
	}
	wantB, wantCB := wantL, wantCL
	wantB.Weights, wantCB.Weights = 2*5120+4*144+4*928, 2*5120+4*144+4*928
	if got := StepOf(cfg, 2, 1, 10); got != wantB {
		t.Errorf("LoRA over a BF16 base: %+v, want %+v", got, wantB)
	}
	if got := CheckpointedStepOf(cfg, 2, 1, 10); got != wantCB {
		t.Errorf("LoRA over a BF16 base, checkpointed: %+v, want %+v", got, wantCB)
	}
	if got := StepOf(cfg, 0, 1, 10); got != want {
		t.Errorf("full, BF16 folder: %+v, want %+v", got, want)
	}
}
