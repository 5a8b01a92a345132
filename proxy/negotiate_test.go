package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// negotiation runs Server.negotiate on one end of a pipe, with the client
// at the other end.
type negotiation struct {
	fe   *pgproto3.Frontend
	conn net.Conn // the client's end
	done chan negotiated
}

type negotiated struct {
	msg pgproto3.FrontendMessage
	err error
}

func startNegotiation(t *testing.T, s *Server, rounds int) *negotiation {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	deadline := time.Now().Add(5 * time.Second)
	server.SetDeadline(deadline)
	client.SetDeadline(deadline)
	n := &negotiation{fe: pgproto3.NewFrontend(client, client), conn: client, done: make(chan negotiated, 1)}
	go func() {
		_, _, msg, err := s.negotiate(server, pgproto3.NewBackend(server, server), nil, 1<<20, rounds)
		n.done <- negotiated{msg, err}
	}()
	return n
}

// send writes a startup packet; answer reads the one-byte answer to an
// SSLRequest or a GSSENCRequest.
func (n *negotiation) send(t *testing.T, msg pgproto3.FrontendMessage) {
	t.Helper()
	n.fe.Send(msg)
	if err := n.fe.Flush(); err != nil {
		t.Fatalf("send %T: %v", msg, err)
	}
}

func (n *negotiation) answer(t *testing.T) byte {
	t.Helper()
	var b [1]byte
	if _, err := io.ReadFull(n.conn, b[:]); err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return b[0]
}

// TestNegotiate: without TLS, SSLRequest and GSSENCRequest are answered
// 'N' and the StartupMessage that follows is returned, whatever its
// version; a CancelRequest
// cancels the message of the session holding its key and ends the
// connection; the requests a caller allows are bounded.
func TestNegotiate(t *testing.T) {
	s := &Server{cancels: map[cancelKey]*session{}, sessions: map[*session]struct{}{}}

	n := startNegotiation(t, s, 0)
	n.send(t, &pgproto3.SSLRequest{})
	if b := n.answer(t); b != 'N' {
		t.Errorf("SSLRequest without TLS answered %q, want 'N'", b)
	}
	n.send(t, &pgproto3.GSSEncRequest{})
	if b := n.answer(t); b != 'N' {
		t.Errorf("GSSENCRequest answered %q, want 'N'", b)
	}
	n.send(t, &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "alice"}})
	got := <-n.done
	if m, ok := got.msg.(*pgproto3.StartupMessage); got.err != nil || !ok || m.Parameters["user"] != "alice" {
		t.Errorf("negotiate = %#v, %v; want the StartupMessage", got.msg, got.err)
	}

	// The protocol version is the caller's to check (startup refuses 3.2).
	n = startNegotiation(t, s, 0)
	n.send(t, &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion32, Parameters: map[string]string{"user": "alice"}})
	if got := <-n.done; got.err != nil || got.msg.(*pgproto3.StartupMessage).ProtocolVersion != pgproto3.ProtocolVersion32 {
		t.Errorf("negotiate of a 3.2 StartupMessage = %#v, %v; want it returned", got.msg, got.err)
	}

	// A CancelRequest ends the message in progress of the session with its key.
	ss := &session{srv: s}
	key, err := s.register(ss)
	if err != nil {
		t.Fatal(err)
	}
	ss.key = key
	ctx := ss.stmtContext()
	n = startNegotiation(t, s, 0)
	var secret [4]byte
	binary.BigEndian.PutUint32(secret[:], key.secret)
	n.send(t, &pgproto3.CancelRequest{ProcessID: key.pid, SecretKey: secret[:]})
	if got := <-n.done; !errors.Is(got.err, errHandled) {
		t.Errorf("negotiate of a CancelRequest = %#v, %v; want errHandled", got.msg, got.err)
	}
	if ctx.Err() == nil {
		t.Error("the CancelRequest did not cancel the session's message")
	}
	s.unregister(ss)

	// At most rounds requests (a connection refused over max_connections).
	n = startNegotiation(t, s, 2)
	for range 2 {
		n.send(t, &pgproto3.SSLRequest{})
		if b := n.answer(t); b != 'N' {
			t.Errorf("SSLRequest answered %q, want 'N'", b)
		}
	}
	if got := <-n.done; !errors.Is(got.err, errHandled) {
		t.Errorf("negotiate past its rounds = %#v, %v; want errHandled", got.msg, got.err)
	}
}
