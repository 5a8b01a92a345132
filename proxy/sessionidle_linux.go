package proxy

import "golang.org/x/sys/unix"

// canAwait: awaitClient can wait for a client without reading from it.
const canAwait = true

// readable is awaitClient's test of the client's socket: a byte to read
// (peeked, not taken), the end of the stream or an error, all of which
// Receive then reads.
func readable(fd uintptr) bool {
	var b [1]byte
	_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err != unix.EAGAIN && err != unix.EINTR
}
