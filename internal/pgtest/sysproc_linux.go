package pgtest

import "syscall"

// sysProcAttr runs a child as cred (nil: as we are) and has the kernel kill
// it when this process dies, so a crashed test leaves no server behind. The
// child runs in a process group of its own: a Ctrl-C in the terminal
// signals the whole foreground group, and the server must not stop before
// its owner (the demo, say) has finished with it; the owner stops it (Stop).
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
