package miniotest

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server if the test process dies without
// running its cleanups (a panic, a timeout kill).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
