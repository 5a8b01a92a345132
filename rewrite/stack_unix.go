//go:build unix

package rewrite

import "syscall"

// stackLimit returns the soft RLIMIT_STACK in bytes, which glibc gives the
// threads the Go runtime starts for cgo calls; 0 when unlimited or unknown.
func stackLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &r); err != nil || r.Cur == ^uint64(0) { // RLIM_INFINITY
		return 0
	}
	return uint64(r.Cur)
}
