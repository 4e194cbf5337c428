package kernels

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/internal/nvidiatest"
)

// ptxasArchs are the architectures kernels.ptx is assembled for: A100 (sm_80), the Ampere
// and Ada consumer parts (sm_86, sm_89) and H100/H200 (sm_90).
var ptxasArchs = []string{"sm_80", "sm_86", "sm_89", "sm_90"}

// ptxasResources is what `ptxas -v` reports for one entry function.
type ptxasResources struct {
	regs, smem, stack, spillSt, spillLd int
}

var (
	ptxasEntryRe = regexp.MustCompile(`Compiling entry function '(\w+)' for '(\w+)'`)
	ptxasFrameRe = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	ptxasUsedRe  = regexp.MustCompile(`Used (\d+) registers(?:, (\d+) bytes smem)?`)
)

// parsePtxasInfo reads `ptxas -v` output into per-kernel resources.
func parsePtxasInfo(out string) (map[string]ptxasResources, error) {
	res := map[string]ptxasResources{}
	cur := ""
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	for _, line := range strings.Split(out, "\n") {
		if m := ptxasEntryRe.FindStringSubmatch(line); m != nil {
			cur = m[1]
			res[cur] = ptxasResources{}
			continue
		}
		if cur == "" {
			continue
		}
		r := res[cur]
		if m := ptxasFrameRe.FindStringSubmatch(line); m != nil {
			r.stack, r.spillSt, r.spillLd = atoi(m[1]), atoi(m[2]), atoi(m[3])
		} else if m := ptxasUsedRe.FindStringSubmatch(line); m != nil {
			r.regs = atoi(m[1])
			if m[2] != "" {
				r.smem = atoi(m[2])
			}
		}
		res[cur] = r
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no entry functions in ptxas output:\n%s", out)
	}
	return res, nil
}

// runPtxas assembles src for arch with -v and warnings as errors.
func runPtxas(t *testing.T, ptxas, src, arch, cubin string) (string, error) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "kernels.ptx")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, ptxas, "-arch="+arch, "-v", "--warning-as-error", "-o", cubin, in)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestPTXAssembles runs NVIDIA's own assembler on kernels.ptx: what the driver's JIT does
// first on a GPU machine, here on every machine that has ptxas (CI installs it). Every kernel
// must assemble for every architecture of ptxasArchs without warnings, use no local memory
// (no stack, no spills), and fit a block of launch size in one SM's register file and in the
// 48 KiB of static shared memory. With nvdisasm, the GEMMs' inner loops are checked to keep their
// register blocking in the compiled SASS (see checkGemmSASS).
// A deliberately misspelt instruction must be refused (the check can fail).
func TestPTXAssembles(t *testing.T) {
	ptxas, err := nvidiatest.Tool("ptxas")
	if err != nil {
		nvidiatest.Missing(t, err)
	}
	ver, _ := exec.Command(ptxas, "--version").CombinedOutput()
	t.Logf("ptxas: %s (%s)", ptxas, strings.TrimSpace(lastLine(string(ver))))

	const blockThreads = max(GemmThreads*GemmThreads, RowThreads) // the largest launch
	const regFile, staticSmem = 64 * 1024, 48 * 1024
	names := map[string]bool{}
	for _, k := range all(t) {
		names[k.Name] = true
	}
	dir := t.TempDir()
	for _, arch := range ptxasArchs {
		cubin := filepath.Join(dir, arch+".cubin")
		out, err := runPtxas(t, ptxas, PTX, arch, cubin)
		if err != nil {
			t.Fatalf("ptxas -arch=%s: %v\n%s", arch, err, out)
		}
		res, err := parsePtxasInfo(out)
		if err != nil {
			t.Fatal(err)
		}
		for n := range names {
			r, ok := res[n]
			if !ok {
				t.Errorf("%s: kernel %s not in ptxas output", arch, n)
				continue
			}
			if r.stack != 0 || r.spillSt != 0 || r.spillLd != 0 {
				t.Errorf("%s: %s uses local memory: %d bytes stack, %d spill stores, %d spill loads", arch, n, r.stack, r.spillSt, r.spillLd)
			}
			if r.regs == 0 || r.regs*blockThreads > regFile {
				t.Errorf("%s: %s uses %d registers: a %d-thread block needs %d of %d", arch, n, r.regs, blockThreads, r.regs*blockThreads, regFile)
			}
			if r.smem > staticSmem {
				t.Errorf("%s: %s uses %d bytes of shared memory (static limit %d)", arch, n, r.smem, staticSmem)
			}
		}
		if len(res) != len(names) {
			t.Errorf("%s: ptxas compiled %d entries, the module has %d kernels", arch, len(res), len(names))
		}
		g := res[GemmName(false, false, false)]
		t.Logf("%s: %d kernels assembled; gemm_nn %d registers, %d bytes smem", arch, len(res), g.regs, g.smem)
		if arch == "sm_90" {
			checkGemmSASS(t, cubin)
		}
	}

	// The check can fail: a misspelt opcode is refused with its line.
	bad := strings.Replace(PTX, "fma.rn.f32", "fmaa.rn.f32", 1)
	if out, err := runPtxas(t, ptxas, bad, "sm_90", filepath.Join(dir, "bad.cubin")); err == nil || !strings.Contains(out, "fmaa") {
		t.Errorf("ptxas accepted a misspelt instruction (err %v):\n%s", err, out)
	}
}

// checkGemmSASS disassembles the GEMMs for sm_90 and counts their FFMA and LDS instructions:
// a thread with r×r outputs loads 2r shared words per r² FMAs, so FFMA/LDS must stay ≥ r/2:
// ≥ 2 for gemm_nn (4×4) and ≥ 4 for gemm_nn_128 (8×8). A kernel computing one output per
// thread would have 0.5.
func checkGemmSASS(t *testing.T, cubin string) {
	t.Helper()
	nvdisasm, err := nvidiatest.Tool("nvdisasm")
	if err != nil {
		if nvidiatest.Required() {
			t.Fatal(err)
		}
		t.Logf("SASS check skipped: %v", err)
		return
	}
	out, err := exec.Command(nvdisasm, "-c", cubin).CombinedOutput()
	if err != nil {
		t.Fatalf("nvdisasm: %v\n%s", err, out)
	}
	insn := regexp.MustCompile(`/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]*)`)
	for _, k := range []struct {
		name string
		per  int // outputs a thread, per dimension
	}{{GemmName(false, false, false), Tile / GemmThreads}, {GemmBigName(false, false), TileBig / GemmThreads}} {
		_, code, ok := strings.Cut(string(out), "\n.text."+k.name+":\n")
		if !ok {
			t.Fatalf("nvdisasm output has no section .text.%s", k.name)
		}
		code, _, _ = strings.Cut(code, "\n//---")
		counts := map[string]int{}
		for _, m := range insn.FindAllStringSubmatch(code, -1) {
			counts[m[1]]++
		}
		ffma, lds := counts["FFMA"], counts["LDS"]
		t.Logf("sm_90 %s SASS: %d FFMA, %d LDS, %d STS, %d LDG (FFMA/LDS %.2f)", k.name, ffma, lds, counts["STS"], counts["LDG"], float64(ffma)/float64(max(lds, 1)))
		if want := k.per * k.per * TileK; ffma < want || lds == 0 || 2*ffma < k.per*lds {
			t.Errorf("%s SASS has %d FFMA and %d LDS: want ≥ %d FFMA and FFMA/LDS ≥ %d (%d×%d register blocking)", k.name, ffma, lds, want, k.per/2, k.per, k.per)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
