package main

import (
	"os"
	"syscall"
)

// stopWithParent has the kernel send this process SIGTERM when its parent
// dies, which the demo handles as a clean stop. "go run" is such a parent:
// it dies of a SIGTERM sent to it without passing it on, and it would
// leave the demo (and its throwaway PostgreSQL) running behind it.
func stopWithParent() {
	ppid := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return
	}
	// The parent may have died before the call: the signal would never come.
	if os.Getppid() != ppid {
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
