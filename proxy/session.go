package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/scram"
)

// session is one client connection. Its fields are owned by the session's
// goroutine, except where noted.
type session struct {
	srv     *Server
	id      uint64
	client  net.Conn
	backend *pgproto3.Backend
	log     *slog.Logger

	user     *conf.User
	key      cancelKey
	upstream *pgxpool.Conn

	// dp.* settings of this session.
	epsilon   float64
	delta     float64
	mechanism string
	notices   bool

	// sentParams are the ParameterStatus values the client has seen.
	sentParams map[string]string

	// Extended protocol state (extended.go).
	statements  map[string]*prepared
	portals     map[string]*portal
	upstreamSeq int
	types       *pgtype.Map
	// upBatch is true while the upstream is in an extended-protocol batch
	// of the proxy's, not yet ended by Sync; closePending names upstream
	// portals to close with its next message (portal.go).
	upBatch      bool
	closePending []string

	// upstreamStmts are the upstream twins of pass-through statements,
	// by text and parameter types (upstreamstmt.go).
	upstreamStmts map[string]*upstreamStmt
	// render holds the current values of rewrite.RenderSettings, part of
	// the answer cache's key; "" until read, and again after any statement
	// that may change a setting (settings.go).
	render string

	// idleSince is when the session last began to wait for a message.
	idleSince time.Time
	// readDeadline and writeDeadline are the client connection's
	// deadlines as last set by armIdle and armWrite (zero: to be set).
	readDeadline, writeDeadline time.Time

	// mu guards shutdown and inQuery, read by Server.Shutdown, and clock,
	// read by cancelUpstream.
	mu       sync.Mutex
	shutdown bool
	inQuery  bool
	clock    *privateClock // the private query on the clock (clock.go)
	// stmtCtx is the context of the message in progress, which
	// stmtCancel ends (cancel.go); msgSeq counts messages, watchSeq is
	// msgSeq as the watcher last saw it, goneSeq the message it
	// cancelled because the client left.
	stmtCtx                   context.Context
	stmtCancel                context.CancelFunc
	msgSeq, watchSeq, goneSeq uint64

	// counted is true once the session counts against its analyst's
	// limits.max_connections_per_analyst.
	counted bool
}

func (s *Server) newSession(conn net.Conn) *session {
	id := s.nextID.Add(1)
	sess := &session{
		srv: s, id: id, client: conn,
		backend:    pgproto3.NewBackend(conn, conn),
		log:        s.log.With("conn", id, "remote", conn.RemoteAddr().String()),
		epsilon:    s.cfg.Privacy.Epsilon,
		delta:      s.cfg.Privacy.Delta,
		mechanism:  s.cfg.Privacy.Mechanism,
		notices:    true,
		sentParams: map[string]string{},
		statements: map[string]*prepared{},
		portals:    map[string]*portal{},
		types:      pgtype.NewMap(),
	}
	sess.backend.SetMaxBodyLen(s.opts.MaxMessageSize)
	return sess
}

// errHandled ends a connection that needs no further answer (a
// CancelRequest, a client that went away during startup).
var errHandled = errors.New("connection handled")

func (ss *session) serve() {
	defer func() {
		if r := recover(); r != nil {
			ss.log.Error("panic in session", "panic", r, "stack", string(debug.Stack()))
			ss.backend.Send(fatalResponse(codeInternal, "internal error in dpproxy"))
			ss.backend.Flush()
		}
		ss.close()
	}()
	if err := ss.startup(); err != nil {
		if !errors.Is(err, errHandled) && !errors.Is(err, io.EOF) {
			ss.log.Info("startup failed", "err", err)
		}
		return
	}
	ss.log.Info("connected", "user", ss.user.Name)
	defer ss.srv.metrics.connected()()
	ss.loop()
	ss.log.Info("disconnected", "user", ss.user.Name)
}

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

// releaseUpstream returns the upstream connection to the pool with its
// session state reset, or destroys it when that cannot be done cleanly.
func (ss *session) releaseUpstream() {
	pc := ss.upstream.Conn().PgConn()
	if pc.IsClosed() || pc.IsBusy() || ss.upBatch {
		if !pc.IsClosed() {
			// The pool closes a busy connection: stop its statement
			// first, which PostgreSQL would otherwise run to its end.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			pc.CancelRequest(ctx)
			pc.Close(ctx)
			cancel()
		}
		ss.upstream.Release()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if pc.TxStatus() != 'I' {
		if err := pc.Exec(ctx, "ROLLBACK").Close(); err != nil {
			pc.Close(ctx)
		}
	}
	if err := pc.Exec(ctx, "DISCARD ALL").Close(); err != nil {
		pc.Close(ctx)
	}
	ss.upstream.Release()
}

func (ss *session) send(msg pgproto3.BackendMessage) { ss.backend.Send(msg) }

func (ss *session) flush() error {
	ss.armWrite()
	return ss.writeFailed(ss.backend.Flush())
}

func (ss *session) startup() error {
	ss.client.SetDeadline(time.Now().Add(ss.srv.lim.cfg.AuthTimeout))
	for {
		msg, err := ss.backend.ReceiveStartupMessage()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if ss.srv.tls == nil {
				if _, err := ss.client.Write([]byte{'N'}); err != nil {
					return err
				}
				continue
			}
			if _, err := ss.client.Write([]byte{'S'}); err != nil {
				return err
			}
			tc := tls.Server(ss.client, ss.srv.tls)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("tls handshake: %w", err)
			}
			ss.client = tc
			ss.backend = pgproto3.NewBackend(tc, tc)
			ss.backend.SetMaxBodyLen(ss.srv.opts.MaxMessageSize)
		case *pgproto3.GSSEncRequest:
			if _, err := ss.client.Write([]byte{'N'}); err != nil {
				return err
			}
		case *pgproto3.CancelRequest:
			if len(m.SecretKey) == 4 {
				ss.srv.cancel(cancelKey{m.ProcessID, binary.BigEndian.Uint32(m.SecretKey)})
			}
			return errHandled
		case *pgproto3.StartupMessage:
			if m.ProtocolVersion != pgproto3.ProtocolVersion30 {
				ss.send(fatalResponse(codeProtocol, fmt.Sprintf("unsupported frontend protocol %d.%d: dpproxy speaks 3.0", m.ProtocolVersion>>16, m.ProtocolVersion&0xffff)))
				ss.flush()
				return errHandled
			}
			if err := ss.authenticate(m.Parameters["user"]); err != nil {
				return err
			}
			if err := ss.begin(m.Parameters); err != nil {
				return err
			}
			ss.client.SetDeadline(time.Time{})
			ss.readDeadline, ss.writeDeadline = time.Time{}, time.Time{}
			return nil
		default:
			ss.send(fatalResponse(codeProtocol, "expected a startup message"))
			ss.flush()
			return errHandled
		}
	}
}

// authenticate runs the configured exchange. A wrong password and an unknown
// user get the same answer.
func (ss *session) authenticate(name string) error {
	cfg := ss.srv.cfg
	user := cfg.UserByName(name)
	fail := func(cause error) error {
		ss.send(fatalResponse(codeAuthFailed, fmt.Sprintf("password authentication failed for user %q", name)))
		ss.flush()
		ss.log.Warn("authentication failed", "user", name, "reason", cause)
		ss.srv.metrics.authFailures.Inc()
		return errHandled
	}
	if name == "" {
		ss.send(fatalResponse(codeInvalidAuthSpec, "no PostgreSQL user name specified in startup packet"))
		ss.flush()
		return errHandled
	}
	switch cfg.Auth.Method {
	case conf.AuthTrust:
		if user == nil {
			ss.send(fatalResponse(codeInvalidAuthSpec, fmt.Sprintf("role %q is not an analyst of this proxy", name)))
			ss.flush()
			return errHandled
		}
	case conf.AuthSCRAM:
		creds, ok := ss.srv.creds[name]
		if !ok {
			creds = ss.srv.dummy
		}
		if err := scram.AuthenticateSCRAM(ss.backend, creds); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errHandled // psql hangs up to ask for the password, then reconnects
			}
			return fail(err)
		}
		if !ok {
			return fail(errors.New("unknown user"))
		}
	case conf.AuthMD5:
		pw := ""
		if user != nil {
			pw = user.Password.Reveal()
		}
		if err := scram.AuthenticateMD5(ss.backend, name, pw); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errHandled
			}
			return fail(err)
		}
		if user == nil {
			return fail(errors.New("unknown user"))
		}
	}
	ss.user = user
	return nil
}

// reportedParams are forwarded to the client as ParameterStatus.
var reportedParams = []string{"server_version", "server_encoding", "client_encoding", "application_name", "DateStyle", "IntervalStyle", "TimeZone", "integer_datetimes", "standard_conforming_strings", "default_transaction_read_only", "in_hot_standby"}

// begin acquires the session's upstream connection and completes startup.
func (ss *session) begin(params map[string]string) error {
	names, values, err := startupSettings(params, ss.srv.lim.cfg.StatementTimeout)
	if err != nil {
		ss.send(errorResponseFatal(err))
		ss.flush()
		return errHandled
	}
	if !ss.srv.lim.enterAnalyst(ss.user.Name) {
		ss.log.Warn("connection refused: limits.max_connections_per_analyst reached", "user", ss.user.Name, "max", ss.srv.lim.cfg.MaxConnectionsPerAnalyst)
		ss.send(fatalResponse(codeTooManyConnections, fmt.Sprintf("too many connections for analyst %q: at most %d at once (limits.max_connections_per_analyst)", ss.user.Name, ss.srv.lim.cfg.MaxConnectionsPerAnalyst)))
		ss.flush()
		return errHandled
	}
	ss.counted = true
	ctx, cancel := context.WithTimeout(context.Background(), ss.srv.lim.cfg.AuthTimeout)
	defer cancel()
	up, err := ss.srv.pool.Acquire(ctx)
	if err != nil {
		ss.log.Error("upstream unavailable", "err", err)
		ss.send(fatalResponse(codeUpstreamDown, "dpproxy cannot reach its database"))
		ss.flush()
		return errHandled
	}
	ss.upstream = up
	ss.srv.mu.Lock()
	ss.srv.upstreams[up.Conn().PgConn()] = ss
	ss.srv.mu.Unlock()

	if len(names) > 0 {
		// set_config with bound parameters: client values never become SQL text.
		// QueryExecModeExec (an unnamed statement): pgx's statement cache
		// would outlive the DISCARD ALL of releaseUpstream, and the next
		// session on this connection would fail on a prepared statement
		// that no longer exists.
		_, err := up.Exec(ctx, "SELECT set_config(n, v, false) FROM unnest($1::text[], $2::text[]) AS s(n, v)", pgx.QueryExecModeExec, names, values)
		if err != nil {
			ss.send(errorResponseFatal(err))
			ss.flush()
			return errHandled
		}
	}
	if ss.key, err = ss.srv.register(ss); err != nil {
		return err
	}
	ss.send(&pgproto3.AuthenticationOk{})
	ss.sendParameterChanges(true)
	ss.send(&pgproto3.ParameterStatus{Name: "session_authorization", Value: ss.user.Name})
	ss.send(&pgproto3.ParameterStatus{Name: "is_superuser", Value: "off"})
	var secret [4]byte
	binary.BigEndian.PutUint32(secret[:], ss.key.secret)
	ss.send(&pgproto3.BackendKeyData{ProcessID: ss.key.pid, SecretKey: secret[:]})
	ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return ss.flush()
}

func errorResponseFatal(err error) *pgproto3.ErrorResponse {
	r := errorResponse(err)
	r.Severity, r.SeverityUnlocalized = "FATAL", "FATAL"
	return r
}

// sendParameterChanges forwards upstream parameters the client has not seen
// in their current value (all of them at startup).
func (ss *session) sendParameterChanges(all bool) {
	pc := ss.upstream.Conn().PgConn()
	for _, k := range reportedParams {
		v := pc.ParameterStatus(k)
		if v == "" {
			continue
		}
		if old, ok := ss.sentParams[k]; all || !ok || old != v {
			ss.sentParams[k] = v
			ss.send(&pgproto3.ParameterStatus{Name: k, Value: v})
		}
	}
}

func (ss *session) forwardNotice(n *pgconn.Notice) {
	ss.send(&pgproto3.NoticeResponse{
		Severity: n.Severity, SeverityUnlocalized: n.SeverityUnlocalized,
		Code: n.Code, Message: n.Message, Detail: n.Detail, Hint: n.Hint,
	})
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

func (ss *session) txStatus() byte {
	if ss.upstream == nil {
		return 'I'
	}
	return ss.upstream.Conn().PgConn().TxStatus()
}

// loop reads and answers messages until Terminate, an I/O error or shutdown.
func (ss *session) loop() {
	for {
		ss.armIdle()
		if ss.setInQuery(false) {
			ss.send(fatalResponse(codeAdminShutdown, "terminating connection due to administrator command"))
			ss.flush()
			return
		}
		msg, err := ss.backend.Receive()
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
				ss.send(fatalResponse(codeProtocol, "invalid message from client: "+sanitizeProtocolError(err)))
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
				// As PostgreSQL does: the error, then discard until Sync.
				ss.sendError(err)
				if !ss.skipToSync(ctx) {
					return
				}
			} else {
				// As PostgreSQL does, answers to Parse, Bind, Describe,
				// Execute and Close stay buffered until Sync or Flush: one
				// write per batch instead of one per message.
				continue
			}
		default:
			ss.send(fatalResponse(codeProtocol, fmt.Sprintf("unexpected message %T", msg)))
			ss.flush()
			return
		}
		if err := ss.flush(); err != nil {
			return
		}
	}
}

// sync ends an extended-protocol batch, upstream too (portal.go). Outside
// a transaction block the portals are gone, as PostgreSQL closes them at
// transaction end.
func (ss *session) sync(ctx context.Context) {
	if err := ss.endBatch(ctx); err != nil {
		ss.sendError(err)
	}
	status := ss.txStatus()
	if status == 'I' {
		clear(ss.portals)
	}
	ss.send(&pgproto3.ReadyForQuery{TxStatus: status})
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
