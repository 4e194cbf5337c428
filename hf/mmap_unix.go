//go:build unix

package hf

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps f read-only: the pages are the page cache's, so a 1 GB checkpoint costs no
// heap and no copy. release unmaps it.
func mapFile(f *os.File, size int64) (data []byte, release func() error, err error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("map %s: %d bytes do not fit the address space", f.Name(), size)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", f.Name(), err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
