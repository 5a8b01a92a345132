package proxy

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Limits keep one client, or many, from exhausting
// the proxy or the upstream (conf.Limits, docs/threat-model.md "Limits"):
// connection counts (all, and per analyst) sized against the upstream's
// max_connections, message and query size, authentication, idle and write
// timeouts, the statement timeout of every upstream statement, and the
// concurrency of private queries (all, and per analyst) and of the
// analysis of long texts. This file holds their shared state (limiter)
// and the query length; the others live with the step they bound:
// connection counts in admission.go, the fit against the upstream in
// capacity.go, the client's deadlines in deadlines.go, private-query slots
// in slots.go, the analysis of long texts in analysis.go, the statement
// timeout of a private query in upstream.go. The guard before the parser
// is rewrite/guard.go; cancelling upstream statements is cancel.go.

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

	// watchStop ends the watcher of clients gone (clientgone.go), once.
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
	ss.send(errorResponse(refuse(pgerr.ProgramLimitExceeded, "query of %d bytes exceeds the maximum of %d (limits.max_query_length)", n, max)))
	ss.failed = true // transaction block aborted (txabort.go)
	if extended {
		if ss.flush() != nil || !ss.skipToSync(ctx) {
			return true, false
		}
	} else {
		ss.abortBlock(ctx)
		ss.send(&pgproto3.ReadyForQuery{TxStatus: ss.txStatus()})
	}
	return true, ss.flush() == nil
}
