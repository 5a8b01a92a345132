package proxy

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The session's upstream connection beyond its startup (begin.go): the
// notices it raises, the transaction a private query runs in, a result
// abandoned when the client stops reading, and the reset when the session
// ends.

// routeNotice sends a notice raised upstream (e.g. by a pass-through
// statement) to the client of the session holding that connection. pgconn
// calls it on the session's own goroutine while it reads a result.
func (s *Server) routeNotice(pc *pgconn.PgConn, n *pgconn.Notice) {
	s.mu.Lock()
	target := s.upstreams[pc]
	s.mu.Unlock()
	if target != nil {
		target.forwardNotice(n)
	}
}

func (ss *session) forwardNotice(n *pgconn.Notice) {
	ss.send(&pgproto3.NoticeResponse{
		Severity: n.Severity, SeverityUnlocalized: n.SeverityUnlocalized,
		Code: n.Code, Message: n.Message, Detail: n.Detail, Hint: n.Hint,
	})
}

// privateWorkMem raises work_mem to at least 64MB for the rewritten query's
// transaction only (SET LOCAL semantics: is_local = true), never lowering a
// larger value the operator set for the proxy's role. With
// max_concurrent_private_queries at its default of 16 this bounds the extra
// memory to 16 × 64MB × hash_mem_multiplier.
const privateWorkMem = "SELECT set_config('work_mem', greatest(pg_size_bytes(current_setting('work_mem')) / 1024, 65536)::text, true)"

// partitionwiseAggregate is set for every private query's transaction:
// PostgreSQL then aggregates a partitioned table partition by partition
// when the grouping includes the partition key (the rewrite groups by the
// privacy unit first), and postgres_fdw sends each foreign partition's
// aggregate to its server. It changes nothing for other tables.
const partitionwiseAggregate = "SET LOCAL enable_partitionwise_aggregate = on"

// enterPrivate prepares the upstream connection for one rewritten private
// query (its slot was taken by execute, acquirePrivate): it makes the
// upstream statement_timeout exactly limits.statement_timeout for this
// query only, whatever shorter value the client SET: in a transaction of its own
// (BEGIN READ ONLY; SET LOCAL) outside a transaction block, in a savepoint
// inside one (ROLLBACK TO undoes the SET LOCAL; a failure of the private
// query then aborts the client's block as PostgreSQL would, txabort.go,
// and the client's own ROLLBACK TO recovers it). The caller must
// call the returned end once the query's result has been read, even if it
// failed; end's error is an upstream failure.
func (ss *session) enterPrivate(ctx context.Context) (end func() error, err error) {
	pc := ss.upstream.Conn().PgConn()
	begin, finish := "", ""
	switch pc.TxStatus() {
	case 'I':
		begin, finish = "BEGIN READ ONLY", "COMMIT"
	case 'T':
		begin, finish = "SAVEPOINT dpproxy_private", "ROLLBACK TO SAVEPOINT dpproxy_private; RELEASE SAVEPOINT dpproxy_private"
	default:
		return nil, refuse(pgerr.InFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
	}
	ms := ss.srv.lim.cfg.StatementTimeout.Milliseconds()
	// privateWorkMem keeps the per-unit pre-aggregation's hash table in
	// memory (bench/RESULTS.md: at the default 4MB it spills to disk).
	// partitionwiseAggregate lets a table partitioned by the privacy unit
	// run the per-unit pre-aggregation per partition (on the shards, for
	// postgres_fdw partitions: docs/operations.md, "Scaling out").
	if _, err := pc.Exec(ctx, begin+"; SET LOCAL statement_timeout = "+strconv.FormatInt(ms, 10)+"; "+privateWorkMem+"; "+partitionwiseAggregate).ReadAll(); err != nil {
		// The clean-up must run even when ctx ended (a cancel).
		cctx := context.WithoutCancel(ctx)
		switch {
		case finish == "COMMIT" && pc.TxStatus() != 'I':
			pc.Exec(cctx, "ROLLBACK").ReadAll()
		case finish != "COMMIT" && pc.TxStatus() == 'E':
			pc.Exec(cctx, finish).ReadAll()
		}
		return nil, &Error{Code: pgerr.InternalError, Message: "the database failed to start the private query; no value is shown and the privacy charge is kept", Cause: err}
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
	} else {
		forgetBackend(pc) // pool.go
	}
	ss.upstream.Release()
}
