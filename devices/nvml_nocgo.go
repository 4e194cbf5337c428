//go:build !cgo

package devices

// Without cgo go-nvml cannot be compiled in: the binary always runs in CPU mode.

func nvmlInit() error {
	return &NoDriverError{Reason: "drmas built without cgo, NVML unavailable"}
}

func nvmlDevices() ([]Device, error) { return nil, nvmlInit() }
