package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/conf"
)

// This file holds the limits that keep one client, or many, from exhausting
// the proxy or the upstream (conf.Limits, README "Limits"): connection
// count, message and query size, authentication, idle and write timeouts,
// and the statement timeout and concurrency of rewritten private queries.

// SQLSTATEs of the limits.
const (
	codeTooManyConnections = "53300"
	codeProgramLimit       = "54000"
	codeIdleTimeout        = "57P05"
	codeInFailedTx         = "25P02"
)

// limiter is the server-wide state of the limits. It is safe for concurrent
// use: conns is atomic and private is a channel used as a semaphore.
type limiter struct {
	cfg conf.Limits
	// conns counts accepted client connections not yet closed.
	conns atomic.Int64
	// private holds one token per rewritten private query running upstream.
	private chan struct{}
}

func newLimiter(l conf.Limits) *limiter {
	l = l.WithDefaults()
	return &limiter{cfg: l, private: make(chan struct{}, l.MaxConcurrentPrivate)}
}

// admit counts a new client connection. Over max_connections, it answers the
// client's startup with FATAL 53300 (forwarding a CancelRequest first, which
// frees resources rather than taking them) and closes it; it never blocks
// the accept loop.
func (s *Server) admit(conn net.Conn) bool {
	if s.lim.conns.Add(1) <= int64(s.lim.cfg.MaxConnections) {
		return true
	}
	s.lim.conns.Add(-1)
	s.log.Warn("connection refused: limits.max_connections reached", "remote", conn.RemoteAddr().String(), "max", s.lim.cfg.MaxConnections)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer conn.Close()
		// Read the startup packet before answering: closing a socket with
		// unread data sends RST, and the client would not see the message.
		conn.SetDeadline(time.Now().Add(time.Second))
		be := pgproto3.NewBackend(conn, conn)
		for range 3 {
			msg, err := be.ReceiveStartupMessage()
			if err != nil {
				return
			}
			switch m := msg.(type) {
			case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
				if _, err := conn.Write([]byte{'N'}); err != nil {
					return
				}
				continue
			case *pgproto3.CancelRequest:
				if len(m.SecretKey) == 4 {
					s.cancel(cancelKey{m.ProcessID, binary.BigEndian.Uint32(m.SecretKey)})
				}
				return
			}
			be.Send(fatalResponse(codeTooManyConnections, "sorry, too many clients already"))
			be.Flush()
			return
		}
	}()
	return false
}

// leave uncounts a connection counted by admit.
func (s *Server) leave() { s.lim.conns.Add(-1) }

// armIdle starts the idle clock before the session waits for a message. A
// shutdown wake-up (a read deadline of now) set later still wins.
//
// Moving a deadline updates a runtime timer, which costs more than the
// rest of a cached pass-through query's bookkeeping, so deadlines move
// lazily: only when the one set would fire less than d from now, and then
// to d + d/8 from now. The idle timeout therefore ends a session between
// d and 9d/8 after its last message; a deadline that fires early is told
// apart by idleExpired and re-armed.
func (ss *session) armIdle() {
	ss.idleSince = time.Now()
	if d := ss.srv.lim.cfg.IdleTimeout; d > 0 {
		ss.readDeadline = lazyDeadline(ss.client.SetReadDeadline, ss.readDeadline, ss.idleSince, d)
	}
}

// lazyDeadline returns the deadline to keep: cur if it is at least d after
// now, else now + d + d/8, which it sets.
func lazyDeadline(set func(time.Time) error, cur, now time.Time, d time.Duration) time.Time {
	if !cur.IsZero() && cur.Sub(now) >= d {
		return cur
	}
	next := now.Add(d + d/8)
	set(next)
	return next
}

// idleExpired reports whether a read timeout was the idle timeout (rather
// than a shutdown wake-up or a lazily set deadline that fired early); if
// so it tells the client, which is then closed.
func (ss *session) idleExpired() bool {
	d := ss.srv.lim.cfg.IdleTimeout
	if d <= 0 || time.Since(ss.idleSince) < d {
		ss.readDeadline = time.Time{} // it fired: set it again
		return false
	}
	ss.log.Info("idle timeout", "after", d)
	ss.send(fatalResponse(codeIdleTimeout, fmt.Sprintf("terminating connection due to idle-session timeout (limits.idle_timeout = %v)", d)))
	ss.flush()
	return true
}

// armWrite bounds how long one flush to the client may block (between d
// and 9d/8, see armIdle): a client that stops reading its results would
// otherwise hold an upstream connection.
func (ss *session) armWrite() {
	if d := ss.srv.lim.cfg.WriteTimeout; d > 0 {
		ss.writeDeadline = lazyDeadline(ss.client.SetWriteDeadline, ss.writeDeadline, time.Now(), d)
	}
}

// writeFailed closes the client connection after a failed or timed-out
// write: part of a message may have gone out, so the stream is unusable, and
// the session must end rather than wait for its next message.
func (ss *session) writeFailed(err error) error {
	if err != nil {
		ss.client.Close()
	}
	return err
}

// overLimit refuses a Query or Parse whose SQL text exceeds
// limits.max_query_length, before it reaches the parser: the error, then
// ReadyForQuery (simple protocol) or a skip to Sync (extended protocol).
// handled reports that the message was answered; ok is false when the
// connection must end.
func (ss *session) overLimit(msg pgproto3.FrontendMessage) (handled, ok bool) {
	var n int
	extended := false
	switch m := msg.(type) {
	case *pgproto3.Query:
		n = len(m.String)
	case *pgproto3.Parse:
		n, extended = len(m.Query), true
	default:
		return false, true
	}
	max := ss.srv.lim.cfg.MaxQueryLength
	if n <= max {
		return false, true
	}
	ss.log.Warn("query refused: limits.max_query_length", "length", n, "max", max)
	ss.send(errorResponse(newError(codeProgramLimit, "query of %d bytes exceeds the maximum of %d (limits.max_query_length)", n, max)))
	if extended {
		if !ss.skipToSync() {
			return true, false
		}
	} else {
		ss.send(&pgproto3.ReadyForQuery{TxStatus: ss.txStatus()})
	}
	return true, ss.flush() == nil
}

// enterPrivate prepares the upstream connection for one rewritten private
// query: it waits for one of limits.max_concurrent_private_queries slots,
// then makes the upstream statement_timeout limits.statement_timeout for
// this query only, whatever the client SET: in a transaction of its own
// (BEGIN READ ONLY; SET LOCAL) outside a transaction block, in a savepoint
// inside one (ROLLBACK TO undoes the SET LOCAL, and a failure of the
// private query leaves the client's transaction usable). The caller must
// call the returned end once the query's result has been read, even if it
// failed; end's error is an upstream failure.
// privateWorkMem raises work_mem to at least 64MB for the rewritten query's
// transaction only (SET LOCAL semantics: is_local = true), never lowering a
// larger value the operator set for the proxy's role. With
// max_concurrent_private_queries at its default of 16 this bounds the extra
// memory to 16 × 64MB × hash_mem_multiplier.
const privateWorkMem = "SELECT set_config('work_mem', greatest(pg_size_bytes(current_setting('work_mem')) / 1024, 65536)::text, true)"

func (ss *session) enterPrivate(ctx context.Context) (end func() error, err error) {
	pc := ss.upstream.Conn().PgConn()
	begin, finish := "", ""
	switch pc.TxStatus() {
	case 'I':
		begin, finish = "BEGIN READ ONLY", "COMMIT"
	case 'T':
		begin, finish = "SAVEPOINT dpproxy_private", "ROLLBACK TO SAVEPOINT dpproxy_private; RELEASE SAVEPOINT dpproxy_private"
	default:
		return nil, newError(codeInFailedTx, "current transaction is aborted, commands ignored until end of transaction block")
	}
	select {
	case ss.srv.lim.private <- struct{}{}:
	case <-ctx.Done():
		return nil, &Error{Code: codeCanceled, Message: "canceling statement while it waited for a free slot (limits.max_concurrent_private_queries)", cause: ctx.Err()}
	}
	release := func() { <-ss.srv.lim.private }
	ms := ss.srv.lim.cfg.StatementTimeout.Milliseconds()
	// privateWorkMem keeps the per-unit pre-aggregation's hash table in
	// memory (bench/RESULTS.md: at the default 4MB it spills to disk).
	if _, err := pc.Exec(ctx, begin+"; SET LOCAL statement_timeout = "+strconv.FormatInt(ms, 10)+"; "+privateWorkMem).ReadAll(); err != nil {
		release()
		switch {
		case finish == "COMMIT" && pc.TxStatus() != 'I':
			pc.Exec(ctx, "ROLLBACK").ReadAll()
		case finish != "COMMIT" && pc.TxStatus() == 'E':
			pc.Exec(ctx, finish).ReadAll()
		}
		return nil, &Error{Code: codeInternal, Message: "the database failed to start the private query; no value is shown and the privacy charge is kept", cause: err}
	}
	return func() error {
		defer release()
		_, err := pc.Exec(ctx, finish).ReadAll()
		return err
	}, nil
}

// abandonUpstream closes the upstream connection in the middle of a result
// the client can no longer take (its write failed or timed out). Draining
// the rest instead would keep the session, its connection slot and the
// upstream busy for as long as the result is large; the closed connection is
// dropped from the pool when the session ends.
func (ss *session) abandonUpstream() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ss.upstream.Conn().PgConn().Close(ctx)
}
