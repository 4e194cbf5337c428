//go:build linux

package cuda

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
	"github.com/drmas-dev/drmas/internal/nvidiatest"
)

// TestFakeDriver runs the binding against testdata/fakecuda.c built as libcuda.so.1 (host
// memory, three kernels in C), in a child process whose LD_LIBRARY_PATH finds it: loading,
// the init guard, copies, launches with pointer, int and float arguments, JIT error logs and
// driver error strings are all exercised without a GPU.
func TestFakeDriver(t *testing.T) {
	if os.Getenv("DRMAS_FAKE_CUDA_CHILD") == "1" {
		fakeChild(t)
		return
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcuda.so.1")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-ffp-contract=off", "-o", lib, "testdata/fakecuda.c", "-lm").CombinedOutput()
	if err != nil {
		t.Fatalf("build the fake driver with %s (a C compiler is needed, as for cgo): %v\n%s", cc, err, out)
	}
	nvidiatest.RunTestChild(t, "TestFakeDriver", "fake driver checks passed", "DRMAS_FAKE_CUDA_CHILD=1", "LD_LIBRARY_PATH="+dir)
}

func fakeChild(t *testing.T) {
	if err := Init(); err != nil {
		t.Fatalf("Init with the fake driver: %v", err)
	}
	if DeviceCount() != 1 {
		t.Fatalf("DeviceCount = %d", DeviceCount())
	}
	uu, err := DeviceUUIDs()
	if err != nil || len(uu) != 1 || uu[0] != "GPU-00112233-4455-6677-8899-aabbccddeeff" {
		t.Fatalf("DeviceUUIDs = %v, %v", uu, err)
	}
	if _, err := Open(1); err == nil {
		t.Fatal("Open(1) of 1 device succeeded")
	}
	// The fake's count of retained primary contexts and loaded modules.
	lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var fakeLive func(ctx, mod *int32)
	var fakeMissing func(name string)
	for _, f := range []struct {
		fn   any
		name string
	}{{&fakeLive, "fake_live"}, {&fakeMissing, "fake_missing_function"}} {
		addr, err := purego.Dlsym(lib, f.name)
		if err != nil {
			t.Fatal(err)
		}
		purego.RegisterFunc(f.fn, addr)
	}
	live := func(what string, wantCtx, wantMod int32) {
		t.Helper()
		var ctx, mod int32
		fakeLive(&ctx, &mod)
		if ctx != wantCtx || mod != wantMod {
			t.Fatalf("%s: %d primary contexts retained and %d modules loaded, want %d and %d", what, ctx, mod, wantCtx, wantMod)
		}
	}
	// A JIT failure carries the compiler's log and leaves no context retained.
	ptxSource = func() string { return "not ptx" }
	if _, err := Open(0); err == nil || !strings.Contains(err.Error(), "fake JIT error") || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_PTX") {
		t.Fatalf("JIT failure: %v", err)
	}
	live("after a JIT failure", 0, 0)
	ptxSource = func() string { return kernels.PTX }
	// A kernel missing from the module: the loaded module is unloaded and the context released.
	fakeMissing("adamw")
	if _, err := Open(0); err == nil || !strings.Contains(err.Error(), "cuModuleGetFunction adamw") {
		t.Fatalf("missing kernel: %v", err)
	}
	live("after a missing kernel", 0, 0)
	fakeMissing("")
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	live("while open", 1, 1)
	if d.Name() != "Fake GPU" || d.UUID() != uu[0] {
		t.Fatalf("name %q uuid %q", d.Name(), d.UUID())
	}
	if _, err := d.Alloc(1 << 40); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("huge alloc: %v", err)
	}
	const n = 1000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i)+0.5
	}
	px, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	py, _ := d.Alloc(n)
	if err := d.WriteF32(px, x); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteF32(py, y); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch("add_inplace", [3]int{4, 1, 1}, [3]int{256, 1, 1}, ir.ArgP(px), ir.ArgP(py), ir.ArgI(n)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := d.ReadF32(got, px); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != x[i]+y[i] {
			t.Fatalf("add_inplace[%d] = %v", i, got[i])
		}
	}
	// A launch error from the driver (fewer threads than elements: the fake faults).
	if err := d.Launch("add_inplace", [3]int{1, 1, 1}, [3]int{256, 1, 1}, ir.ArgP(px), ir.ArgP(py), ir.ArgI(n)); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Fatalf("faulting launch: %v", err)
	}
	if err := d.Launch("add_inplace", [3]int{4, 1, 1}, [3]int{256, 1, 1}, ir.ArgP(px), ir.ArgI(n)); err == nil {
		t.Fatal("wrong argument count accepted")
	}
	// Offsets into an allocation, int arguments, int32 uploads and memset.
	if err := d.Launch("bias_rows", [3]int{1, 1, 1}, [3]int{256, 1, 1}, ir.ArgP(py.Add(3)), ir.ArgP(px.Add(10)), ir.ArgI(7), ir.ArgI(20)); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadF32(got[:30], px); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 30; i++ {
		if want := y[3+(i-10)%7]; got[i] != want {
			t.Fatalf("bias_rows[%d] = %v, want %v", i, got[i], want)
		}
	}
	if err := d.Zero(px.Add(1), 5); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteI32(px.Add(6), []int32{0x3f800000}); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadF32(got[:8], px); err != nil {
		t.Fatal(err)
	}
	if got[0] != x[0]+y[0] || got[1] != 0 || got[5] != 0 || got[6] != 1 {
		t.Fatalf("memset/int upload: %v", got[:8])
	}
	// Float arguments: the fake's adamw (C, no contraction) equals the interpreter's bit for bit.
	ks, err := kernels.All()
	if err != nil {
		t.Fatal(err)
	}
	in := ir.NewInterp(ks)
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(math.Sin(float64(i)))
	}
	args := func(p, gp, m, v ir.Ptr) []ir.Arg {
		return []ir.Arg{ir.ArgP(p), ir.ArgP(gp), ir.ArgP(m), ir.ArgP(v), ir.ArgF(0.999), ir.ArgF(0.9), ir.ArgF(0.95), ir.ArgF(1e-3), ir.ArgF(1.3), ir.ArgF(1e-8), ir.ArgI(n)}
	}
	var res [2][]float32
	for k, dev := range []interface {
		Alloc(int) (ir.Ptr, error)
		WriteF32(ir.Ptr, []float32) error
		ReadF32([]float32, ir.Ptr) error
		Zero(ir.Ptr, int) error
		Launch(string, [3]int, [3]int, ...ir.Arg) error
	}{d, in} {
		var ps [4]ir.Ptr
		for i := range ps {
			if ps[i], err = dev.Alloc(n); err != nil {
				t.Fatal(err)
			}
			if err := dev.Zero(ps[i], n); err != nil {
				t.Fatal(err)
			}
		}
		if err := dev.WriteF32(ps[0], x); err != nil {
			t.Fatal(err)
		}
		if err := dev.WriteF32(ps[1], g); err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 2; step++ {
			if err := dev.Launch("adamw", [3]int{4, 1, 1}, [3]int{256, 1, 1}, args(ps[0], ps[1], ps[2], ps[3])...); err != nil {
				t.Fatal(err)
			}
		}
		res[k] = make([]float32, n)
		if err := dev.ReadF32(res[k], ps[0]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range res[0] {
		if math.Float32bits(res[0][i]) != math.Float32bits(res[1][i]) {
			t.Fatalf("adamw[%d]: fake driver %v, interpreter %v", i, res[0][i], res[1][i])
		}
	}
	if free, total, err := d.MemInfo(); err != nil || free != 1000 || total != 4000 {
		t.Fatalf("MemInfo = %d %d %v", free, total, err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(px); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	live("after Close", 0, 0)
	if _, err := d.Alloc(1); err == nil {
		t.Fatal("Alloc after Close succeeded")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	t.Log("fake driver checks passed")
}
