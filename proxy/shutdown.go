package proxy

import (
	"context"
	"time"
)

// Shutdown: the server stops accepting, lets every running message
// finish, then closes idle sessions with 57P01; if the caller's context
// ends first, every session still busy has its message cancelled (as a
// CancelRequest would: a private query on its clock at the end of its
// time slot, clock.go) and its client connection closed. A session then
// ends through close, which gives back its analyst's count, its cancel
// key and its upstream connection (upstream.go).
//
// The statement contexts do not derive from a server-wide one that the
// shutdown would end: that would cut a private query's bounded run short
// at once, off its clock, whose timing the clock exists to hide; the
// shutdown cancels each session's message as a client's cancel does.

func (ss *session) close() {
	ss.srv.unregister(ss)
	if ss.counted {
		ss.srv.lim.leaveAnalyst(ss.user.Name)
	}
	ss.mu.Lock()
	if ss.stmtCancel != nil {
		ss.stmtCancel()
	}
	ss.mu.Unlock()
	if ss.upstream != nil {
		ss.srv.mu.Lock()
		delete(ss.srv.upstreams, ss.upstream.Conn().PgConn())
		ss.srv.mu.Unlock()
		ss.releaseUpstream()
	}
	ss.client.Close()
}

// wakeForShutdown makes an idle session notice the shutdown; a session in
// the middle of a query finishes it first.
func (ss *session) wakeForShutdown() {
	ss.mu.Lock()
	ss.shutdown = true
	busy := ss.inQuery
	ss.mu.Unlock()
	if !busy {
		ss.client.SetReadDeadline(time.Now())
	}
}

func (ss *session) setInQuery(b bool) (shuttingDown bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.inQuery = b
	return ss.shutdown
}

// Shutdown stops accepting, lets every running query finish, then closes
// idle sessions with 57P01. If ctx ends first, remaining sessions have
// their message cancelled and are closed at once, and ctx.Err() is
// returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	for ln := range s.listeners {
		ln.Close()
	}
	for sess := range s.sessions {
		sess.wakeForShutdown()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for sess := range s.sessions {
			// Closing the client alone would not end a message that
			// waits (for the upstream, a private-query slot, the
			// ledger): its client is not read until it ends.
			sess.cancelUpstream()
			sess.client.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// Close releases the upstream pools. Call it after Shutdown.
func (s *Server) Close() {
	s.stopWatch()
	if s.replicas != nil {
		s.replicas.close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.ledgerDB != nil {
		s.ledgerDB.Close()
	}
}
