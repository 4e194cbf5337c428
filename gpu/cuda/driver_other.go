//go:build !linux

package cuda

import (
	"github.com/drmas-dev/drmas/gpu/ir"
)

var errNotLinux = &InitError{Reason: "the CUDA driver binding is Linux-only"}

// Init always fails off Linux.
func Init() error { return errNotLinux }

// DeviceCount is 0 off Linux.
func DeviceCount() int { return 0 }

// DeviceUUIDs fails off Linux.
func DeviceUUIDs() ([]string, error) { return nil, errNotLinux }

// Device is unavailable off Linux; its methods exist so callers compile.
type Device struct{}

// Open always fails off Linux.
func Open(int) (*Device, error) { return nil, errNotLinux }

// Name is empty.
func (d *Device) Name() string { return "" }

// Ordinal is -1.
func (d *Device) Ordinal() int { return -1 }

// UUID is empty.
func (d *Device) UUID() string { return "" }

// Alloc fails.
func (d *Device) Alloc(int) (ir.Ptr, error) { return 0, errNotLinux }

// Free fails.
func (d *Device) Free(ir.Ptr) error { return errNotLinux }

// WriteF32 fails.
func (d *Device) WriteF32(ir.Ptr, []float32) error { return errNotLinux }

// WriteI32 fails.
func (d *Device) WriteI32(ir.Ptr, []int32) error { return errNotLinux }

// ReadF32 fails.
func (d *Device) ReadF32([]float32, ir.Ptr) error { return errNotLinux }

// Zero fails.
func (d *Device) Zero(ir.Ptr, int) error { return errNotLinux }

// Sync fails.
func (d *Device) Sync() error { return errNotLinux }

// MemInfo fails.
func (d *Device) MemInfo() (uint64, uint64, error) { return 0, 0, errNotLinux }

// Launch fails.
func (d *Device) Launch(string, [3]int, [3]int, ...ir.Arg) error { return errNotLinux }

// Close does nothing.
func (d *Device) Close() error { return nil }
