package proxy

import (
	"context"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// A transaction block after an error. PostgreSQL leaves a block in which
// a statement failed aborted: every later statement but ROLLBACK (and
// COMMIT, which then rolls back) fails with 25P02, ReadyForQuery says
// 'E', ROLLBACK TO SAVEPOINT recovers. Clients and ORMs rely on it. An
// error of the proxy's own (a refusal, a private query that failed and
// was rolled back to its savepoint, enterPrivate) leaves the upstream
// transaction untouched, so the proxy then makes that transaction fail
// with a fixed statement of its own, whose error it keeps from the
// client: PostgreSQL itself then holds the aborted state, its savepoints
// and what COMMIT and ROLLBACK TO do, exactly. (Tracking the state in the
// proxy instead would mean re-implementing savepoint names and nesting,
// RELEASE, COMMIT AND CHAIN and the rest, and would diverge from the
// upstream's state on the first statement the proxy did not foresee.)
//
// session.failed is set when an error is sent to the client; the block
// is aborted before the next ReadyForQuery (simple query) or at Sync
// (extended protocol, where the batch is skipped to its Sync anyway).

// abortStatement always fails, at parse analysis, without reading
// anything; its text says in the database's log where it comes from.
const abortStatement = "SELECT 'dpproxy: a statement failed in this transaction block, which is now aborted'::pg_catalog.int4"

// abortBlock puts the upstream transaction block in the failed state if
// an error was sent to the client since the last ReadyForQuery and the
// block is still usable.
func (ss *session) abortBlock(ctx context.Context) {
	failed := ss.failed
	ss.failed = false
	if !failed || ss.upstream == nil || ss.upBatch {
		return
	}
	pc := ss.upstream.Conn().PgConn()
	if pc.IsClosed() || pc.IsBusy() || pc.TxStatus() != 'T' {
		return
	}
	// Even after a cancel: the block's state depends on it.
	pc.Exec(context.WithoutCancel(ctx), abortStatement).ReadAll()
	if st := pc.TxStatus(); st != 'E' && !pc.IsClosed() {
		ss.log.Error("could not abort the transaction block after an error", "status", string(st))
	}
}

// inFailedBlock refuses a statement the proxy answers itself (a private
// query, SET/SHOW dp.*, EXPLAIN DP, DEALLOCATE) in an aborted block, as
// PostgreSQL refuses any statement there: before a private query's
// charge, which it would otherwise pay for a query that cannot run.
func (ss *session) inFailedBlock(st *rewrite.Statement) error {
	if st.Kind == rewrite.KindEmpty || st.Kind == rewrite.KindPassThrough || ss.upBatch || ss.txStatus() != 'E' {
		return nil
	}
	return refuse(pgerr.InFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
}
