package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// bf16Round rounds v to the nearest bfloat16 value (ties to even), as a
// BF16 checkpoint holds it.
func bf16Round(v float32) float32 {
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// TestLLMTorchParity compares log-probs, entropies and the gradient of
// every tensor with testdata/qwen_ref.py, a PyTorch reference written from
// transformers' modeling_qwen2.py / modeling_qwen3.py and run in float64 on
// the same (float32 or BF16-rounded) weights.
func TestLLMTorchParity(t *testing.T) {
	torchParity(t, []torchCase{
		{"qwen2_tied_gqa_f32", ArchConfig{Arch: "qwen2", Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 48, Vocab: 300, Context: 256, RopeTheta: 1e6, Tie: true}, false},
		{"qwen2_untied_bf16", ArchConfig{Arch: "qwen2", Hidden: 48, Layers: 2, Heads: 6, KVHeads: 2, Intermediate: 64, Vocab: 300, Context: 256, RopeTheta: 1e6}, true},
		{"qwen3_untied_hd16_f32", ArchConfig{Arch: "qwen3", Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 48, Vocab: 300, Context: 256, RopeTheta: 1e6}, false},
		{"qwen3_tied_bias_bf16", ArchConfig{Arch: "qwen3", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 1, HeadDim: 24, Intermediate: 96, Vocab: 300, Context: 256, RopeTheta: 1e4, Tie: true, QKVBias: true}, true},
	})
}

// torchCase is one model of a PyTorch parity test: its config, and whether its weights are
// rounded to BF16 (as a BF16 checkpoint holds them).
type torchCase struct {
	name string
	cfg  ArchConfig
	bf16 bool
}

// torchParity runs each case's forward and backward on a seeded random model and batch (one
// sequence past position 128, short ones, a single-token one) and compares log-probs,
// entropies (within 5e-5) and every tensor's gradient (within 1e-4 of its largest element)
// with testdata/qwen_ref.py. It returns the worst differences over all cases.
func torchParity(t *testing.T, cases []torchCase) (worstLP, worstG float64) {
	t.Helper()
	py := oracles.Torch(t)
	type prepared struct {
		m         *LLM
		p         *LLMPass
		g         *LLMGrads
		seqs      []Sequence
		dlp, dent [][]float32
		out       string
	}
	const temp = 0.7
	dir := t.TempDir()
	var jobs [][3]string
	runs := make([]prepared, len(cases))
	for ci, tc := range cases {
		c := tc.cfg.WithDefaults()
		m, err := InitLLM(c, uint64(ci))
		if err != nil {
			t.Fatal(err)
		}
		randomizeLLM(m, uint64(10+ci), 0.15)
		if tc.bf16 {
			for _, p := range m.Params() {
				for j, v := range p.Data {
					p.Data[j] = bf16Round(v)
				}
			}
		}
		r := rand.New(rand.NewPCG(uint64(ci), 5))
		// One sequence past position 128, others short, one with a single token.
		seqs := archSeqs(c.Vocab, r, [2]int{100, 50}, [2]int{7, 12}, [2]int{1, 1})
		dlp, dent := randGrads(seqs, r)
		p, err := m.Forward(seqs, temp)
		if err != nil {
			t.Fatal(err)
		}
		g := m.NewGrads()
		if err := p.Backward(dlp, dent, g); err != nil {
			t.Fatal(err)
		}
		job := writeTorchJob(t, filepath.Join(dir, tc.name), m, seqs, temp, dlp, dent)
		jobs = append(jobs, job)
		runs[ci] = prepared{m, p, g, seqs, dlp, dent, job[2]}
	}
	jobsPath := filepath.Join(dir, "jobs.json")
	js, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobsPath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, filepath.Join("testdata", "qwen_ref.py"), jobsPath).CombinedOutput(); err != nil {
		t.Fatalf("qwen_ref.py: %v\n%s", err, out)
	}
	for ci, tc := range cases {
		run := runs[ci]
		t.Run(tc.name, func(t *testing.T) {
			m, p, g, seqs := run.m, run.p, run.g, run.seqs
			raw, err := os.ReadFile(run.out)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ReadSafetensors(bytes.NewReader(raw), int64(len(raw)))
			if err != nil {
				t.Fatal(err)
			}
			lp, en := p.LogProbs(), p.Entropy()
			var dLP float64
			for i := range seqs {
				want, err := ref.Float32s(fmt.Sprintf("logprob.%d", i), []int{len(seqs[i].Response)})
				if err != nil {
					t.Fatal(err)
				}
				wantE, err := ref.Float32s(fmt.Sprintf("entropy.%d", i), []int{len(seqs[i].Response)})
				if err != nil {
					t.Fatal(err)
				}
				for j := range want {
					dLP = max(dLP, math.Abs(float64(lp[i][j]-want[j])), math.Abs(float64(en[i][j]-wantE[j])))
				}
			}
			if dLP > 5e-5 {
				t.Errorf("log-prob/entropy differ from PyTorch by %.3g", dLP)
			}
			var dG float64
			for i, prm := range m.Params() {
				want, err := ref.Float32s("grad."+prm.Name, prm.Shape)
				if err != nil {
					t.Fatal(err)
				}
				var scale, diff float64
				for j, v := range want {
					scale = max(scale, math.Abs(float64(v)))
					diff = max(diff, math.Abs(float64(g.parts[i][j]-v)))
				}
				rel := diff / max(scale, 1e-6)
				dG = max(dG, rel)
				if rel > 1e-4 {
					t.Errorf("%s: gradient differs from PyTorch by %.3g of its largest element %.3g", prm.Name, diff, scale)
				}
			}
			t.Logf("worst |Δ log-prob or entropy| %.3g; worst gradient difference %.3g of the tensor's largest element", dLP, dG)
			worstLP, worstG = max(worstLP, dLP), max(worstG, dG)
		})
	}
	t.Logf("over all cases: worst |Δ log-prob| %.3g, worst relative gradient difference %.3g", worstLP, worstG)
	return worstLP, worstG
}

// writeTorchJob writes m's weights and the batch under prefix and returns
// the job (input, weights, output paths) for qwen_ref.py.
func writeTorchJob(t *testing.T, prefix string, m *LLM, seqs []Sequence, temp float32, dlp, dent [][]float32) [3]string {
	t.Helper()
	var wbuf bytes.Buffer
	if err := WriteSafetensors(&wbuf, m.Tensors(), nil); err != nil {
		t.Fatal(err)
	}
	job := [3]string{prefix + ".json", prefix + ".w.safetensors", prefix + ".out.safetensors"}
	type seqJSON struct {
		Prompt   []int32 `json:"prompt"`
		Response []int32 `json:"response"`
	}
	in := struct {
		Config      ArchConfig  `json:"config"`
		Seqs        []seqJSON   `json:"seqs"`
		Temperature float32     `json:"temperature"`
		DLogProb    [][]float32 `json:"dlogprob"`
		DEntropy    [][]float32 `json:"dentropy"`
		DType       string      `json:"dtype"`
	}{Config: m.cfg, Temperature: temp, DLogProb: dlp, DEntropy: dent, DType: "float64"}
	for _, s := range seqs {
		in.Seqs = append(in.Seqs, seqJSON{s.Prompt, s.Response})
	}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(job[1], wbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(job[0], js, 0o644); err != nil {
		t.Fatal(err)
	}
	return job
}
