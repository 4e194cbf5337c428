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

// TestLoRATorchParity compares the adapter's log-probs, entropies and gradients of A and B
// with testdata/lora_ref.py: PyTorch autograd in float64 through qwen_ref.py's decoder, every
// adapted weight W + scale·B·A.
func TestLoRATorchParity(t *testing.T) {
	py := oracles.Torch(t)
	cases := []struct {
		name string
		cfg  ArchConfig
		lora LoRAConfig
	}{
		{"qwen2_tied_gqa_all", ArchConfig{Arch: "qwen2", Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 48, Vocab: 300, Context: 256, RopeTheta: 1e6, Tie: true},
			LoRAConfig{R: 4, Alpha: 8}},
		{"qwen3_untied_hd16_subset", ArchConfig{Arch: "qwen3", Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 48, Vocab: 300, Context: 256, RopeTheta: 1e6},
			LoRAConfig{R: 3, Alpha: 16, Targets: []string{"q_proj", "v_proj", "gate_proj", "down_proj"}}},
		{"qwen3_tied_bias_all", ArchConfig{Arch: "qwen3", Hidden: 48, Layers: 2, Heads: 4, KVHeads: 1, HeadDim: 24, Intermediate: 64, Vocab: 300, Context: 256, RopeTheta: 1e4, Tie: true, QKVBias: true},
			LoRAConfig{R: 8, Alpha: 8}},
	}
	type prepared struct {
		l   *LoRA
		p   TrainPass
		g   GradBuf
		n   []int
		out string
	}
	const temp = 0.7
	dir := t.TempDir()
	var jobs [][4]string
	runs := make([]prepared, len(cases))
	for ci, tc := range cases {
		c := tc.cfg.WithDefaults()
		l := randomLoRA(t, c, tc.lora, uint64(20+ci))
		r := rand.New(rand.NewPCG(uint64(ci), 6))
		seqs := archSeqs(c.Vocab, r, [2]int{100, 50}, [2]int{7, 12}, [2]int{1, 1})
		dlp, dent := randGrads(seqs, r)
		p, err := l.TrainForward(seqs, temp)
		if err != nil {
			t.Fatal(err)
		}
		g := l.NewGradBuf()
		if err := p.Backward(dlp, dent, g); err != nil {
			t.Fatal(err)
		}
		prefix := filepath.Join(dir, tc.name)
		job := writeTorchJob(t, prefix, l.base, seqs, temp, dlp, dent)
		addLoRAToJob(t, job[0], l)
		adapter := prefix + ".adapter.safetensors"
		var ab bytes.Buffer
		if err := WriteSafetensors(&ab, l.Tensors(), nil); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(adapter, ab.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, [4]string{job[0], job[1], adapter, job[2]})
		n := make([]int, len(seqs))
		for i, s := range seqs {
			n[i] = len(s.Response)
		}
		runs[ci] = prepared{l, p, g, n, job[2]}
	}
	jobsPath := filepath.Join(dir, "jobs.json")
	js, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobsPath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, filepath.Join("testdata", "lora_ref.py"), jobsPath).CombinedOutput(); err != nil {
		t.Fatalf("lora_ref.py: %v\n%s", err, out)
	}
	for ci, tc := range cases {
		run := runs[ci]
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile(run.out)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ReadSafetensors(bytes.NewReader(raw), int64(len(raw)))
			if err != nil {
				t.Fatal(err)
			}
			lp, en := run.p.LogProbs(), run.p.Entropy()
			var dLP float64
			for i, n := range run.n {
				want, err := ref.Float32s(fmt.Sprintf("logprob.%d", i), []int{n})
				if err != nil {
					t.Fatal(err)
				}
				wantE, err := ref.Float32s(fmt.Sprintf("entropy.%d", i), []int{n})
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
			off := 0
			for _, prm := range run.l.Params() {
				want, err := ref.Float32s("grad."+prm.Name, prm.Shape)
				if err != nil {
					t.Fatal(err)
				}
				got := run.g.Flat()[off : off+len(prm.Data)]
				off += len(prm.Data)
				var scale, diff float64
				for j, v := range want {
					scale = max(scale, math.Abs(float64(v)))
					diff = max(diff, math.Abs(float64(got[j]-v)))
				}
				rel := diff / max(scale, 1e-6)
				dG = max(dG, rel)
				if rel > 1e-4 || scale == 0 {
					t.Errorf("%s: gradient differs from PyTorch by %.3g of its largest element %.3g", prm.Name, diff, scale)
				}
			}
			t.Logf("worst |Δ log-prob or entropy| %.3g; worst dA/dB difference %.3g of the tensor's largest element", dLP, dG)
		})
	}
}

// addLoRAToJob adds the adapter's r and alpha to a qwen_ref.py job's input.
func addLoRAToJob(t *testing.T, path string, l *LoRA) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	in["lora"] = map[string]any{"r": l.cfg.R, "alpha": l.cfg.Alpha}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
}
