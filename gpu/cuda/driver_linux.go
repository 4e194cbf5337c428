//go:build linux

package cuda

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/drmas-dev/drmas/gpu/ir"
	"github.com/drmas-dev/drmas/gpu/kernels"
)

// The driver entry points, set once by load.
var drv struct {
	cuInit                    func(flags uint32) Result
	cuDriverGetVersion        func(v *int32) Result
	cuDeviceGetCount          func(n *int32) Result
	cuDeviceGet               func(dev *int32, ordinal int32) Result
	cuDeviceGetName           func(name *byte, n int32, dev int32) Result
	cuDeviceGetUuid           func(uuid *[16]byte, dev int32) Result
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) Result
	cuDevicePrimaryCtxRelease func(dev int32) Result
	cuCtxSetCurrent           func(ctx uintptr) Result
	cuCtxSynchronize          func() Result
	cuModuleLoadDataEx        func(mod *uintptr, image *byte, n uint32, opts *int32, vals *uintptr) Result
	cuModuleUnload            func(mod uintptr) Result
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name *byte) Result
	cuLaunchKernel            func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params *unsafe.Pointer, extra *unsafe.Pointer) Result
	cuMemAlloc                func(p *uint64, size uint64) Result
	cuMemFree                 func(p uint64) Result
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uint64) Result
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) Result
	cuMemsetD32               func(dst uint64, v uint32, n uint64) Result
	cuMemGetInfo              func(free, total *uint64) Result
	cuGetErrorString          func(r Result, s **byte) Result
	cuGetErrorName            func(r Result, s **byte) Result
}

// libPaths are tried in order: the loader's search path first, then where container runtimes
// and distributions put the driver library.
var libPaths = []string{
	"libcuda.so.1",
	"/usr/local/nvidia/lib64/libcuda.so.1",
	"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
	"/usr/lib/aarch64-linux-gnu/libcuda.so.1",
	"/usr/lib64/libcuda.so.1",
}

// ptxSource is the module Open JIT-compiles (a variable for the fake-driver test).
var ptxSource = func() string { return kernels.PTX }

var (
	initOnce sync.Once
	initErr  error
	devCount int
)

// Init loads libcuda.so.1 and runs cuInit once per process. After a failure it returns the
// same *InitError forever without touching the driver.
func Init() error {
	initOnce.Do(func() { initErr = load() })
	return initErr
}

// DeviceCount is the number of CUDA devices (0 after a failed Init).
func DeviceCount() int {
	if Init() != nil {
		return 0
	}
	return devCount
}

func load() error {
	var lib uintptr
	for _, path := range libPaths {
		if h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			lib = h
			break
		}
	}
	if lib == 0 {
		return &InitError{Reason: "libcuda.so.1 not found (no NVIDIA driver)"}
	}
	syms := []struct {
		fn    any
		names []string
	}{
		{&drv.cuInit, []string{"cuInit"}},
		{&drv.cuDriverGetVersion, []string{"cuDriverGetVersion"}},
		{&drv.cuDeviceGetCount, []string{"cuDeviceGetCount"}},
		{&drv.cuDeviceGet, []string{"cuDeviceGet"}},
		{&drv.cuDeviceGetName, []string{"cuDeviceGetName"}},
		{&drv.cuDeviceGetUuid, []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}},
		{&drv.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&drv.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{&drv.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&drv.cuCtxSynchronize, []string{"cuCtxSynchronize"}},
		{&drv.cuModuleLoadDataEx, []string{"cuModuleLoadDataEx"}},
		{&drv.cuModuleUnload, []string{"cuModuleUnload"}},
		{&drv.cuModuleGetFunction, []string{"cuModuleGetFunction"}},
		{&drv.cuLaunchKernel, []string{"cuLaunchKernel"}},
		{&drv.cuMemAlloc, []string{"cuMemAlloc_v2"}},
		{&drv.cuMemFree, []string{"cuMemFree_v2"}},
		{&drv.cuMemcpyHtoD, []string{"cuMemcpyHtoD_v2"}},
		{&drv.cuMemcpyDtoH, []string{"cuMemcpyDtoH_v2"}},
		{&drv.cuMemsetD32, []string{"cuMemsetD32_v2"}},
		{&drv.cuMemGetInfo, []string{"cuMemGetInfo_v2"}},
		{&drv.cuGetErrorString, []string{"cuGetErrorString"}},
		{&drv.cuGetErrorName, []string{"cuGetErrorName"}},
	}
	for _, s := range syms {
		var addr uintptr
		for _, n := range s.names {
			if a, err := purego.Dlsym(lib, n); err == nil && a != 0 {
				addr = a
				break
			}
		}
		if addr == 0 {
			return &InitError{Reason: fmt.Sprintf("libcuda.so.1 has no %s (driver too old)", s.names[0])}
		}
		purego.RegisterFunc(s.fn, addr)
	}
	if r := drv.cuInit(0); r != 0 {
		return &InitError{Reason: fmt.Sprintf("cuInit failed: %s", describe(r))}
	}
	var n int32
	if r := drv.cuDeviceGetCount(&n); r != 0 {
		return &InitError{Reason: fmt.Sprintf("cuDeviceGetCount failed: %s", describe(r))}
	}
	if n == 0 {
		return &InitError{Reason: "no CUDA device"}
	}
	devCount = int(n)
	return nil
}

// cString reads a NUL-terminated C string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := uintptr(0); i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

func describe(r Result) string {
	var name, msg *byte
	if drv.cuGetErrorName != nil && drv.cuGetErrorName(r, &name) == 0 && drv.cuGetErrorString(r, &msg) == 0 {
		return fmt.Sprintf("%s (%s)", cString(msg), cString(name))
	}
	return fmt.Sprintf("error %d", int(r))
}

func check(call string, r Result) error {
	if r == 0 {
		return nil
	}
	e := &DriverError{Call: call, Result: r}
	var name, msg *byte
	if drv.cuGetErrorName(r, &name) == 0 && drv.cuGetErrorString(r, &msg) == 0 {
		e.Name, e.Msg = cString(name), cString(msg)
	}
	return e
}

// Device is one GPU with the primary context retained and the kernels loaded. It implements
// engine.Device.
type Device struct {
	ordinal  int
	dev      int32 // the CUdevice of ordinal
	name     string
	uuid     [16]byte
	calls    chan func()
	done     chan struct{}
	ctx      uintptr
	retained bool // the primary context is retained (release undoes it)
	mod      uintptr
	funcs    map[string]uintptr
	ks       map[string]*ir.Kernel
	mu       sync.Mutex
	closed   bool
}

// Open initialises the driver (once), retains the primary context of device ordinal and
// JIT-compiles the kernels.
func Open(ordinal int) (*Device, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= devCount {
		return nil, fmt.Errorf("cuda: device %d of %d", ordinal, devCount)
	}
	ks, err := kernels.All()
	if err != nil {
		return nil, err
	}
	d := &Device{ordinal: ordinal, calls: make(chan func()), done: make(chan struct{}), funcs: map[string]uintptr{}, ks: map[string]*ir.Kernel{}}
	for _, k := range ks {
		d.ks[k.Name] = k
	}
	go d.loop()
	var openErr error
	d.run(func() {
		if openErr = d.open(ks); openErr != nil {
			_ = d.release() // the error that matters is open's
		}
	})
	if openErr != nil {
		d.shutdown()
		return nil, openErr
	}
	return d, nil
}

// loop runs every driver call of d on one locked OS thread.
func (d *Device) loop() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for f := range d.calls {
		f()
	}
	close(d.done)
}

func (d *Device) run(f func()) {
	done := make(chan struct{})
	d.calls <- func() { f(); close(done) }
	<-done
}

func (d *Device) shutdown() {
	close(d.calls)
	<-d.done
}

// open retains the primary context and loads the module; on an error, release undoes what
// it got to.
func (d *Device) open(ks []*ir.Kernel) error {
	var dev int32
	if err := check("cuDeviceGet", drv.cuDeviceGet(&dev, int32(d.ordinal))); err != nil {
		return err
	}
	d.dev = dev
	name := make([]byte, 256)
	if err := check("cuDeviceGetName", drv.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return err
	}
	d.name = string(bytes.TrimRight(name, "\x00"))
	if err := check("cuDeviceGetUuid", drv.cuDeviceGetUuid(&d.uuid, dev)); err != nil {
		return err
	}
	var ctx uintptr
	if err := check("cuDevicePrimaryCtxRetain", drv.cuDevicePrimaryCtxRetain(&ctx, dev)); err != nil {
		return err
	}
	d.ctx, d.retained = ctx, true
	if err := check("cuCtxSetCurrent", drv.cuCtxSetCurrent(d.ctx)); err != nil {
		return err
	}
	const logSize = 1 << 16
	errLog := make([]byte, logSize)
	// CU_JIT_ERROR_LOG_BUFFER (5), CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES (6).
	opts := []int32{5, 6}
	vals := []uintptr{uintptr(unsafe.Pointer(&errLog[0])), logSize}
	image := append([]byte(ptxSource()), 0)
	var pin runtime.Pinner
	pin.Pin(&errLog[0])
	var mod uintptr
	r := drv.cuModuleLoadDataEx(&mod, &image[0], uint32(len(opts)), &opts[0], &vals[0])
	pin.Unpin()
	runtime.KeepAlive(errLog)
	if r == 0 {
		d.mod = mod
	} else {
		log := string(bytes.TrimRight(errLog, "\x00"))
		return fmt.Errorf("cuda: JIT-compile the kernels: %w; log: %s", check("cuModuleLoadDataEx", r), log)
	}
	for _, k := range ks {
		var fn uintptr
		cname := append([]byte(k.Name), 0)
		if err := check("cuModuleGetFunction "+k.Name, drv.cuModuleGetFunction(&fn, d.mod, &cname[0])); err != nil {
			return err
		}
		d.funcs[k.Name] = fn
	}
	return nil
}

// Name is the device's name, e.g. "NVIDIA H200".
func (d *Device) Name() string { return d.name }

// Ordinal is the CUDA device ordinal.
func (d *Device) Ordinal() int { return d.ordinal }

// UUID is the device UUID in NVML's format, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func (d *Device) UUID() string { return FormatUUID(d.uuid) }

func (d *Device) call(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("cuda: device closed")
	}
	var err error
	d.run(func() { err = f() })
	return err
}

// Alloc allocates words 4-byte words of device memory (not zeroed).
func (d *Device) Alloc(words int) (ir.Ptr, error) {
	var p uint64
	err := d.call(func() error { return check("cuMemAlloc", drv.cuMemAlloc(&p, uint64(max(words, 1))*4)) })
	return ir.Ptr(p), err
}

// Free releases an allocation.
func (d *Device) Free(p ir.Ptr) error {
	return d.call(func() error { return check("cuMemFree", drv.cuMemFree(uint64(p))) })
}

// WriteF32 copies src to the device.
func (d *Device) WriteF32(dst ir.Ptr, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	return d.call(func() error {
		return check("cuMemcpyHtoD", drv.cuMemcpyHtoD(uint64(dst), unsafe.Pointer(&src[0]), uint64(len(src))*4))
	})
}

// WriteI32 copies src to the device.
func (d *Device) WriteI32(dst ir.Ptr, src []int32) error {
	if len(src) == 0 {
		return nil
	}
	return d.call(func() error {
		return check("cuMemcpyHtoD", drv.cuMemcpyHtoD(uint64(dst), unsafe.Pointer(&src[0]), uint64(len(src))*4))
	})
}

// ReadF32 copies len(dst) words from the device (synchronising with earlier launches).
func (d *Device) ReadF32(dst []float32, src ir.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.call(func() error {
		return check("cuMemcpyDtoH", drv.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), uint64(src), uint64(len(dst))*4))
	})
}

// Zero clears words words at p.
func (d *Device) Zero(p ir.Ptr, words int) error {
	if words == 0 {
		return nil
	}
	return d.call(func() error { return check("cuMemsetD32", drv.cuMemsetD32(uint64(p), 0, uint64(words))) })
}

// Sync waits for every launch to finish and reports a kernel fault.
func (d *Device) Sync() error {
	return d.call(func() error { return check("cuCtxSynchronize", drv.cuCtxSynchronize()) })
}

// MemInfo returns free and total device memory in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.call(func() error { return check("cuMemGetInfo", drv.cuMemGetInfo(&free, &total)) })
	return free, total, err
}

// Launch starts kernel name (asynchronously, on the default stream) after checking args
// against its parameters.
func (d *Device) Launch(name string, grid, block [3]int, args ...ir.Arg) error {
	k, ok := d.ks[name]
	if !ok {
		return fmt.Errorf("cuda: no kernel %s", name)
	}
	if err := ir.CheckArgs(k, args); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	for _, g := range grid {
		if g <= 0 {
			return nil // empty launch
		}
	}
	vals := make([]uint64, len(args))
	ptrs := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		switch a.Kind {
		case ir.PPtr:
			vals[i] = uint64(a.P)
		case ir.PS32:
			vals[i] = uint64(uint32(a.I))
		case ir.PF32:
			vals[i] = uint64(*(*uint32)(unsafe.Pointer(&a.F)))
		}
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	return d.call(func() error {
		var pin runtime.Pinner
		defer pin.Unpin()
		if len(vals) > 0 {
			pin.Pin(&vals[0])
			pin.Pin(&ptrs[0])
		}
		var pp *unsafe.Pointer
		if len(ptrs) > 0 {
			pp = &ptrs[0]
		}
		r := drv.cuLaunchKernel(d.funcs[name], uint32(grid[0]), uint32(grid[1]), uint32(grid[2]),
			uint32(block[0]), uint32(block[1]), uint32(block[2]), 0, 0, pp, nil)
		return check("cuLaunchKernel "+name, r)
	})
}

// Close unloads the module and releases the primary context.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var err error
	d.run(func() { err = d.release() })
	d.shutdown()
	return err
}

// release unloads the module and releases the primary context, as far as open got; it runs
// on d's thread and returns the first error.
func (d *Device) release() error {
	var err error
	if d.mod != 0 {
		err = check("cuModuleUnload", drv.cuModuleUnload(d.mod))
		d.mod = 0
	}
	if d.retained {
		if e := check("cuDevicePrimaryCtxRelease", drv.cuDevicePrimaryCtxRelease(d.dev)); e != nil && err == nil {
			err = e
		}
		d.retained, d.ctx = false, 0
	}
	return err
}

// DeviceUUIDs returns the NVML-format UUID of every CUDA device by ordinal, to map NVML's
// placement (by UUID) to a CUDA ordinal.
func DeviceUUIDs() ([]string, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	out := make([]string, devCount)
	for i := range out {
		var dev int32
		var u [16]byte
		if err := check("cuDeviceGet", drv.cuDeviceGet(&dev, int32(i))); err != nil {
			return nil, err
		}
		if err := check("cuDeviceGetUuid", drv.cuDeviceGetUuid(&u, dev)); err != nil {
			return nil, err
		}
		out[i] = FormatUUID(u)
	}
	return out, nil
}
