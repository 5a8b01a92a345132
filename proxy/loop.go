package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The message loop: the stage of a session after its startup
// (negotiate.go) until Terminate, an I/O error, the idle timeout
// (deadlines.go) or the server's shutdown (shutdown.go). Each message runs
// under the session's statement context (cancel.go).

// loop reads and answers messages until Terminate, an I/O error or shutdown.
func (ss *session) loop() {
	ss.markReleasable() // sessionidle.go
	for {
		ss.armIdle()
		if ss.setInQuery(false) {
			ss.send(fatalResponse(pgerr.AdminShutdown, "terminating connection due to administrator command"))
			ss.flush()
			return
		}
		msg, err := ss.receive() // sessionidle.go: the idle wait, without a buffer
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if ss.idleExpired() {
					return
				}
				continue // woken for shutdown: the check above ends the session
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				ss.log.Info("receive failed", "err", err)
				ss.send(fatalResponse(pgerr.ProtocolViolation, "invalid message from client: "+sanitizeProtocolError(err)))
				ss.flush()
			}
			return
		}
		ctx := ss.stmtContext() // cancel.go
		if handled, ok := ss.overLimit(ctx, msg); handled {
			if !ok {
				return
			}
			continue
		}
		if handled, ok := ss.takeBackend(ctx, msg); handled { // pool.go
			if !ok {
				return
			}
			continue
		}
		if !ss.keepUpstream(ctx, msg) { // replicas.go
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			ss.simpleQuery(ctx, m.String)
		case *pgproto3.Terminate:
			return
		case *pgproto3.Sync:
			ss.sync(ctx)
		case *pgproto3.Flush:
		case *pgproto3.Parse, *pgproto3.Bind, *pgproto3.Describe, *pgproto3.Execute, *pgproto3.Close:
			if err := ss.extendedMessage(ctx, m); err != nil {
				// As PostgreSQL does: the error, sent at once (a client
				// may wait for it without a Sync: asyncpg prepares with
				// Parse, Describe, Flush), then discard until Sync.
				ss.sendError(err)
				if ss.flush() != nil || !ss.skipToSync(ctx) {
					return
				}
			} else {
				// As PostgreSQL does, answers to Parse, Bind, Describe,
				// Execute and Close stay buffered until Sync or Flush: one
				// write per batch instead of one per message.
				continue
			}
		default:
			ss.send(fatalResponse(pgerr.ProtocolViolation, fmt.Sprintf("unexpected message %T", msg)))
			ss.flush()
			return
		}
		if err := ss.flush(); err != nil {
			return
		}
		ss.giveBackBackend(ctx) // pool.go
	}
}

// sync ends an extended-protocol batch, upstream too (portal.go). Outside
// a transaction block the portals are gone, as PostgreSQL closes them at
// transaction end.
func (ss *session) sync(ctx context.Context) {
	if err := ss.endBatch(ctx); err != nil {
		ss.sendError(err)
	}
	ss.abortBlock(ctx) // after an error in the batch (txabort.go)
	status := ss.txStatus()
	if status == 'I' {
		clear(ss.portals)
	}
	ss.send(readyForQuery(status))
}

// skipToSync discards messages until Sync and answers it, as PostgreSQL does
// after an error in an extended-protocol batch.
func (ss *session) skipToSync(ctx context.Context) bool {
	for {
		msg, err := ss.backend.Receive()
		if err != nil {
			return false
		}
		switch msg.(type) {
		case *pgproto3.Sync:
			ss.sync(ctx)
			return true
		case *pgproto3.Terminate:
			return false
		}
	}
}

// sanitizeProtocolError keeps protocol errors short and free of payload bytes.
func sanitizeProtocolError(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 120 {
		msg = msg[:120]
	}
	return msg
}
