package proxy

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// TestClientGone: the watcher's check tells a connection whose client
// closed it, even with unread data before the close, from an open one,
// without reading.
func TestClientGone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("POLLRDHUP is Linux's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (server, client net.Conn) {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { server.Close(); client.Close() })
		return server, client
	}
	s1, c1 := pair()
	if clientGone(s1) {
		t.Error("open connection reported gone")
	}
	c1.Write([]byte("pipelined message"))
	time.Sleep(20 * time.Millisecond)
	if clientGone(s1) {
		t.Error("open connection with unread data reported gone")
	}
	c1.Close()
	waitFor(t, func() bool { return clientGone(s1) }, "closed connection with unread data not reported gone")
	s2, c2 := pair()
	c2.Close()
	waitFor(t, func() bool { return clientGone(s2) }, "closed connection not reported gone")
	if buf := make([]byte, 64); true {
		n, _ := s1.Read(buf)
		if string(buf[:n]) != "pipelined message" {
			t.Errorf("the check consumed data: read %q", buf[:n])
		}
	}
}
