package proxy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Transaction pooling (limits.pool.mode: transaction). A session holds no
// upstream connection while it is idle outside a transaction block: it
// takes one from the query pool (at most limits.pool.max_backends per
// server) for the first message that needs one (takeBackend, before the
// message is handled) and gives it back when it answers ReadyForQuery 'I'
// outside an extended-protocol batch of the proxy's (giveBackBackend).
// A transaction block, a private query (its BEGIN READ ONLY … COMMIT or
// savepoint around the rewritten SQL, precharge and description) and a
// batch from Parse to Sync thus run on one backend from start to end.
//
// What a session leaves on a backend is its settings (SET, startup
// options, the analyst's name) and the upstream twins of its prepared
// statements (upstreamstmt.go). A session's settings are read back before
// it gives a backend up after a statement that may have changed them
// (captureSettings, replicas.go), and restored on a backend that last
// served another session: every setting set in the session resets to
// its value at connection start, then the session's are set, in one round
// trip. Twins are named by a hash of their text and parameter types, so
// that sessions running the same statements share them on every backend
// they use; each backend records what it has prepared (backendState), and
// a session taking it prepares only the twins the backend lacks.
//
// A private query gives its backend back (outside a transaction block)
// when its answer leaves at the end of its time slot (clock.go), not when
// the answer is ready: a statement of another session waiting for the
// backend would start at that moment, and its latency would show the
// query's running time, which the slot hides (red team, issue 17).
//
// Nothing else a session can do through dpproxy outlives a transaction:
// the allowlists (rewrite/) refuse LISTEN, PREPARE, DECLARE (so WITH
// HOLD cursors), temporary tables and every other write, and advisory
// lock functions; COPY is COPY (query) TO STDOUT, one statement. So no
// session ever needs to be pinned to a backend beyond a transaction.

// maxBackendStmts bounds the twins a pooled backend keeps prepared for
// all the sessions it serves; past it, a session taking the backend has
// it drop them all (DEALLOCATE ALL) and prepares its own again.
const maxBackendStmts = 512

// backendStmt is a twin prepared on a pooled backend: its key
// (upstreamStmtKey) and description. Immutable once made.
type backendStmt struct {
	key       string
	paramOIDs []uint32
	fields    []pgproto3.FieldDescription
}

// backendState is what a pooled backend holds of the sessions it served.
// It lives in the connection's CustomData: only the session holding the
// connection touches it.
type backendState struct {
	owner uint64 // the session whose settings it holds; 0: none known
	// ownerSettings are the owner's settings as it left them (its
	// session.settings then): the session may have changed its settings
	// on another backend since.
	ownerSettings [2][]string
	stmts         map[string]*backendStmt
	// unknown is set when the prepared statements upstream are no longer
	// known (a client's DISCARD ALL, which may have failed): the next
	// session taking the backend deallocates them all first.
	unknown bool
}

const backendStateKey = "dpproxy.pool"

func backendOf(pc *pgconn.PgConn) *backendState {
	cd := pc.CustomData()
	if b, ok := cd[backendStateKey].(*backendState); ok {
		return b
	}
	b := &backendState{stmts: map[string]*backendStmt{}}
	cd[backendStateKey] = b
	return b
}

// forgetBackend records that the backend's session state was reset
// (DISCARD ALL by the proxy itself).
func forgetBackend(pc *pgconn.PgConn) {
	b := backendOf(pc)
	b.owner = 0
	clear(b.stmts)
	b.unknown = false
}

// pooled reports whether sessions share backends per transaction.
func (ss *session) pooled() bool { return ss.srv.lim != nil && ss.srv.lim.cfg.Pool.Transaction() }

// pooledStmtName is a twin's name in transaction mode: the same for the
// same text and parameter types in every session.
func pooledStmtName(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return "dpproxy_h" + strconv.FormatUint(h.Sum64(), 16)
}

// upstreamStmtName names a new twin of key (upstreamstmt.go).
func (ss *session) upstreamStmtName(key string) string {
	if ss.pooled() {
		name := pooledStmtName(key)
		taken := false
		for _, us := range ss.upstreamStmts {
			taken = taken || us.name == name
		}
		if !taken {
			return name
		}
		// Two texts of this session with one hash: the second gets a
		// name of the session's own (still checked against the backend).
	}
	ss.upstreamSeq++
	return fmt.Sprintf("dpproxy_%d", ss.upstreamSeq)
}

// prepareTwin prepares sql as the twin name of key on the session's
// backend, or finds it there already prepared by a session it served.
// Unless shared, the twin is prepared under other settings than its key
// names (restoreOnBackend) and no other session may take it.
func (ss *session) prepareTwin(ctx context.Context, name, key, sql string, oids []uint32, shared bool) (paramOIDs []uint32, fields []pgproto3.FieldDescription, err error) {
	pc := ss.upstream.Conn().PgConn()
	var b *backendState
	if ss.pooled() {
		b = backendOf(pc)
		if bs, ok := b.stmts[name]; ok {
			if bs.key == key {
				return bs.paramOIDs, bs.fields, nil
			}
			if err := pc.Deallocate(ctx, name); err != nil {
				return nil, nil, err
			}
			delete(b.stmts, name)
		}
	}
	sd, err := pc.Prepare(ctx, name, sql, oids)
	if err != nil {
		return nil, nil, err
	}
	if len(sd.Fields) > 0 {
		fields = rowDescription(sd.Fields).Fields
	}
	if b != nil {
		if !shared {
			key = "\x02unshared " + key // matches no session's key
		}
		b.stmts[name] = &backendStmt{key: key, paramOIDs: sd.ParamOIDs, fields: fields}
	}
	return sd.ParamOIDs, fields, nil
}

// forgetBackendStmts is called when a client statement may have dropped
// every prepared statement upstream (DISCARD ALL).
func (ss *session) forgetBackendStmts() {
	if ss.pooled() && ss.upstream != nil {
		b := backendOf(ss.upstream.Conn().PgConn())
		clear(b.stmts)
		b.unknown = true
	}
}

// takeBackend runs before each client message: in transaction mode, a
// session without a backend takes one for any message but Terminate,
// Flush and a Sync (which need none). When no backend can be had it
// answers the message with the error itself: handled is then true, and ok
// false when the session must end.
func (ss *session) takeBackend(ctx context.Context, msg pgproto3.FrontendMessage) (handled, ok bool) {
	if !ss.pooled() || ss.upstream != nil {
		return false, true
	}
	switch msg.(type) {
	case *pgproto3.Terminate, *pgproto3.Flush, *pgproto3.Sync:
		return false, true
	}
	err := ss.acquireBackend(ctx)
	if err == nil {
		return false, true
	}
	ss.sendError(err)
	if _, simple := msg.(*pgproto3.Query); simple {
		ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		return true, ss.flush() == nil
	}
	if ss.flush() != nil || !ss.skipToSync(ctx) {
		return true, false
	}
	return true, ss.flush() == nil
}

// holdBackend takes a backend, in transaction mode, for a statement of a
// Query message after an earlier one gave it back (a private query gives
// it back before its answer waits for the end of its time slot).
func (ss *session) holdBackend(ctx context.Context) error {
	if !ss.pooled() || ss.upstream != nil {
		return nil
	}
	return ss.acquireBackend(ctx)
}

// acquireBackend takes a backend from the pool, waiting at most
// limits.statement_timeout or until the statement is cancelled, and
// gives it the session's settings and twins.
func (ss *session) acquireBackend(ctx context.Context) error {
	timeout := ss.waitTimeout()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	// A connection that died while it sat in the pool (its server
	// restarted) fails its restore: another is taken, a few times.
	for try := 0; ; try++ {
		err := ss.tryBackend(ctx, wctx, start)
		if err == nil || try == 2 || ss.upstream != nil || ctx.Err() != nil || wctx.Err() != nil || !errors.Is(err, errBackendDied) {
			if errors.Is(err, errBackendDied) {
				return fail(pgerr.ConnectionFailure, "dpproxy could not prepare a database connection for this session")
			}
			return err
		}
	}
}

// errBackendDied is tryBackend's error when the backend it took failed
// while the session's state was restored on it.
var errBackendDied = errors.New("proxy: pooled backend failed")

func (ss *session) tryBackend(ctx, wctx context.Context, start time.Time) error {
	timeout := ss.waitTimeout()
	up, err := ss.srv.acquireQuery(wctx) // replicas.go
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return canceledWaiting(ctx, "a database connection")
		case wctx.Err() != nil:
			ss.log.Warn("no backend free within limits.statement_timeout", "max_backends", ss.srv.lim.cfg.Pool.MaxBackends, "waited", time.Since(start))
			return refuse(pgerr.QueryCanceled, "canceling statement due to statement timeout: no database connection became free within %v (limits.pool.max_backends is %d)", timeout, ss.srv.lim.cfg.Pool.MaxBackends)
		}
		ss.log.Error("upstream unavailable", "err", err)
		return fail(pgerr.ConnectionFailure, "dpproxy cannot reach its database")
	}
	ss.upstream = up
	ss.srv.mu.Lock()
	ss.srv.upstreams[up.Conn().PgConn()] = ss
	ss.srv.mu.Unlock()
	// The restore must not be cut short by a cancel half way: the
	// backend's state would then be unknown.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer rcancel()
	if err := ss.restoreOnBackend(rctx); err != nil {
		ss.log.Error("restoring the session on a pooled backend failed", "err", err)
		ss.dropBackend()
		return fmt.Errorf("%w: %w", errBackendDied, err)
	}
	return nil
}

// waitTimeout bounds the wait for a backend: the session's
// statement_timeout (a client may SET one shorter than the limit).
func (ss *session) waitTimeout() time.Duration {
	limit := ss.srv.lim.cfg.StatementTimeout
	for i, n := range ss.settings[0] {
		if strings.EqualFold(n, "statement_timeout") {
			if d, ok := parseGUCDuration(ss.settings[1][i]); ok && d > 0 && d < limit {
				return d
			}
		}
	}
	return limit
}

// parseGUCDuration reads a time setting as PostgreSQL shows or takes it
// in milliseconds: "1500", "1500ms", "20s", "1min", "2h", "1d".
func parseGUCDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(v[:i], 10, 64)
	if err != nil || n > 1<<31 {
		return 0, false
	}
	unit := map[string]time.Duration{"": time.Millisecond, "ms": time.Millisecond, "s": time.Second, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	u, ok := unit[strings.TrimSpace(v[i:])]
	if !ok {
		return 0, false
	}
	return time.Duration(n) * u, true
}

// restoreSettingsSQL sets this session's settings ($1, $2) on a backend
// after a RESET ALL took what another session set back to the
// connection's startup values: one round trip (a batch), bound
// parameters. RESET ALL, not set_config(name, reset_val): that would leave
// the setting's source 'session', and pg_settings would tell the next
// session which settings the last one had changed (red team, issue 17:
// TestPoolSettingsLeaveNoTrace).
const restoreSettingsSQL = `SELECT pg_catalog.count(pg_catalog.set_config(n, v, false)) FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) AS s(n, v)`

// restoreOnBackend gives the session's backend the session's settings, if
// it last served another session, and the twins it lacks.
func (ss *session) restoreOnBackend(ctx context.Context) error {
	pc := ss.upstream.Conn().PgConn()
	b := backendOf(pc)
	if b.owner != ss.id || !sameSettings(b.ownerSettings, ss.settings) {
		names, values := ss.restoredSettings()
		b.owner = 0
		batch := &pgx.Batch{}
		batch.Queue("RESET ALL")
		batch.Queue(restoreSettingsSQL, names, values)
		if err := ss.upstream.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("restoring settings: %w", err)
		}
		b.owner, b.ownerSettings = ss.id, ss.settings
	}
	if b.unknown || len(b.stmts) > maxBackendStmts {
		if _, err := pc.Exec(ctx, "DEALLOCATE ALL").ReadAll(); err != nil {
			return err
		}
		clear(b.stmts)
		b.unknown = false
	}
	for key, us := range ss.upstreamStmts {
		if us.render == "" && us.refs <= 0 {
			// A twin of one Parse (upstreamstmt.go) that no statement
			// holds: no portal of it outlived the last backend either.
			delete(ss.upstreamStmts, key)
			continue
		}
		if bs, ok := b.stmts[us.name]; ok && bs.key == key {
			continue
		}
		// Prepared here under the session's settings now: if they are
		// not those the twin was first prepared under, its text may mean
		// something else here, and no other session may share it
		// (upstreamstmt.go).
		shared := false
		if us.render != "" {
			render, err := ss.renderSettings(ctx) // settings.go
			if err != nil {
				return fmt.Errorf("reading the settings restored: %w", err)
			}
			shared = render == us.render
		}
		_, sql, _ := strings.Cut(key, "\x00")
		if _, _, err := ss.prepareTwin(ctx, us.name, key, sql, us.paramOIDs, shared); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && !pc.IsClosed() {
				// The statement no longer prepares (a table it reads
				// was dropped): its next execution fails, as it would
				// on the backend where it was prepared.
				ss.log.Info("a prepared statement could not be restored on a pooled backend", "name", us.name, "err", err)
				continue
			}
			return fmt.Errorf("restoring prepared statement %s: %w", us.name, err)
		}
	}
	return nil
}

func sameSettings(a, b [2][]string) bool {
	return slices.Equal(a[0], b[0]) && slices.Equal(a[1], b[1])
}

// restoredSettings are the session's settings with the analyst's name and
// process id as they must be (a RESET ALL may have dropped them from
// what captureSettings read).
func (ss *session) restoredSettings() (names, values []string) {
	for i, n := range ss.settings[0] {
		if strings.EqualFold(n, rewrite.AnalystSetting) || strings.EqualFold(n, rewrite.BackendPIDSetting) {
			continue
		}
		names, values = append(names, n), append(values, ss.settings[1][i])
	}
	names = append(names, rewrite.AnalystSetting, rewrite.BackendPIDSetting)
	values = append(values, ss.user.Name, strconv.FormatUint(uint64(ss.key.pid), 10))
	return names, values
}

// giveBackBackend runs after the session answered ReadyForQuery: in
// transaction mode it returns a backend that is idle outside a
// transaction block to the pool, after reading the session's settings
// if a statement may have changed them.
func (ss *session) giveBackBackend(ctx context.Context) {
	if !ss.pooled() || ss.upstream == nil || ss.upBatch {
		return
	}
	pc := ss.upstream.Conn().PgConn()
	if pc.IsClosed() {
		return // keepUpstream (replicas.go) replaces it before the next statement
	}
	if pc.IsBusy() || pc.TxStatus() != 'I' {
		return
	}
	if ss.settingsDirty {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		ss.captureSettings(cctx) // replicas.go
		cancel()
		if ss.settingsDirty {
			return // the backend failed: keepUpstream replaces it
		}
	}
	b := backendOf(pc)
	b.owner, b.ownerSettings = ss.id, ss.settings
	ss.srv.mu.Lock()
	delete(ss.srv.upstreams, pc)
	ss.srv.mu.Unlock()
	ss.upstream.Release()
	ss.upstream = nil
}

// dropBackend destroys the session's backend (its state is unknown).
func (ss *session) dropBackend() {
	pc := ss.upstream.Conn().PgConn()
	ss.srv.mu.Lock()
	delete(ss.srv.upstreams, pc)
	ss.srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	pc.Close(ctx)
	cancel()
	ss.upstream.Release()
	ss.upstream = nil
}
