//go:build !(aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris)

package handler

import "os/exec"

// killGroupOnCancel leaves exec's default: cancellation kills the process
// only. Process groups are not available here through the standard
// library; a program's own children may outlive a timeout.
func killGroupOnCancel(*exec.Cmd) {}
