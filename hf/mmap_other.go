//go:build !unix

package hf

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads f into memory where memory maps are not available through syscall.
func mapFile(f *os.File, size int64) (data []byte, release func() error, err error) {
	data = make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), data); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return data, func() error { return nil }, nil
}
