package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Reading from hot standbys (conf.Replicas). With replicas configured,
// each client session takes its upstream connection from the healthy
// replica with the fewest sessions (balanced per session: a session keeps
// its backend, as without replicas), and from upstream, the primary, only
// when no replica is healthy. The ledger is untouched: it writes to the
// primary through ledger_upstream, and a private query's charge is
// durable there before the query runs on a replica.
//
// A background checker asks every replica, each replica_check_interval,
// whether it answers, is in recovery (a promoted or misconfigured server
// is not a replica of this primary: skipped) and how far its replay lags:
// the time since the primary's WAL first went past the replica's replay
// position, from the primary's positions sampled at each check (lagOf).
// An idle primary thus never makes a replica look late, which the usual
// now() - pg_last_xact_replay_timestamp() does. A replica failing or
// lagging more than replica_max_lag takes no new session until a check
// finds it well again.
//
// A session whose backend died (the replica went down mid-query: the
// client got that statement's error, a private query's opaque error with
// its charge kept) takes a new backend before its next statement
// (keepUpstream): its settings and prepared statements are restored
// there. Inside a transaction block the new backend is put in an aborted
// block, so the client sees what PostgreSQL shows after an error: 25P02
// until ROLLBACK.

// replicaTryTimeout bounds one attempt to take a connection from a
// replica, and one health check.
const replicaTryTimeout = 2 * time.Second

// replicaSet is the query upstream's replicas and their checker. It is
// safe for concurrent use.
type replicaSet struct {
	primary  *pgxpool.Pool // Server.pool: the fallback and the WAL reference
	members  []*replica
	maxLag   time.Duration
	interval time.Duration
	log      *slog.Logger
	next     atomic.Uint64 // rotates the first replica tried among equals

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// history holds the primary's WAL positions at recent checks, oldest
	// first; owned by the checker goroutine (and New before it starts),
	// as is primaryCheck.
	history      []walSample
	primaryCheck *checkConn
}

// checkConn is a health checker's own connection to one server: checks
// never wait for a pool that sessions have filled.
type checkConn struct {
	cfg  *pgx.ConnConfig
	conn *pgx.Conn
}

// queryRow runs sql on the connection, connecting first if needed, and
// drops the connection when it fails.
func (cc *checkConn) queryRow(ctx context.Context, sql string, dest ...any) error {
	if cc.conn == nil || cc.conn.IsClosed() {
		c, err := pgx.ConnectConfig(ctx, cc.cfg)
		if err != nil {
			return err
		}
		cc.conn = c
	}
	err := cc.conn.QueryRow(ctx, sql).Scan(dest...)
	if err != nil {
		cc.close()
	}
	return err
}

func (cc *checkConn) close() {
	if cc.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cc.conn.Close(ctx)
		cancel()
		cc.conn = nil
	}
}

// newCheckConn is a checkConn like the connections of a query pool with
// configuration p, named in pg_stat_activity for what it does.
func newCheckConn(p *pgxpool.Config) *checkConn {
	cfg := p.ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "dpproxy-replica-check"
	cfg.OnNotice = nil
	return &checkConn{cfg: cfg}
}

// replica is one hot standby.
type replica struct {
	name    string // host:port, for the log
	pool    *pgxpool.Pool
	healthy atomic.Bool
	// state is the last health verdict, logged when it changes; owned by
	// the checker goroutine, as is check.
	state string
	check *checkConn
}

// walSample is the primary's WAL insert position at a time.
type walSample struct {
	at  time.Time
	lsn uint64
}

// openReplicas opens a pool per configured replica with the settings of
// the primary's query pool pcfg, and checks them once before the proxy
// serves.
func (s *Server) openReplicas(ctx context.Context, pcfg *pgxpool.Config) error {
	if len(s.cfg.Replicas) == 0 {
		return nil
	}
	rs := &replicaSet{
		primary: s.pool, maxLag: s.cfg.ReplicaMaxLag, interval: s.cfg.ReplicaCheckInterval,
		log:  s.log.With("component", "replicas"),
		stop: make(chan struct{}), done: make(chan struct{}),
		primaryCheck: newCheckConn(pcfg),
	}
	for i, dsn := range s.cfg.Replicas {
		rcfg, err := pgxpool.ParseConfig(dsn.Reveal())
		if err != nil {
			rs.closePools()
			return fmt.Errorf("proxy: replicas[%d]: not a valid postgres:// URL or DSN", i)
		}
		if rcfg.ConnConfig.Database != pcfg.ConnConfig.Database {
			rs.closePools()
			return fmt.Errorf("proxy: replicas[%d]: database %q differs from upstream's %q: a replica serves the same database", i, rcfg.ConnConfig.Database, pcfg.ConnConfig.Database)
		}
		queryPoolLike(rcfg, pcfg)
		pool, err := pgxpool.NewWithConfig(ctx, rcfg)
		if err != nil {
			rs.closePools()
			return fmt.Errorf("proxy: replicas[%d]: %w", i, err)
		}
		name := rcfg.ConnConfig.Host + ":" + strconv.Itoa(int(rcfg.ConnConfig.Port))
		rs.members = append(rs.members, &replica{name: name, pool: pool, state: "unchecked", check: newCheckConn(rcfg)})
	}
	rs.checkAll(ctx)
	s.replicas = rs
	go rs.run()
	return nil
}

// queryPoolLike gives a replica's pool what New gave the primary's query
// pool: the pinned settings, statement timeout, message cap, notice
// routing, cancel on context end and pool size. The replica's own URL
// keeps its host, credentials, TLS and application_name.
func queryPoolLike(r, p *pgxpool.Config) {
	rp := r.ConnConfig.RuntimeParams
	for k := range rewrite.PinnedSettings {
		rp[k] = p.ConnConfig.RuntimeParams[k]
	}
	rp["statement_timeout"] = p.ConnConfig.RuntimeParams["statement_timeout"]
	if rp["application_name"] == "" {
		rp["application_name"] = p.ConnConfig.RuntimeParams["application_name"]
	}
	r.ConnConfig.StatementCacheCapacity = p.ConnConfig.StatementCacheCapacity
	r.ConnConfig.DescriptionCacheCapacity = p.ConnConfig.DescriptionCacheCapacity
	r.ConnConfig.DefaultQueryExecMode = p.ConnConfig.DefaultQueryExecMode
	r.ConnConfig.OnNotice = p.ConnConfig.OnNotice
	r.ConnConfig.BuildFrontend = p.ConnConfig.BuildFrontend
	r.ConnConfig.BuildContextWatcherHandler = p.ConnConfig.BuildContextWatcherHandler
	r.MaxConns, r.MinConns = p.MaxConns, p.MinConns
	// A replica may have died since a connection went idle in its pool:
	// check every connection handed out (one round trip per session, not
	// per query), so that a session starts on a live backend.
	r.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
}

// acquireQuery takes a session's upstream connection: from a healthy
// replica when there are replicas, else from the primary.
func (s *Server) acquireQuery(ctx context.Context) (*pgxpool.Conn, error) {
	if s.replicas == nil {
		return s.pool.Acquire(ctx)
	}
	return s.replicas.acquire(ctx)
}

// acquire tries the healthy replicas, fewest sessions first, and falls
// back to the primary. A replica that cannot give a connection is marked
// down until its next check.
func (rs *replicaSet) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	n := len(rs.members)
	start := int(rs.next.Add(1) % uint64(n))
	tried := make([]bool, n)
	for {
		best := -1
		var bestLoad int32
		for i := range n {
			j := (start + i) % n
			r := rs.members[j]
			if tried[j] || !r.healthy.Load() {
				continue
			}
			if load := r.pool.Stat().AcquiredConns(); best < 0 || load < bestLoad {
				best, bestLoad = j, load
			}
		}
		if best < 0 {
			break
		}
		tried[best] = true
		r := rs.members[best]
		tctx, cancel := context.WithTimeout(ctx, replicaTryTimeout)
		c, err := r.pool.Acquire(tctx)
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		r.healthy.Store(false)
		rs.log.Warn("replica unavailable; trying another", "replica", r.name, "err", err)
	}
	return rs.primary.Acquire(ctx)
}

// run checks the replicas every interval until close.
func (rs *replicaSet) run() {
	defer close(rs.done)
	t := time.NewTicker(rs.interval)
	defer t.Stop()
	for {
		select {
		case <-rs.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-rs.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		rs.checkAll(ctx)
		cancel()
	}
}

// checkAll samples the primary's WAL position, then checks every replica
// at once.
func (rs *replicaSet) checkAll(ctx context.Context) {
	now := time.Now()
	pctx, cancel := context.WithTimeout(ctx, replicaTryTimeout)
	var text string
	err := rs.primaryCheck.queryRow(pctx, "SELECT pg_catalog.pg_current_wal_lsn()::text", &text)
	cancel()
	if lsn, perr := parseLSN(text); err == nil && perr == nil {
		rs.history = append(rs.history, walSample{at: now, lsn: lsn})
	} else if err != nil {
		// Lag is then judged against the samples already taken.
		rs.log.Info("replica check: cannot read the primary's WAL position", "err", err)
	}
	rs.history = pruneHistory(rs.history, now, rs.maxLag+2*rs.interval)
	var wg sync.WaitGroup
	for _, r := range rs.members {
		wg.Go(func() { rs.check(ctx, r, now) })
	}
	wg.Wait()
}

// check asks one replica and records the verdict.
func (rs *replicaSet) check(ctx context.Context, r *replica, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, replicaTryTimeout)
	defer cancel()
	var inRecovery bool
	var replay *string
	err := r.check.queryRow(ctx, "SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.pg_last_wal_replay_lsn()::text", &inRecovery, &replay)
	select {
	case <-rs.stop:
		return // cancelled by close: no verdict
	default:
	}
	var state string
	switch {
	case err != nil:
		state = "unreachable"
	case !inRecovery || replay == nil:
		state = "not in recovery (not a standby)"
	default:
		lsn, perr := parseLSN(*replay)
		if perr != nil {
			err, state = perr, "unreadable replay position"
			break
		}
		if lag := lagOf(rs.history, lsn, now); lag > rs.maxLag {
			state = "lagging"
			err = fmt.Errorf("replay lag at least %v, more than replica_max_lag %v", lag.Round(time.Millisecond), rs.maxLag)
		} else {
			state = "healthy"
		}
	}
	r.healthy.Store(state == "healthy")
	if state != r.state {
		if state == "healthy" {
			rs.log.Info("replica healthy: takes new sessions", "replica", r.name, "was", r.state)
		} else {
			rs.log.Warn("replica skipped: takes no new session", "replica", r.name, "state", state, "err", err)
		}
		r.state = state
	}
}

// lagOf is how long the replica at replay position lsn has lacked WAL
// the primary had written: the time since the oldest sample in history
// (oldest first) past lsn, or 0 when no sample is. It is a lower bound
// (the primary went past lsn at most one check interval earlier) that
// does not grow while the primary is idle.
func lagOf(history []walSample, lsn uint64, now time.Time) time.Duration {
	for _, s := range history {
		if s.lsn > lsn {
			return now.Sub(s.at)
		}
	}
	return 0
}

// pruneHistory drops samples older than keep, but never the newest one
// older than keep when a later sample is past it: lagOf needs the oldest
// sample past a replica's position, which may be that one.
func pruneHistory(h []walSample, now time.Time, keep time.Duration) []walSample {
	cut := 0
	for cut+1 < len(h) && now.Sub(h[cut+1].at) > keep {
		cut++
	}
	return append(h[:0], h[cut:]...)
}

// parseLSN reads PostgreSQL's text form of a pg_lsn, "16/B374D848".
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("proxy: not an LSN: %q", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("proxy: not an LSN: %q", s)
	}
	return h<<32 | l, nil
}

// close stops the checker and closes the replicas' pools.
func (rs *replicaSet) close() {
	rs.stopOnce.Do(func() {
		close(rs.stop)
		<-rs.done
		rs.closePools()
	})
}

func (rs *replicaSet) closePools() {
	for _, r := range rs.members {
		r.pool.Close()
		if r.check != nil {
			r.check.close()
		}
	}
	if rs.primaryCheck != nil {
		rs.primaryCheck.close()
	}
}

// sessionSettingsSQL reads what a session has set (SET, set_config,
// startup options of the client) so that a new backend can be given the
// same: the startup parameters of the proxy's own pool are source
// 'client', restored by the new connection itself.
const sessionSettingsSQL = "SELECT name, pg_catalog.current_setting(name) FROM pg_catalog.pg_settings WHERE source = 'session'"

// keepUpstream runs before every client message: it notes the session's
// settings after a statement that may have changed them, and gives the
// session a new backend when its own has died. It returns false when the
// session must end (a FATAL was sent).
func (ss *session) keepUpstream(ctx context.Context, msg pgproto3.FrontendMessage) bool {
	if ss.upstream == nil {
		return true
	}
	if _, ok := msg.(*pgproto3.Terminate); ok {
		return true
	}
	pc := ss.upstream.Conn().PgConn()
	if !pc.IsClosed() {
		if ss.settingsDirty && !ss.upBatch && pc.TxStatus() == 'I' && !pc.IsBusy() {
			ss.captureSettings(ctx)
		}
		return true
	}
	// An extended-protocol batch of the proxy's, and the portals it
	// streamed from, died with the backend.
	ss.upBatch = false
	ss.closePending = ss.closePending[:0]
	for _, pt := range ss.portals {
		if pt.suspended {
			pt.suspended, pt.lost = false, true
		}
	}
	inBlock := ss.clientTx != 'I'
	if err := ss.redial(ctx, inBlock); err != nil {
		ss.log.Error("upstream lost and no other available", "err", err)
		ss.send(fatalResponse(pgerr.ConnectionFailure, "dpproxy lost its database connection and cannot reach another"))
		ss.flush()
		return false
	}
	ss.log.Info("upstream lost: the session continues on another backend", "in_block", inBlock)
	return true
}

// captureSettings reads the session's settings after a statement that may
// have changed them (at most once per such statement, outside a
// transaction block, where they are final).
func (ss *session) captureSettings(ctx context.Context) {
	rows, err := ss.upstream.Conn().PgConn().Exec(ctx, sessionSettingsSQL).ReadAll()
	if err != nil || len(rows) != 1 {
		return // the backend failed: keepUpstream redials before the next
	}
	names := make([]string, 0, len(rows[0].Rows))
	values := make([]string, 0, len(rows[0].Rows))
	for _, r := range rows[0].Rows {
		names = append(names, string(r[0]))
		values = append(values, string(r[1]))
	}
	ss.settings = [2][]string{names, values}
	ss.settingsDirty = false
}

// redial replaces the session's dead backend by a new one from
// acquireQuery, with the session's settings and upstream prepared
// statements; inBlock puts it in an aborted transaction block.
func (ss *session) redial(ctx context.Context, inBlock bool) error {
	ss.srv.mu.Lock()
	delete(ss.srv.upstreams, ss.upstream.Conn().PgConn())
	ss.srv.mu.Unlock()
	ss.releaseUpstream() // destroys the closed connection
	ss.upstream = nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ss.srv.lim.cfg.AuthTimeout)
	defer cancel()
	// A backend that dies while it is being set up (its server went
	// down after the pool checked it) is replaced too, a few times.
	var err error
	for range 3 {
		if err = ss.dialAgain(ctx); err == nil || ss.upstream == nil || !ss.upstream.Conn().PgConn().IsClosed() {
			break
		}
		ss.srv.mu.Lock()
		delete(ss.srv.upstreams, ss.upstream.Conn().PgConn())
		ss.srv.mu.Unlock()
		ss.upstream.Release()
		ss.upstream = nil
	}
	if err != nil {
		return err
	}
	pc := ss.upstream.Conn().PgConn()
	if inBlock {
		if _, err := pc.Exec(ctx, "BEGIN READ ONLY").ReadAll(); err != nil {
			return err
		}
		pc.Exec(ctx, abortStatement).ReadAll() // fails by design: the block is aborted
		if pc.TxStatus() != 'E' {
			return errors.New("could not put the new backend in an aborted block")
		}
	}
	return nil
}

// dialAgain takes a new backend for the session and gives it the
// session's settings and upstream prepared statements.
func (ss *session) dialAgain(ctx context.Context) error {
	up, err := ss.srv.acquireQuery(ctx)
	if err != nil {
		return err
	}
	ss.upstream = up
	ss.srv.mu.Lock()
	ss.srv.upstreams[up.Conn().PgConn()] = ss
	ss.srv.mu.Unlock()
	ss.render = ""
	if ss.pooled() {
		return ss.restoreOnBackend(ctx) // pool.go: a shared backend
	}
	pc := up.Conn().PgConn()
	if names := ss.settings[0]; len(names) > 0 {
		// As begin does: bound parameters, an unnamed statement.
		if err := setConfigs(ctx, pc, names, ss.settings[1]); err != nil { // sessionmem.go
			return fmt.Errorf("restoring settings: %w", err)
		}
	}
	for key, us := range ss.upstreamStmts {
		_, sql, _ := strings.Cut(key, "\x00")
		if _, err := pc.Prepare(ctx, us.name, sql, us.paramOIDs); err != nil {
			return fmt.Errorf("restoring prepared statement %s: %w", us.name, err)
		}
	}
	return nil
}

// replicaChecks is check-config's part for replicas: each answers as the
// query role, on upstream's database, and is a hot standby.
func (c *checker) replicaChecks(ctx context.Context) {
	for i, dsn := range c.cfg.Replicas {
		key := fmt.Sprintf("replicas[%d]", i)
		conn, err := pgx.Connect(ctx, dsn.Reveal())
		if err != nil {
			// The URL may hold a password: never print pgx's error.
			c.problem(key, "cannot connect with the configured URL (is the server running, are host, port, database and credentials right?)")
			continue
		}
		var inRecovery bool
		var role, db string
		err = conn.QueryRow(ctx, "SELECT pg_catalog.pg_is_in_recovery(), current_user, current_database()").Scan(&inRecovery, &role, &db)
		conn.Close(ctx)
		switch {
		case err != nil:
			c.problem(key, "reading its state failed: %v", err)
		case !inRecovery:
			c.problem(key, "not in recovery: not a hot standby (a promoted server, or the primary itself); the proxy would skip it")
		case role != c.role:
			c.problem(key, "connects as role %s, upstream as %s: a replica takes analysts' statements and must use the query role", role, c.role)
		case db != c.db:
			c.problem(key, "database %s, upstream's is %s: a replica must serve the same database", db, c.db)
		default:
			c.say("%s: hot standby, database %s, role %s", key, db, role)
		}
	}
}
