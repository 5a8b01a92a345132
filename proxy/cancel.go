package proxy

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Cancelling upstream statements. Each message a session handles runs
// under the session's statement context (stmtContext), which a
// CancelRequest for the session, the watcher finding its client gone, or
// the end of the server's shutdown grace ends (cancelUpstream). Everything the message waits for then stops: a
// wait for a private-query slot or for the analysis of long texts at once,
// and an upstream statement through pgconn's context watcher, which for
// the query pool sends the upstream a CancelRequest
// (cancelUpstreamOnDone) instead of breaking the connection, so that the
// statement ends upstream and the session can go on. A private query on
// its clock (clock.go) takes the cancel there instead (deferCancel): it
// acts at the end of a time slot. A portal streaming from the upstream
// (portal.go) watches the context itself.
//
// Three things cancel a session's message, all through cancelUpstream:
//
//   - the client's CancelRequest, on a connection of its own
//     (negotiate.go), found by its key (Server.cancel);
//   - its client gone, seen by the watcher (clientgone.go);
//   - the server's shutdown, once its grace period ends (shutdown.go).
//
// And three waits stop when the message's context ends: the upstream
// query (pgconn's context watcher, cancelUpstreamOnDone; streamPortal's
// own watch), a private-query slot (acquirePrivate, slots.go; taken
// before the clock starts, so at once for all three) and the ledger
// (budget calls take the context; the ledger pool's connections use
// pgconn's default watcher, which breaks the connection, and a claim whose
// connection broke is discarded, which frees its lock). Where the contexts
// are built: stmtContext below, one per message until a cancel ends it;
// a private query derives one from it until its charge (privateQuery,
// clock.go) and one for its bounded run (privateClock.run), which only
// its clock ends.
//
// Deliberately, a cancel does not act at once on a private query on its
// clock (from privateResult's start to its end, private.go): its time
// would tell whether the answer was ready (docs/threat-model.md, "Timing";
// the response clock). deferCancel hands it to the clock, which stops the
// query at the end of the slot the cancel arrived in: the bounded run is
// cancelled upstream if it runs then, and a query that has not reached its
// charge has its waits ended (the ledger claim among them: privateQuery,
// clock.go) and is refused uncharged. After the charge, only the bounded
// run is cut short; the response leaves at a slot's end either way.

const (
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
	ss.unwakeLocked() // a message arrived as the watcher woke the idle session (sessionidle.go)
	ss.msgSeq++
	if ss.stmtCtx == nil || ss.stmtCtx.Err() != nil {
		ss.stmtCtx, ss.stmtCancel = context.WithCancel(context.Background())
	}
	return ss.stmtCtx
}

// cancelUpstream ends what the session is doing for its current message: the
// CancelRequest of a client, its client gone, or the end of the server's
// shutdown grace (shutdown.go). It is called from other goroutines. A
// message that ended meanwhile is not affected: a cancel between messages is
// ignored, as PostgreSQL ignores a cancel for an idle backend.
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
	if err == nil || ctx.Err() == nil {
		return err // before pgErr, which escapes: no allocation on success
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: pgerr.QueryCanceled, Message: "canceling statement due to user request", Cause: err}
}

// canceledWaiting is the error of a wait that a cancel or a disconnect
// ended.
func canceledWaiting(ctx context.Context, what string) error {
	return &Error{Code: pgerr.QueryCanceled, Message: "canceling statement due to user request (while it waited for " + what + ")", Cause: ctx.Err()}
}

// cancelKey is the key of a session's BackendKeyData, which a
// CancelRequest names.
type cancelKey struct{ pid, secret uint32 }

// register gives sess a fresh cancel key and counts it among the
// sessions that Shutdown and the watcher look at.
func (s *Server) register(sess *session) (cancelKey, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return cancelKey{}, err
		}
		// The process id is a positive int4, as PostgreSQL's are:
		// clients read it as one, and pg_backend_pid() returns it
		// (rewrite/sessionuser.go). The secret keeps its 32 bits.
		pid := binary.BigEndian.Uint32(b[:4]) & 0x7fffffff
		if pid == 0 {
			continue
		}
		k := cancelKey{pid, binary.BigEndian.Uint32(b[4:])}
		s.mu.Lock()
		if _, taken := s.cancels[k]; !taken {
			s.cancels[k] = sess
			s.sessions[sess] = struct{}{}
			s.mu.Unlock()
			return k, nil
		}
		s.mu.Unlock()
	}
}

func (s *Server) unregister(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess)
	if sess.key != (cancelKey{}) {
		delete(s.cancels, sess.key)
	}
	s.mu.Unlock()
}

// cancel forwards a client's CancelRequest to the upstream backend of the
// session holding that key. Unknown keys are ignored, as PostgreSQL does.
func (s *Server) cancel(k cancelKey) {
	s.mu.Lock()
	sess := s.cancels[k]
	s.mu.Unlock()
	if sess == nil {
		return
	}
	sess.cancelUpstream()
}
