//go:build linux && !race

package hugemem

import (
	"syscall"
	"unsafe"
)

// mapHuge maps size+2 MiB anonymous bytes and returns the mapping and its first 2 MiB-aligned
// size bytes, advised onto huge pages; (nil, nil) when the mapping fails (the caller then
// uses the Go heap). A failed madvise (THP compiled out) leaves ordinary pages.
func mapHuge(size int) (whole, b []byte) {
	m, err := syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	off := int((addr+hugePage-1)&^(hugePage-1) - addr)
	b = m[off : off+size : off+size]
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
	return m, b
}

func unmap(m []byte) { _ = syscall.Munmap(m) }
