//go:build unix

package nvidiatest

import (
	"os"
	"path/filepath"
	"syscall"
)

// childLock serialises RunChild across the test processes of one `go test ./...` (packages
// run in parallel), so that each child's before/after view of /dev is its own. It returns the
// unlock function; on any error it does not lock.
func childLock() func() {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "drmas-nvidiatest.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}
