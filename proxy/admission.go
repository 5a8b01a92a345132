package proxy

import (
	"errors"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Admission: the accept loop and the counts a connection must fit in
// before it becomes a session: limits.max_connections for every client
// connection (admit), limits.max_connections_per_analyst once it is
// authenticated (enterAnalyst, called by begin.go).

// Serve accepts connections on ln until Shutdown or Close. It returns
// net.ErrClosed after a shutdown, any other accept error otherwise.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return net.ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Temporary failure (e.g. out of file descriptors): back off as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if !s.admit(conn) {
			continue
		}
		sess := s.newSession(conn)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.leave()
			sess.serve()
		}()
	}
}

// admit counts a new client connection. Over max_connections, it answers the
// client's startup with FATAL 53300 (forwarding a CancelRequest first, which
// frees resources rather than taking them) and closes it; it never blocks
// the accept loop.
func (s *Server) admit(conn net.Conn) bool {
	if s.lim.conns.Add(1) <= int64(s.lim.maxConns) {
		return true
	}
	s.lim.conns.Add(-1)
	s.log.Warn("connection refused: limits.max_connections reached", "remote", conn.RemoteAddr().String(), "max", s.lim.maxConns)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer conn.Close()
		// Read the startup packet before answering: closing a socket with
		// unread data sends RST, and the client would not see the message.
		conn.SetDeadline(time.Now().Add(time.Second))
		be := pgproto3.NewBackend(conn, conn)
		// TLS is not offered: the answer is a refusal either way.
		_, be, _, err := s.negotiate(conn, be, nil, 0, 3)
		if err != nil {
			return
		}
		be.Send(fatalResponse(pgerr.TooManyConnections, "sorry, too many clients already"))
		be.Flush()
	}()
	return false
}

// leave uncounts a connection counted by admit.
func (s *Server) leave() { s.lim.conns.Add(-1) }

// enterAnalyst counts an authenticated session of analyst, unless the
// analyst has limits.max_connections_per_analyst already; the caller must
// call leaveAnalyst when the session ends if it returns true.
func (l *limiter) enterAnalyst(analyst string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions[analyst] >= l.cfg.MaxConnectionsPerAnalyst {
		return false
	}
	l.sessions[analyst]++
	return true
}

func (l *limiter) leaveAnalyst(analyst string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions[analyst]--; l.sessions[analyst] <= 0 {
		delete(l.sessions, analyst)
	}
}
