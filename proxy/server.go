package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/scram"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Options tune a Server beyond its configuration.
type Options struct {
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// MaxMessageSize caps one client message (default 8 MiB).
	MaxMessageSize int
	// AnswerCacheSize is the number of noisy answers kept for repeats
	// (default 4096).
	AnswerCacheSize int
	// TestNoise is for tests only: when set, every release uses
	// TestNoise(m) instead of the session's mechanism m, e.g.
	// noisetest.Exact to compare answers with PostgreSQL's exact ones
	// (e2e/semantic_test.go). No configuration key or flag sets it, and
	// New refuses it outside a test binary (testnoise.go).
	TestNoise func(noise.Mechanism) noise.Mechanism
}

// Server accepts analyst connections. It is safe for concurrent use; Serve
// may be called once per listener.
type Server struct {
	cfg      *conf.Config
	log      *slog.Logger
	opts     Options
	analyzer *rewrite.Analyzer
	pool     *pgxpool.Pool // query traffic: read-only sessions
	ledgerDB *pgxpool.Pool // ledger writes
	replicas *replicaSet   // query traffic when replicas are configured (replicas.go)
	ledger   *budget.Ledger
	answers  *budget.Cache[*answer]
	metrics  *metrics // Prometheus collectors, see metrics.go
	// describes caches the upstream's row description of original private
	// statements, keyed by their deparsed text.
	describes *lru.Cache[string, *description]
	creds     map[string]scram.Credentials
	dummy     scram.Credentials // for unknown users, so they look like a wrong password
	tls       *tls.Config
	nextID    atomic.Uint64
	closing   atomic.Bool
	wg        sync.WaitGroup
	lim       *limiter // limits.go

	// parsed caches analysed statements by query text (parsecache.go).
	parsed *lru.Cache[string, []*rewrite.Statement]
	// shapes caches pass-through analyses by their comparison
	// constants' shape (shapecache.go).
	shapes *lru.Cache[string, *shapeEntry]

	mu        sync.Mutex // guards the fields below
	listeners map[net.Listener]struct{}
	sessions  map[*session]struct{}
	cancels   map[cancelKey]*session
	upstreams map[*pgconn.PgConn]*session

	// databases are the names a client may connect to: the upstream's
	// database and conf.Databases.
	databases []string
}

// maxUpstreamMessage caps one message from the upstream (a row, in
// practice): schema browsing and DP answers need far less.
const maxUpstreamMessage = 64 << 20

// New connects to the upstream, opens the ledger (creating schema dpproxy if
// missing) and prepares authentication. Callers must call Close.
func New(ctx context.Context, cfg *conf.Config, opts Options) (*Server, error) {
	if err := checkTestNoise(opts); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxMessageSize == 0 {
		opts.MaxMessageSize = cfg.Limits.WithDefaults().MaxMessageSize
	}
	if opts.AnswerCacheSize == 0 {
		opts.AnswerCacheSize = 4096
	}
	s := &Server{
		cfg: cfg, log: opts.Logger, opts: opts,
		parsed:    newParseCache(),
		shapes:    newShapeCache(),
		lim:       newLimiter(cfg.Limits),
		metrics:   newMetrics(cfg),
		creds:     map[string]scram.Credentials{},
		listeners: map[net.Listener]struct{}{},
		sessions:  map[*session]struct{}{},
		cancels:   map[cancelKey]*session{},
		upstreams: map[*pgconn.PgConn]*session{},
	}
	var err error
	if s.answers, err = budget.NewCache[*answer](opts.AnswerCacheSize); err != nil {
		return nil, err
	}
	if s.describes, err = lru.New[string, *description](1024); err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		cert, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
		if err != nil {
			return nil, fmt.Errorf("proxy: tls: %w", err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if cfg.Auth.Method == conf.AuthSCRAM {
		for _, u := range cfg.Auth.Users {
			c, err := scram.NewCredentials(u.Password.Reveal())
			if err != nil {
				return nil, fmt.Errorf("proxy: credentials for %s: %w", u.Name, err)
			}
			s.creds[u.Name] = c
		}
		var pw [16]byte
		rand.Read(pw[:])
		if s.dummy, err = scram.NewCredentials(fmt.Sprintf("%x", pw)); err != nil {
			return nil, err
		}
	}

	pcfg, err := pgxpool.ParseConfig(cfg.Upstream.Reveal())
	if err != nil {
		// The DSN may hold a password: say which key, not the value.
		return nil, errors.New("proxy: upstream: not a valid postgres:// URL or DSN")
	}
	db := pcfg.ConnConfig.Database
	if db == "" {
		db = pcfg.ConnConfig.User // as libpq and PostgreSQL default it
	}
	s.databases = append([]string{db}, cfg.Databases...)
	rp := pcfg.ConnConfig.RuntimeParams
	// Every query connection reads SQL text exactly as pg_query did
	// (UTF-8, standard_conforming_strings on, ...), is read-only by
	// default and resolves names the way the rewrite assumes (catalog
	// first, then public): rewrite.PinnedSettings. As startup parameters
	// they are also what RESET ALL and DISCARD ALL restore.
	for k, v := range rewrite.PinnedSettings {
		rp[k] = v
	}
	// Every statement, pass-through included, runs under
	// limits.statement_timeout; a client may SET only a shorter one
	// (rewrite.CheckStatementTimeout), and RESET restores this.
	rp["statement_timeout"] = strconv.FormatInt(s.lim.cfg.StatementTimeout.Milliseconds(), 10)
	if rp["application_name"] == "" {
		rp["application_name"] = "dpproxy"
	}
	// Sessions talk to their upstream connection through pgconn only
	// (prepared statements are named and tracked by the session), so
	// pgx's per-connection statement and description caches would only
	// cost memory: about 50 KiB per connection, preallocated, which is
	// most of an idle session's footprint.
	pcfg.ConnConfig.StatementCacheCapacity = 0
	pcfg.ConnConfig.DescriptionCacheCapacity = 0
	pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pcfg.MaxConns = int32(min(s.lim.cfg.MaxConnections, 1<<20))
	if p := s.lim.cfg.Pool; p.Transaction() {
		pcfg.MaxConns = int32(p.MaxBackends) // sessions share them (pool.go)
	}
	pcfg.MinConns = 0
	pcfg.ConnConfig.OnNotice = s.routeNotice
	// A tiny pass-through query can make PostgreSQL send a huge row
	// (nested ROW(...) doubles record_out's quoting per level: 808 bytes
	// of SQL, a 268 MB row at depth 28; red team). No upstream message may
	// exceed maxUpstreamMessage: the statement fails instead of the proxy
	// holding it in memory.
	pcfg.ConnConfig.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		f := pgproto3.NewFrontend(r, w)
		f.SetMaxBodyLen(maxUpstreamMessage)
		return f
	}
	// A statement's context ends when its client cancels or goes away:
	// cancel it upstream rather than break the connection (cancel.go).
	pcfg.ConnConfig.BuildContextWatcherHandler = cancelUpstreamOnDone
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("proxy: upstream pool: %w", err)
	}
	// The ledger connects as a role of its own (ledger_upstream), so that
	// no statement on a query connection can change a budget.
	lcfg, err := pgxpool.ParseConfig(cfg.LedgerUpstream.Reveal())
	if err != nil {
		s.pool.Close()
		return nil, errors.New("proxy: ledger_upstream: not a valid postgres:// URL or DSN")
	}
	// A private query in progress holds one ledger connection (its
	// budget.Claim) and one private-query slot: the pool needs about as
	// many connections as there are slots, and every one more is taken
	// from the upstream's max_connections.
	lcfg.MaxConns = int32(ledgerPoolSize(cfg.Limits)) // limits.go
	lcfg.ConnConfig.RuntimeParams["application_name"] = "dpproxy-ledger"
	// The ledger's SQL qualifies every name: resolving the rest in
	// pg_catalog only keeps functions and operators other roles created
	// in public out of the ledger role's statements.
	lcfg.ConnConfig.RuntimeParams["search_path"] = "pg_catalog"
	if s.ledgerDB, err = pgxpool.NewWithConfig(ctx, lcfg); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("proxy: ledger pool: %w", err)
	}
	if err := s.openReplicas(ctx, pcfg); err != nil { // replicas.go
		s.Close()
		return nil, err
	}
	if s.ledger, err = budget.Open(ctx, s.ledgerDB, cfg.Auth.Users, budget.Options{Accounting: cfg.Privacy.Accounting, AdvancedDelta: cfg.Privacy.AdvancedDelta, RDPDeltaShare: cfg.Privacy.RDPDeltaShare, TableBudgets: cfg.TableBudgets()}); err != nil {
		s.Close()
		return nil, fmt.Errorf("proxy: ledger: %w", err)
	}
	if err := s.ledgerOutOfReach(ctx); err != nil { // ledgerreach.go
		s.Close()
		return nil, err
	}
	// public_values naming a public table's column: read once, now
	// (publicvalues.go); the analyzer sees them as literal lists.
	if cfg, err = withTablePublicValues(ctx, s.pool, cfg); err != nil {
		s.Close()
		return nil, err
	}
	s.cfg = cfg
	aopts, err := AnalyzerOptions(ctx, s.pool, cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := configuredColumnsExist(cfg, aopts.ColumnTypes); err != nil { // startcheck.go
		s.Close()
		return nil, err
	}
	s.analyzer = rewrite.New(cfg, aopts)
	if err := s.checkLimits(ctx); err != nil { // capacity.go
		s.Close()
		return nil, err
	}
	s.startWatch() // clientgone.go
	return s, nil
}

// Ledger returns the server's budget ledger (for operators and tests).
func (s *Server) Ledger() *budget.Ledger { return s.ledger }
