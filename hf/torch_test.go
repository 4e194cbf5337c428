package hf

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/internal/oracles"
)

// torchReadST is python that parses a safetensors file with struct and json (Debian has no
// safetensors package) into {name: (dtype, shape, raw bytes)}.
const torchReadST = `
import json, struct, sys, torch
def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[base + b:base + e])
    return out
`

func runTorch(t *testing.T, script string, args ...string) string {
	t.Helper()
	py := oracles.Torch(t)
	cmd := exec.Command(py, append([]string{"-c", torchReadST + script}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("python: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// TestTorchConvertsAsWe: for the same float32 inputs (seeded values over many exponents, and
// ties, limits, subnormals, infinities and NaN), the BF16 and F16 bytes WriteFolder stores are
// exactly the bytes of PyTorch's tensor.to(torch.bfloat16) and .to(torch.float16), except that
// a NaN need only stay a NaN: PyTorch's own payload differs between its vector path (0xFFFF)
// and its scalar one (0x7FC0, which drmas writes).
func TestTorchConvertsAsWe(t *testing.T) {
	cfg := tinyConfig(t, "qwen2", true)
	get := edgeValues(cfg, 11)
	dirs := map[string]string{}
	for _, d := range []string{F32, BF16, F16} {
		dirs[d] = writeTestFolder(t, cfg, d, get)
	}
	out := runTorch(t, `
ref = read_st(sys.argv[1] + "/model.safetensors")
checked, nans = 0, 0
for path, dt, tdt in ((sys.argv[2], "BF16", torch.bfloat16), (sys.argv[3], "F16", torch.float16)):
    ours = read_st(path + "/model.safetensors")
    assert set(ours) == set(ref), (set(ours) ^ set(ref))
    for name, (d, shape, raw) in ref.items():
        x = torch.frombuffer(bytearray(raw), dtype=torch.float32)
        want = x.to(tdt).view(torch.int16).numpy().tobytes()
        od, oshape, oraw = ours[name]
        assert od == dt and oshape == shape, (name, od, oshape, shape)
        a = torch.frombuffer(bytearray(oraw), dtype=torch.int16)
        b = torch.frombuffer(bytearray(want), dtype=torch.int16)
        nan = torch.isnan(x)
        bad = ((a != b) & ~nan) | (nan & ~torch.isnan(a.view(tdt)))
        if bad.any():
            i = int(bad.nonzero()[0])
            print("MISMATCH", dt, name, i, float(x[i]), hex(int(a[i]) & 0xFFFF), hex(int(b[i]) & 0xFFFF))
            sys.exit(0)
        checked += x.numel()
        nans += int(nan.sum())
print("ok", checked, "values,", nans, "NaNs")
`, dirs[F32], dirs[BF16], dirs[F16])
	if !strings.HasPrefix(out, "ok ") {
		t.Fatalf("PyTorch disagrees: %s", out)
	}
	t.Logf("PyTorch agrees on %s", strings.TrimPrefix(out, "ok "))
}

// TestReadTorchBF16: a BF16 model.safetensors that PyTorch writes (its own rounding of seeded
// float32 values, written by hand in the safetensors layout, in an order of its choosing)
// reads back through OpenWeights as exactly PyTorch's float32 values of those BF16 numbers.
func TestReadTorchBF16(t *testing.T) {
	cfg := tinyConfig(t, "qwen3", false)
	dir := t.TempDir()
	js, _ := cfg.JSON()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), js, 0o644); err != nil {
		t.Fatal(err)
	}
	specs, _ := json.Marshal(cfg.Tensors())
	runTorch(t, `
specs = json.loads(sys.argv[2])
torch.manual_seed(5)
header, blobs, expect, eblobs, off, eoff = {}, [], {}, [], 0, 0
for s in reversed(specs):  # an order other than ours
    n = 1
    for d in s["Shape"]:
        n *= d
    x = torch.randn(n) * torch.exp(torch.randn(n) * 4)
    x[:4] = torch.tensor([float("inf"), -1e-40, 3.0e38, float("-inf")])
    y = x.to(torch.bfloat16)
    raw = y.view(torch.int16).numpy().tobytes()
    header[s["Name"]] = {"dtype": "BF16", "shape": s["Shape"], "data_offsets": [off, off + len(raw)]}
    blobs.append(raw); off += len(raw)
    f = y.to(torch.float32).numpy().tobytes()
    expect[s["Name"]] = {"dtype": "F32", "shape": s["Shape"], "data_offsets": [eoff, eoff + len(f)]}
    eblobs.append(f); eoff += len(f)
for path, h, b in ((sys.argv[1] + "/model.safetensors", header, blobs), (sys.argv[1] + "/../expect.safetensors", expect, eblobs)):
    hb = json.dumps(h).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(b))
`, dir, string(specs))
	w, err := OpenWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data, err := os.ReadFile(filepath.Join(dir, "..", "expect.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := parseSafetensors(bytes.NewReader(data), int64(len(data)), "expect")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range exp.Tensors {
		want := make([]float32, (e.End-e.Begin)/4)
		decode(F32, data[e.Begin:e.End], want)
		got := make([]float32, len(want))
		if err := w.Float32(e.Name, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s[%d]: %g, PyTorch %g", e.Name, i, got[i], want[i])
			}
		}
		n += len(got)
	}
	if n != int(cfg.Params()) {
		t.Errorf("compared %d values, the model has %d", n, cfg.Params())
	}
}
