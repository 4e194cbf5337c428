package cuda

import (
	"errors"
	"testing"
)

// TestInitOnce checks the init guard: the result of Init never changes, and on a machine
// without the driver every entry point returns the same *InitError.
func TestInitOnce(t *testing.T) {
	err1, err2 := Init(), Init()
	if err1 != err2 {
		t.Fatalf("Init changed its result: %v then %v", err1, err2)
	}
	if err1 == nil {
		t.Logf("CUDA driver present: %d device(s)", DeviceCount())
		return
	}
	var ie *InitError
	if !errors.As(err1, &ie) || !errors.Is(err1, ErrNoCUDA) {
		t.Fatalf("Init error %v is not an *InitError", err1)
	}
	t.Logf("no CUDA (expected on CI): %v", err1)
	if DeviceCount() != 0 {
		t.Error("DeviceCount > 0 after a failed Init")
	}
	if _, err := Open(0); err != err1 {
		t.Errorf("Open after a failed Init: %v, want the Init error", err)
	}
	if _, err := DeviceUUIDs(); err != err1 {
		t.Errorf("DeviceUUIDs after a failed Init: %v", err)
	}
}

func TestFormatUUID(t *testing.T) {
	u := [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 0xff}
	if got, want := FormatUUID(u), "GPU-01234567-89ab-cdef-0001-0203040506ff"; got != want {
		t.Errorf("FormatUUID = %s, want %s", got, want)
	}
}
