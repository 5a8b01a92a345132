package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// This file holds the limits that keep one client, or many, from exhausting
// the proxy or the upstream (conf.Limits, docs/threat-model.md "Limits"):
// connection counts (all, and per analyst) sized against the upstream's
// max_connections, message and query size, authentication, idle and write
// timeouts, the statement timeout of every upstream statement, and the
// concurrency of private queries (all, and per analyst) and of the
// analysis of long texts. The guard before the parser is rewrite/guard.go;
// cancelling upstream statements is cancel.go.

// SQLSTATEs of the limits.
const (
	codeTooManyConnections = "53300"
	codeProgramLimit       = "54000"
	codeIdleTimeout        = "57P05"
	codeInFailedTx         = "25P02"
)

// limiter is the server-wide state of the limits. It is safe for concurrent
// use: conns is atomic, private and analysis are channels used as
// semaphores, mu guards the per-analyst maps.
type limiter struct {
	cfg conf.Limits
	// maxConns is limits.max_connections, lowered at start to what the
	// upstream can give (checkLimits); set before Serve, read-only after.
	maxConns int
	// conns counts accepted client connections not yet closed.
	conns atomic.Int64
	// private holds one token per private query in progress.
	private chan struct{}
	// analysis holds one token per analysis of a long text (analyze).
	analysis chan struct{}

	// watchStop ends the watcher of clients gone (cancel.go), once.
	watchStop chan struct{}
	watchOnce sync.Once

	mu sync.Mutex
	// sessions counts each analyst's authenticated sessions.
	sessions map[string]int
	// mine holds each analyst's private-query tokens, made on first use.
	mine map[string]chan struct{}
}

func newLimiter(l conf.Limits) *limiter {
	l = l.WithDefaults()
	return &limiter{
		cfg: l, maxConns: l.MaxConnections,
		private:  make(chan struct{}, l.MaxConcurrentPrivate),
		analysis: make(chan struct{}, max(1, runtime.GOMAXPROCS(0))),
		sessions: map[string]int{}, mine: map[string]chan struct{}{},
	}
}

// ledgerPoolSize is the size of the ledger's connection pool: a private
// query in progress holds one ledger connection (its budget.Claim) and one
// of max_concurrent_private_queries slots, and a few more serve SHOW
// dp.budget; more would only take upstream connections from analysts.
func ledgerPoolSize(l conf.Limits) int {
	return min(64, l.WithDefaults().MaxConcurrentPrivate+4)
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

// acquirePrivate waits for a slot for one private query of analyst: one of
// the analyst's limits.max_concurrent_private_queries_per_analyst, then one
// of the server's limits.max_concurrent_private_queries, so that one analyst
// cannot hold every slot. The wait ends after limits.private_query_wait,
// or when ctx ends (a CancelRequest, the client gone), with 57014: before
// anything is read or charged. The caller must call release.
func (l *limiter) acquirePrivate(ctx context.Context, analyst string) (release func(), err error) {
	l.mu.Lock()
	mine := l.mine[analyst]
	if mine == nil {
		mine = make(chan struct{}, l.cfg.MaxConcurrentPrivatePerAnalyst)
		l.mine[analyst] = mine
	}
	l.mu.Unlock()
	release = func() { <-l.private; <-mine }
	// The common case, a free slot, without a timer.
	select {
	case mine <- struct{}{}:
		select {
		case l.private <- struct{}{}:
			return release, nil
		default:
		}
		<-mine
	default:
	}
	wait := time.NewTimer(l.cfg.PrivateQueryWait)
	defer wait.Stop()
	select {
	case mine <- struct{}{}:
	case <-wait.C:
		return nil, newError(codeCanceled, "canceling statement: %d private queries of analyst %q are already in progress, and none ended within %v (limits.max_concurrent_private_queries_per_analyst, limits.private_query_wait)",
			cap(mine), analyst, l.cfg.PrivateQueryWait)
	case <-ctx.Done():
		return nil, canceledWaiting(ctx, "a private-query slot")
	}
	select {
	case l.private <- struct{}{}:
		return release, nil
	case <-wait.C:
		<-mine
		return nil, newError(codeCanceled, "canceling statement: all %d private-query slots of the proxy are in use, and none came free within %v (limits.max_concurrent_private_queries, limits.private_query_wait)",
			cap(l.private), l.cfg.PrivateQueryWait)
	case <-ctx.Done():
		<-mine
		return nil, canceledWaiting(ctx, "a private-query slot")
	}
}

// canceledWaiting is the error of a wait that a cancel or a disconnect
// ended.
func canceledWaiting(ctx context.Context, what string) error {
	return &Error{Code: codeCanceled, Message: "canceling statement due to user request (while it waited for " + what + ")", cause: ctx.Err()}
}

// analyze analyses sql. Texts longer than the parse cache keeps are
// analysed every time, and their analysis takes time and memory in
// proportion to their tokens (up to limits.max_query_tokens): at most
// GOMAXPROCS of them are analysed at once, so that many sessions sending
// long texts cannot take more memory than that many analyses. The wait
// ends with the session's statement (a cancel, the client gone) or after
// limits.statement_timeout.
func (ss *session) analyze(ctx context.Context, sql string) ([]*rewrite.Statement, error) {
	if len(sql) <= parseCacheMaxText {
		return ss.srv.analyze(sql)
	}
	sem := ss.srv.lim.analysis
	select {
	case sem <- struct{}{}:
	default:
		wait := time.NewTimer(ss.srv.lim.cfg.StatementTimeout)
		defer wait.Stop()
		select {
		case sem <- struct{}{}:
		case <-wait.C:
			return nil, newError(codeCanceled, "canceling statement: the proxy was busy analysing other long queries for %v (limits.statement_timeout)", ss.srv.lim.cfg.StatementTimeout)
		case <-ctx.Done():
			return nil, canceledWaiting(ctx, "the analysis of other long queries")
		}
	}
	defer func() { <-sem }()
	return ss.srv.analyze(sql)
}

// refusedText is what the log may fingerprint of a refused text: nothing
// when the guard before the parser refused it (rewrite/guard.go), since
// fingerprinting parses the text with pg_query, which the guard keeps such
// texts from.
func refusedText(sql string, err error) string {
	var re *rewrite.RejectError
	if errors.As(err, &re) && (re.Code == rewrite.CodeTooComplex || re.Code == rewrite.CodeProgramLimit) {
		return ""
	}
	return sql
}

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
func (ss *session) overLimit(ctx context.Context, msg pgproto3.FrontendMessage) (handled, ok bool) {
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
		if !ss.skipToSync(ctx) {
			return true, false
		}
	} else {
		ss.send(&pgproto3.ReadyForQuery{TxStatus: ss.txStatus()})
	}
	return true, ss.flush() == nil
}

// enterPrivate prepares the upstream connection for one rewritten private
// query (its slot was taken by execute, acquirePrivate): it makes the
// upstream statement_timeout exactly limits.statement_timeout for this
// query only, whatever shorter value the client SET: in a transaction of its own
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
	ms := ss.srv.lim.cfg.StatementTimeout.Milliseconds()
	// privateWorkMem keeps the per-unit pre-aggregation's hash table in
	// memory (bench/RESULTS.md: at the default 4MB it spills to disk).
	if _, err := pc.Exec(ctx, begin+"; SET LOCAL statement_timeout = "+strconv.FormatInt(ms, 10)+"; "+privateWorkMem).ReadAll(); err != nil {
		// The clean-up must run even when ctx ended (a cancel).
		cctx := context.WithoutCancel(ctx)
		switch {
		case finish == "COMMIT" && pc.TxStatus() != 'I':
			pc.Exec(cctx, "ROLLBACK").ReadAll()
		case finish != "COMMIT" && pc.TxStatus() == 'E':
			pc.Exec(cctx, finish).ReadAll()
		}
		return nil, &Error{Code: codeInternal, Message: "the database failed to start the private query; no value is shown and the privacy charge is kept", cause: err}
	}
	return func() error {
		// Run even after a cancel: the session's transaction state
		// depends on it.
		_, err := pc.Exec(context.WithoutCancel(ctx), finish).ReadAll()
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
	pc := ss.upstream.Conn().PgConn()
	// Closing alone would leave the statement running upstream until it
	// next writes a row (PostgreSQL reads nothing while it runs).
	if err := pc.CancelRequest(ctx); err != nil {
		ss.log.Info("cancel request to the upstream failed", "err", err)
	}
	pc.Close(ctx)
	ss.upBatch = false
}

// capacitySQL reads how many connections the upstream server gives roles
// that are not superusers: max_connections less the slots reserved for
// superusers and (PostgreSQL 16) for pg_use_reserved_connections.
const capacitySQL = `SELECT pg_catalog.current_setting('max_connections')::int,
	pg_catalog.current_setting('superuser_reserved_connections')::int,
	coalesce(pg_catalog.current_setting('reserved_connections', true), '0')::int`

// capacity is the upstream's connection capacity (capacitySQL).
type capacity struct{ max, superuser, reserved int }

func (c capacity) available() int { return c.max - c.superuser - c.reserved }

type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readCapacity(ctx context.Context, q rowQuerier) (capacity, error) {
	var c capacity
	err := q.QueryRow(ctx, capacitySQL).Scan(&c.max, &c.superuser, &c.reserved)
	return c, err
}

// fitConnections returns how many client sessions the proxy can serve on
// the upstream's capacity c, each holding one upstream connection, next to
// the ledger's pool: limits.max_connections or fewer. fits is false when
// limits.max_connections had to be lowered; fit < 1 when the ledger alone
// takes every connection.
func fitConnections(l conf.Limits, c capacity) (fit int, fits bool) {
	l = l.WithDefaults()
	room := c.available() - ledgerPoolSize(l)
	return min(l.MaxConnections, room), l.MaxConnections <= room
}

// capacityReport describes the fit for the log and check-config.
func capacityReport(l conf.Limits, c capacity) string {
	l = l.WithDefaults()
	return fmt.Sprintf("the upstream accepts %d connections from roles that are not superusers (max_connections %d, %d reserved for superusers, %d reserved_connections); the proxy opens at most %d for analysts (limits.max_connections) and %d for the ledger",
		c.available(), c.max, c.superuser, c.reserved, l.MaxConnections, ledgerPoolSize(l))
}

// checkLimits is New's start-up check of the limits against the upstream
// and the process: the analysts' sessions and the ledger's pool must fit
// in the upstream's max_connections (each session holds one upstream
// connection for its life), else limits.max_connections is lowered to what
// fits, with a warning, or the proxy refuses to start when nothing does;
// and a stack too small for limits.max_query_depth lowers the depth the
// guard lets through (rewrite/guard.go), with a warning. Other clients of
// the same server (another proxy, applications) are not counted.
func (s *Server) checkLimits(ctx context.Context) error {
	c, err := readCapacity(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("proxy: reading the upstream's max_connections: %w", err)
	}
	fit, fits := fitConnections(s.lim.cfg, c)
	if fit < 1 {
		return fmt.Errorf("proxy: upstream: no connection left for analysts: %s; raise max_connections on the server or lower limits.max_concurrent_private_queries", capacityReport(s.lim.cfg, c))
	}
	if !fits {
		s.log.Warn("limits.max_connections lowered to what the upstream can give: "+capacityReport(s.lim.cfg, c), "max_connections", fit)
		s.lim.maxConns = fit
	}
	if d := s.analyzer.MaxQueryDepth(); d < s.lim.cfg.MaxQueryDepth {
		s.log.Warn("limits.max_query_depth lowered to what the stack can take (ulimit -s; the default 8 MiB allows the default depth)",
			"max_query_depth", d, "configured", s.lim.cfg.MaxQueryDepth)
	}
	return nil
}
