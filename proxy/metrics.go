package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// This file holds the proxy's observability: Prometheus metrics and the one
// structured log line per statement. The rest of the package calls in with
// one-line hooks: observe around each statement, upstreamTimer around each
// round trip to the database, chargeLedger for the budget charge, cacheHit
// for a repeated query. None of them ever sees a private value or raw SQL:
// statements are identified by their pg_query fingerprint.

// metrics are the Server's Prometheus collectors, registered in a registry
// the Server owns (no package-level state, so several Servers in one
// process, as in tests, keep separate counts). Collectors are safe for
// concurrent use.
type metrics struct {
	reg          *prometheus.Registry
	connsActive  prometheus.Gauge
	connsTotal   prometheus.Counter
	authFailures prometheus.Counter
	queries      *prometheus.CounterVec   // kind, outcome, code
	duration     *prometheus.HistogramVec // kind, part
	epsilon      *prometheus.CounterVec   // analyst
	delta        *prometheus.CounterVec   // analyst
	epsRemaining *prometheus.GaugeVec     // analyst
	cacheHits    prometheus.Counter
	idleReleased prometheus.Counter // sessionidle.go
}

// Parts of a statement's latency (label part of dpproxy_query_duration_seconds).
const (
	partTotal    = "total"    // from the statement's start to its last message queued
	partUpstream = "upstream" // running statements on the database (describe, rewritten or pass-through query)
	partLedger   = "ledger"   // the durable budget charge
	partProxy    = "proxy"    // the rest: parsing, rewriting, noise, encoding
)

func newMetrics(cfg *conf.Config) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.connsActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dpproxy_connections_active", Help: "Authenticated client sessions currently open."})
	m.connsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dpproxy_connections_total", Help: "Client sessions authenticated since start."})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dpproxy_auth_failures_total", Help: "Failed authentications (wrong password or unknown analyst)."})
	m.queries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_queries_total",
		Help: "Statements by kind (private, explain, passthrough, set, show, ...), outcome (answered, refused, failed) and SQLSTATE (empty when answered).",
	}, []string{"kind", "outcome", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "dpproxy_query_duration_seconds",
		Help: "Statement latency by kind and part: total, upstream (database time), ledger (budget charge), proxy (the rest).",
		// 100 µs to about 30 s.
		Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
	}, []string{"kind", "part"})
	m.epsilon = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_epsilon_spent_total", Help: "ε charged to each analyst by this process since start (the ledger holds the lifetime total)."},
		[]string{"analyst"})
	m.delta = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dpproxy_delta_spent_total", Help: "δ charged to each analyst by this process since start."},
		[]string{"analyst"})
	m.epsRemaining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dpproxy_epsilon_remaining", Help: "ε left in each analyst's lifetime budget, as of the last charge through this process."},
		[]string{"analyst"})
	m.cacheHits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dpproxy_answer_cache_hits_total", Help: "Repeated private queries answered from the cache without a new charge."})
	m.idleReleased = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dpproxy_idle_read_buffers_released_total", Help: "Times an idle session gave back its 8 KiB read buffer (taken again with its next message)."})
	for _, c := range []prometheus.Collector{m.connsActive, m.connsTotal, m.authFailures, m.queries, m.duration,
		m.epsilon, m.delta, m.epsRemaining, m.cacheHits, m.idleReleased,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	// Every configured analyst appears from the start, at 0.
	for _, u := range cfg.Auth.Users {
		m.epsilon.WithLabelValues(u.Name)
		m.delta.WithLabelValues(u.Name)
	}
	return m
}

// MetricsHandler serves the Server's metrics in the Prometheus text format.
// Mount it on an HTTP listener the operator chose (metrics.listen).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{Registry: s.metrics.reg})
}

// Metrics returns the registry holding the Server's metrics, for embedding
// them in another exporter.
func (s *Server) Metrics() *prometheus.Registry { return s.metrics.reg }

// connected counts an authenticated session; call the returned function
// when it ends.
func (m *metrics) connected() func() {
	m.connsTotal.Inc()
	m.connsActive.Inc()
	return m.connsActive.Dec
}

// queryObs accumulates what one statement cost. It travels in the context
// and is touched only by the session's goroutine.
type queryObs struct {
	start    time.Time
	upstream time.Duration
	ledger   time.Duration
	charged  bool
	epsilon  float64
	delta    float64
	cached   bool
}

type obsKey struct{}

func obsFrom(ctx context.Context) *queryObs {
	q, _ := ctx.Value(obsKey{}).(*queryObs)
	return q
}

// upstreamTimer measures a round trip to the database; use it as
// defer upstreamTimer(ctx)().
func upstreamTimer(ctx context.Context) func() {
	q := obsFrom(ctx)
	if q == nil {
		return func() {}
	}
	t := time.Now()
	return func() { q.upstream += time.Since(t) }
}

// chargeLedger charges the ledger through the question's claim, timing it
// and counting the spend.
func (ss *session) chargeLedger(ctx context.Context, cl *budget.Claim, c budget.Charge) (budget.Spend, error) {
	t := time.Now()
	sp, err := cl.Charge(ctx, c)
	if q := obsFrom(ctx); q != nil {
		q.ledger += time.Since(t)
		if err == nil {
			q.charged, q.epsilon, q.delta = true, q.epsilon+c.Epsilon, q.delta+c.Delta
		}
	}
	if err == nil {
		m := ss.srv.metrics
		m.epsilon.WithLabelValues(c.Analyst).Add(c.Epsilon)
		m.delta.WithLabelValues(c.Analyst).Add(c.Delta)
		m.epsRemaining.WithLabelValues(c.Analyst).Set(sp.EpsilonRemaining())
	}
	return sp, err
}

// cacheHit records that a private query was answered from the cache.
func (ss *session) cacheHit(ctx context.Context) {
	ss.srv.metrics.cacheHits.Inc()
	if q := obsFrom(ctx); q != nil {
		q.cached = true
	}
}

// observe runs one analysed statement through run, then counts it and logs
// one line about it.
func observe[T any](ss *session, ctx context.Context, st *rewrite.Statement, run func(context.Context) (T, error)) (T, error) {
	q := &queryObs{start: time.Now()}
	v, err := run(context.WithValue(ctx, obsKey{}, q))
	ss.finish(q, kindName(st.Kind), st.Fingerprint, err)
	return v, err
}

// observed runs one statement of a simple Query through run, then counts
// and logs it.
func (ss *session) observed(ctx context.Context, st *rewrite.Statement, run func(context.Context, *rewrite.Statement) error) error {
	if err := ss.holdBackend(ctx); err != nil { // pool.go
		return err
	}
	_, err := observe(ss, ctx, st, func(ctx context.Context) (struct{}, error) { return struct{}{}, run(ctx, st) })
	return err
}

// observedExecute runs an extended-protocol Execute through run, then
// counts and logs it like a simple query's statement.
func (ss *session) observedExecute(ctx context.Context, m *pgproto3.Execute, run func(context.Context, *pgproto3.Execute) error) error {
	pt, ok := ss.portals[m.Portal]
	if !ok || pt.ps == nil || pt.ps.st == nil {
		return run(ctx, m)
	}
	_, err := observe(ss, ctx, pt.ps.st, func(ctx context.Context) (struct{}, error) { return struct{}{}, run(ctx, m) })
	return err
}

// observeRefused counts and logs a query string refused before any of its
// statements ran (by the analyser), with its duration from began, when the
// message arrived. Only its fingerprint is logged; it is empty when the
// string does not parse.
func (ss *session) observeRefused(began time.Time, sql string, err error) {
	q := &queryObs{start: began}
	fp, _ := pg_query.Fingerprint(sql)
	ss.finish(q, "analysis", fp, err)
}

func (ss *session) finish(q *queryObs, kind, fingerprint string, err error) {
	total := time.Since(q.start)
	proxyTime := max(0, total-q.upstream-q.ledger)
	outcome, code := classify(err)
	m := ss.srv.metrics
	m.queries.WithLabelValues(kind, outcome, code).Inc()
	m.duration.WithLabelValues(kind, partTotal).Observe(total.Seconds())
	m.duration.WithLabelValues(kind, partProxy).Observe(proxyTime.Seconds())
	if q.upstream > 0 {
		m.duration.WithLabelValues(kind, partUpstream).Observe(q.upstream.Seconds())
	}
	if q.ledger > 0 {
		m.duration.WithLabelValues(kind, partLedger).Observe(q.ledger.Seconds())
	}

	level := slog.LevelInfo
	switch {
	case code == string(pgerr.InternalError):
		level = slog.LevelError
	case outcome != outcomeAnswered:
		level = slog.LevelWarn
	case kind == "passthrough" || kind == "empty" || kind == "deallocate":
		// Statements that read nothing private and charge nothing: as
		// with PostgreSQL's log_statement = none, a line each would be a
		// write per query on the hot path. The metrics count them.
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if !ss.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("analyst", ss.analyst()), slog.String("kind", kind), slog.String("fingerprint", fingerprint),
		slog.String("outcome", outcome),
	}
	if code != "" {
		attrs = append(attrs, slog.String("code", code), slog.String("reason", safeReason(err)))
	}
	if q.charged {
		attrs = append(attrs, slog.Float64("epsilon", q.epsilon), slog.Float64("delta", q.delta))
	}
	if q.cached {
		attrs = append(attrs, slog.Bool("cached", true))
	}
	attrs = append(attrs, slog.Duration("duration", total), slog.Duration("upstream", q.upstream),
		slog.Duration("ledger", q.ledger), slog.Duration("proxy", proxyTime))
	ss.log.LogAttrs(ctx, level, "query", attrs...)
}

func (ss *session) analyst() string {
	if ss.user == nil {
		return ""
	}
	return ss.user.Name
}

// Outcomes of a statement (label outcome of dpproxy_queries_total).
const (
	outcomeAnswered = "answered"
	outcomeRefused  = "refused" // the proxy refused before running anything private
	outcomeFailed   = "failed"  // the database or the proxy failed
)

// classify maps a statement's error to its outcome and SQLSTATE. A
// refusal is decided by the error's type (pgerr.IsRefusal: the proxy
// declined the statement before running anything private, nothing was
// charged), never by its code's class. Errors the database raises are
// failures whatever their class.
func classify(err error) (outcome, code string) {
	if err == nil {
		return outcomeAnswered, ""
	}
	outcome = outcomeFailed
	if pgerr.IsRefusal(err) {
		outcome = outcomeRefused
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return outcome, pgErr.Code
	}
	var s sqlStater
	if !errors.As(err, &s) {
		return outcomeFailed, string(pgerr.InternalError)
	}
	return outcome, s.SQLState()
}

// safeReason is the text of err that may be logged: the message the client
// sees for the proxy's own errors (errors of rewritten queries are replaced
// by a generic one before they get here), only the SQLSTATE for database
// errors, and for internal errors (bugs) their text. Quoted parts are
// blanked out: messages quote the analyst's input (SET dp.epsilon = 'x'),
// and the log keeps no query text, which may hold values the analyst typed.
func safeReason(err error) string {
	var pgErr *pgconn.PgError
	var pe *Error // the proxy's errors and the rewrite's refusals
	var msg string
	switch {
	case errors.As(err, &pe):
		msg = pe.Message
	case errors.As(err, &pgErr):
		return "database error " + pgErr.Code
	default:
		var s sqlStater
		if errors.As(err, &s) {
			msg = err.Error()
		} else {
			msg = "internal error: " + err.Error()
		}
	}
	return quoted.ReplaceAllString(msg, `$1…$1`)
}

// quoted matches "..." and '...' in messages.
var quoted = regexp.MustCompile(`(["'])(?:[^"'\\]|\\.)*["']`)

func kindName(k rewrite.Kind) string {
	switch k {
	case rewrite.KindPrivate:
		return "private"
	case rewrite.KindPassThrough:
		return "passthrough"
	case rewrite.KindSetDP:
		return "set_dp"
	case rewrite.KindShowDP:
		return "show_dp"
	case rewrite.KindExplainDP:
		return "explain_dp"
	case rewrite.KindEmpty:
		return "empty"
	case rewrite.KindDeallocate:
		return "deallocate"
	}
	return "other"
}
