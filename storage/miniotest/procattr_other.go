//go:build !linux

package miniotest

import "os/exec"

func setProcAttr(cmd *exec.Cmd) {}
