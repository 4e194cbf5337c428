//go:build cgo

package devices

import (
	"errors"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
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
		if r := nvml.Init(); r != nvml.SUCCESS {
			initErr = noDriver(r)
		}
	})
	return initErr
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
