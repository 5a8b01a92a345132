package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// Cancelling upstream statements. Each message a session handles runs
// under the session's statement context (stmtContext), which a
// CancelRequest for the session, or the watcher finding its client gone,
// ends (cancelUpstream). Everything the message waits for then stops: a
// wait for a private-query slot or for the analysis of long texts at once,
// and an upstream statement through pgconn's context watcher, which for
// the query pool sends the upstream a CancelRequest
// (cancelUpstreamOnDone) instead of breaking the connection, so that the
// statement ends upstream and the session can go on. A private query on
// its clock (clock.go) takes the cancel there instead (deferCancel): it
// acts at the end of a time slot. A portal streaming from the upstream
// (portal.go) watches the context itself.
//
// PostgreSQL does not notice that a client went away while a statement
// runs: it reads nothing from the client until the statement ends, and a
// statement that sends no rows (a count over a huge series) runs to its end
// or its statement_timeout. The proxy's watcher looks at the client socket
// of every session busy with one message for more than clientCheckInterval,
// as PostgreSQL's client_connection_check_interval does (poll for
// POLLRDHUP, clientgone_linux.go), and cancels that message's work.

const (
	// clientCheckInterval is how often the watcher looks for clients gone
	// during a long statement: a statement goes on at most about twice
	// this after its client left.
	clientCheckInterval = 500 * time.Millisecond
	// cancelDeadline is how long after a cancel the upstream has to end
	// the statement before the connection is closed instead.
	cancelDeadline = 2 * time.Second
)

// cancelUpstreamOnDone is the query pool's context-watcher handler: a
// context that ends during an upstream call sends a CancelRequest at once,
// and breaks the connection only if the upstream has not answered within
// cancelDeadline.
func cancelUpstreamOnDone(pc *pgconn.PgConn) ctxwatch.Handler {
	return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: cancelDeadline}
}

// stmtContext returns the context of the message the session is about to
// handle, and marks the session busy (inQuery). The context lives across
// messages until a cancel ends it; a fresh one follows.
func (ss *session) stmtContext() context.Context {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.inQuery = true
	ss.msgSeq++
	if ss.stmtCtx == nil || ss.stmtCtx.Err() != nil {
		ss.stmtCtx, ss.stmtCancel = context.WithCancel(context.Background())
	}
	return ss.stmtCtx
}

// cancelUpstream ends what the session is doing for its current message:
// the CancelRequest of a client, or its client gone. It is called from
// other goroutines. A message that ended meanwhile is not affected: a
// cancel between messages is ignored, as PostgreSQL ignores a cancel for
// an idle backend.
func (ss *session) cancelUpstream() {
	if ss.deferCancel() { // clock.go: a private query's cancel waits for its slot's end
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.inQuery && ss.stmtCancel != nil {
		ss.stmtCancel() // its watchers run on goroutines of their own
	}
}

// canceled turns the error of an upstream call whose context ended (a
// cancel before the call reached the upstream, or a wait it cut short)
// into PostgreSQL's 57014; an error from the upstream itself, 57014
// included, is returned as it is.
func canceled(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if err == nil || ctx.Err() == nil || errors.As(err, &pgErr) {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: codeCanceled, Message: "canceling statement due to user request", cause: err}
}

// startWatch starts the watcher of clients gone during long statements;
// stopWatch (in Close) ends it.
func (s *Server) startWatch() {
	stop := make(chan struct{})
	s.lim.watchStop = stop
	go s.watchClients(stop)
}

func (s *Server) stopWatch() {
	s.lim.watchOnce.Do(func() {
		if s.lim.watchStop != nil {
			close(s.lim.watchStop)
		}
	})
}

func (s *Server) watchClients(stop <-chan struct{}) {
	t := time.NewTicker(clientCheckInterval)
	defer t.Stop()
	var busy []*session
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		busy = busy[:0]
		s.mu.Lock()
		for ss := range s.sessions {
			if ss.longMessage() {
				busy = append(busy, ss)
			}
		}
		s.mu.Unlock()
		for _, ss := range busy {
			if clientGone(ss.client) {
				ss.clientLeft()
			}
		}
	}
}

// longMessage reports whether the session has been busy with the same
// message since the watcher's last look (and the watcher has not cancelled
// it yet): only then is its client's socket checked, at every tick, since a
// client can leave at any time during a long statement.
func (ss *session) longMessage() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	long := ss.inQuery && ss.msgSeq == ss.watchSeq && ss.msgSeq != ss.goneSeq
	ss.watchSeq = ss.msgSeq
	return long
}

// clientLeft cancels the session's message, its client gone.
func (ss *session) clientLeft() {
	ss.mu.Lock()
	ss.goneSeq = ss.msgSeq
	ss.mu.Unlock()
	ss.log.Info("client gone during a statement: cancelling it upstream")
	ss.cancelUpstream()
}
