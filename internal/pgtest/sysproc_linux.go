package pgtest

import "syscall"

// sysProcAttr runs a child as cred (nil: as we are) and has the kernel kill
// it when this process dies, so a crashed test leaves no server behind.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}
