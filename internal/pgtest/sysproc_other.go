//go:build !linux

package pgtest

import "syscall"

// sysProcAttr runs a child as cred (nil: as we are). Without Pdeathsig a
// server outlives a test process that dies without calling Stop.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
