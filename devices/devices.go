// Package devices finds NVIDIA GPUs through NVML (github.com/NVIDIA/go-nvml), samples their
// memory and utilisation for metrics, and plans where the actor backends and learners of a
// config would fit (Place).
//
// NVML is loaded at run time (dlopen of libnvidia-ml.so.1). On a machine without the driver
// nvml.Init fails cleanly with ERROR_LIBRARY_NOT_FOUND, and calling any other NVML function
// afterwards kills the process. All NVML use therefore goes through one guard (nvmlInit in
// nvml.go): Init runs once per process, and if it fails no NVML function is ever called again;
// Discover then returns a *NoDriverError (errors.Is(err, ErrNoDriver)) and Telemetry a nil map.
// Builds without cgo behave as a machine without the driver.
package devices

import (
	"context"
	"errors"
	"fmt"
)

// Device is one GPU as NVML reports it.
type Device struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	MemoryTotal uint64 `json:"memory_total"` // bytes
	MemoryFree  uint64 `json:"memory_free"`  // bytes
	MemoryUsed  uint64 `json:"memory_used"`  // bytes
	// Utilization is the share of time a kernel ran over the last sample period, in percent;
	// MemoryUtilization the share of time memory was read or written; -1: not reported.
	Utilization       int `json:"utilization"`
	MemoryUtilization int `json:"memory_utilization"`
}

// Sample is one telemetry reading of a device.
type Sample struct {
	MemoryUsed        uint64 `json:"memory_used"`  // bytes
	MemoryTotal       uint64 `json:"memory_total"` // bytes
	Utilization       int    `json:"utilization"`  // percent; -1: not reported
	MemoryUtilization int    `json:"memory_utilization"`
}

// ErrNoDriver is matched (errors.Is) by the error of Discover on a machine where NVML cannot
// be used: stages run on the CPU engine.
var ErrNoDriver = errors.New("no NVIDIA driver")

// NoDriverError says why NVML is unusable. It is the normal result on machines without
// NVIDIA GPUs, not a failure.
type NoDriverError struct {
	// Code is NVML's return code of nvmlInit (12: ERROR_LIBRARY_NOT_FOUND), or 0 when NVML
	// was not compiled in (no cgo).
	Code int
	// Reason is a short explanation, e.g. "libnvidia-ml.so.1 not found".
	Reason string
}

func (e *NoDriverError) Error() string { return "no NVIDIA driver (" + e.Reason + ")" }

// Is makes errors.Is(err, ErrNoDriver) true.
func (e *NoDriverError) Is(target error) bool { return target == ErrNoDriver }

// CPUModeLine is the one line `drmas devices` prints when Discover finds no driver.
func CPUModeLine(err error) string {
	var nd *NoDriverError
	if errors.As(err, &nd) {
		return "CPU mode: " + nd.Error() + "; stages run on the CPU engine"
	}
	return "CPU mode: " + err.Error() + "; stages run on the CPU engine"
}

// Discover lists the GPUs. Without a usable driver it returns a *NoDriverError
// (errors.Is(err, ErrNoDriver)) and no devices; other errors are NVML failures after a
// successful Init. Safe for concurrent use.
func Discover() ([]Device, error) {
	if err := nvmlInit(); err != nil {
		return nil, err
	}
	return nvmlDevices()
}

// Telemetry samples memory use and utilisation per device index. In CPU mode (no driver) it
// returns a nil map and no error, so a learner can call it unconditionally every step.
func Telemetry(ctx context.Context) (map[int]Sample, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := nvmlInit(); err != nil {
		if errors.Is(err, ErrNoDriver) {
			return nil, nil
		}
		return nil, err
	}
	devs, err := nvmlDevices()
	if err != nil {
		return nil, err
	}
	out := make(map[int]Sample, len(devs))
	for _, d := range devs {
		out[d.Index] = Sample{MemoryUsed: d.MemoryUsed, MemoryTotal: d.MemoryTotal, Utilization: d.Utilization, MemoryUtilization: d.MemoryUtilization}
	}
	return out, nil
}

// Bytes formats n bytes in binary units, e.g. "1.5 GiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
