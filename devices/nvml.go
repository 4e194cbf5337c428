//go:build cgo

package devices

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/ebitengine/purego"
)

var (
	initOnce sync.Once
	initErr  error // set once; non-nil: NVML must never be called again
)

// nvmlInit is the one guard in front of NVML: nvml.Init runs once per process (the library
// stays loaded until exit), and when it fails every later call returns the same error without
// touching NVML. Every other function of this file must call it first and stop on error.
func nvmlInit() error {
	initOnce.Do(func() {
		if err := checkSymbols(); err != nil {
			initErr = err
			return
		}
		if r := nvml.Init(); r != nvml.SUCCESS {
			initErr = noDriver(r)
		}
	})
	return initErr
}

// nvmlSymbols are the functions of libnvidia-ml.so.1 this package calls (each: any one of the
// names, newest first, as go-nvml picks them).
var nvmlSymbols = [][]string{
	{"nvmlInit_v2", "nvmlInit"},
	{"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"},
	{"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"},
	{"nvmlDeviceGetName"}, {"nvmlDeviceGetUUID"}, {"nvmlDeviceGetMemoryInfo"},
	{"nvmlDeviceGetUtilizationRates"}, {"nvmlErrorString"},
}

// checkSymbols looks the functions up before go-nvml calls them: a libnvidia-ml.so.1 that lacks
// one (a stub, a broken install) would otherwise end the process with the loader's "undefined
// symbol" at the first call, past any Go error handling. A library that is not found is left
// to nvml.Init, which reports it.
func checkSymbols() error {
	lib, err := purego.Dlopen("libnvidia-ml.so.1", purego.RTLD_LAZY|purego.RTLD_LOCAL)
	if err != nil {
		return nil
	}
	defer purego.Dlclose(lib)
	var missing []string
	for _, names := range nvmlSymbols {
		found := false
		for _, n := range names {
			if _, err := purego.Dlsym(lib, n); err == nil {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, names[0])
		}
	}
	if len(missing) > 0 {
		return &NoDriverError{Code: int(nvml.ERROR_FUNCTION_NOT_FOUND), Reason: "libnvidia-ml.so.1 lacks " + strings.Join(missing, ", ") + ": not a usable NVIDIA driver library"}
	}
	return nil
}

// noDriver explains a failed Init without asking NVML (nvml.ErrorString is an NVML call).
func noDriver(r nvml.Return) error {
	reason := fmt.Sprintf("NVML init failed with code %d", int(r))
	switch r {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		reason = "libnvidia-ml.so.1 not found"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		reason = "libnvidia-ml.so.1 found but the kernel driver is not loaded"
	case nvml.ERROR_NO_PERMISSION:
		reason = "no permission to talk to the NVIDIA driver"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		reason = "NVML library and kernel driver versions differ"
	}
	return &NoDriverError{Code: int(r), Reason: reason}
}

// nvmlErr formats a failed NVML call. After a successful Init, Return.Error asks NVML itself,
// which is safe.
func nvmlErr(what string, r nvml.Return) error {
	return fmt.Errorf("nvml: %s: %s", what, r.Error())
}

// nvmlDevices queries every device. Only call after nvmlInit returned nil.
func nvmlDevices() ([]Device, error) {
	if initErr != nil { // defence in depth: never reached when callers follow the contract
		return nil, initErr
	}
	n, r := nvml.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, nvmlErr("device count", r)
	}
	var errs []error
	out := make([]Device, 0, n)
	for i := range n {
		h, r := nvml.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			errs = append(errs, nvmlErr(fmt.Sprintf("device %d", i), r))
			continue
		}
		d := Device{Index: i, Utilization: -1, MemoryUtilization: -1}
		if s, r := h.GetName(); r == nvml.SUCCESS {
			d.Name = s
		}
		if s, r := h.GetUUID(); r == nvml.SUCCESS {
			d.UUID = s
		}
		if m, r := h.GetMemoryInfo(); r == nvml.SUCCESS {
			d.MemoryTotal, d.MemoryFree, d.MemoryUsed = m.Total, m.Free, m.Used
		} else {
			errs = append(errs, nvmlErr(fmt.Sprintf("device %d memory", i), r))
		}
		if u, r := h.GetUtilizationRates(); r == nvml.SUCCESS {
			d.Utilization, d.MemoryUtilization = int(u.Gpu), int(u.Memory)
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}
