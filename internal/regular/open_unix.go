//go:build unix

package regular

import "syscall"

// nonBlock makes opening a FIFO return at once instead of waiting for a writer.
const nonBlock = syscall.O_NONBLOCK
