package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// A session's stages, each in its own file: negotiation (negotiate.go),
// authentication (auth.go), the upstream connection and the client's
// settings (begin.go), the message loop (loop.go), and the end: Terminate,
// a broken connection, the idle timeout (deadlines.go) or the server's
// shutdown (shutdown.go), after which close gives everything back.

// session is one client connection. Its fields are owned by the session's
// goroutine, except where noted.
type session struct {
	srv     *Server
	id      uint64
	client  net.Conn
	backend *pgproto3.Backend
	log     *slog.Logger
	// frames is the raw client connection as backend reads it; nil over
	// TLS. unflushed: something was sent since the last flush. Both for
	// dropping backend while idle (sessionidle.go).
	frames    *frameReader
	shared    *sharedBackend // backend, when taken from idleBackends
	unflushed bool

	user     *conf.User
	key      cancelKey
	upstream *pgxpool.Conn

	// dp.* settings of this session.
	epsilon   float64
	delta     float64
	mechanism string
	notices   bool

	// sentParams are the ParameterStatus values the client has seen, by
	// reportedParams' index ("": none sent).
	sentParams [len(reportedParams)]string

	// Extended protocol state (extended.go).
	statements  map[string]*prepared
	portals     map[string]*portal
	upstreamSeq int
	types       *pgtype.Map // made on first use: typeMap (sessionmem.go)
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
	// beforeCharge is the context of the private query about to start,
	// until its charge, for its clock (privateQuery, clock.go).
	beforeCharge beforeCharge

	// failed is true when an error was sent to the client since the
	// last ReadyForQuery: the transaction block, if any, is to be
	// aborted (txabort.go).
	failed bool
	// analystStale is set when a statement may have reset the upstream
	// setting that holds the analyst's name (analyst.go).
	analystStale bool

	// releasable: the session waits between messages in its loop and may
	// then drop its Backend; idleSeen, idleWoken and idleWake are the
	// watcher's marks (sessionidle.go). Guarded by mu.
	releasable          bool
	idleWake            bool
	idleSeen, idleWoken uint64

	// counted is true once the session counts against its analyst's
	// limits.max_connections_per_analyst.
	counted bool

	// settings are the names and values the session has set upstream, to
	// restore on a new backend (replicas.go): its startup settings, read
	// again once settingsDirty says a statement may have changed one.
	// clientTx is the transaction status last seen at a statement's end.
	settings      [2][]string
	settingsDirty bool
	clientTx      byte
}

func (s *Server) newSession(conn net.Conn) *session {
	id := s.nextID.Add(1)
	sess := &session{
		srv: s, id: id, client: conn,
		log:        s.log.With("conn", id, "remote", conn.RemoteAddr().String()),
		epsilon:    s.cfg.Privacy.Epsilon,
		delta:      s.cfg.Privacy.Delta,
		mechanism:  s.cfg.Privacy.Mechanism,
		notices:    true,
		statements: map[string]*prepared{},
		portals:    map[string]*portal{},
		clientTx:   'I',
	}
	if _, ok := conn.(syscall.Conn); ok {
		sess.frames = &frameReader{conn: conn}
	}
	sess.backend = sess.newBackend() // sessionidle.go
	return sess
}

// serve runs the session's stages, then closes it (shutdown.go).
func (ss *session) serve() {
	defer func() {
		if r := recover(); r != nil {
			ss.log.Error("panic in session", "panic", r, "stack", string(debug.Stack()))
			if ss.backend == nil {
				ss.backend = ss.newBackend() // dropped while idle (sessionidle.go)
			}
			ss.backend.Send(fatalResponse(pgerr.InternalError, "internal error in dpproxy"))
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

func (ss *session) send(msg pgproto3.BackendMessage) {
	ss.unflushed = true
	ss.backend.Send(msg)
}

func (ss *session) flush() error {
	ss.unflushed = false
	ss.armWrite()
	return ss.writeFailed(ss.backend.Flush())
}

func (ss *session) txStatus() byte {
	if ss.upstream == nil {
		return 'I'
	}
	pc := ss.upstream.Conn().PgConn()
	if pc.IsClosed() {
		// The backend died (replicas.go): a block the client was in is
		// lost, as after an error.
		if ss.clientTx != 'I' {
			return 'E'
		}
		return 'I'
	}
	ss.clientTx = pc.TxStatus()
	return ss.clientTx
}
