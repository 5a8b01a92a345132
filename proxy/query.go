package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// The simple query protocol: a Query message, its statements analysed as
// one, then run one by one (pass-through, passthrough.go; the proxy's own,
// execute), each answered before the next.

// simpleQuery answers one Query message: every statement is analysed first,
// so a string mixing allowed and refused parts runs nothing.
func (ss *session) simpleQuery(ctx context.Context, sql string) {
	began := time.Now() // a refusal's logged duration counts from here
	defer func() {
		ss.abortBlock(ctx) // after an error (txabort.go)
		ss.send(readyForQuery(ss.txStatus()))
	}()
	if err := ss.endBatch(ctx); err != nil { // portal.go
		ss.sendError(err)
		return
	}
	stmts, err := ss.analyze(ctx, sql) // analysis.go
	if err != nil {
		ss.observeRefused(began, refusedText(sql, err), err)
		ss.send(errorResponse(err))
		ss.failed = true
		return
	}
	for _, st := range stmts {
		if err := ss.observed(ctx, st, ss.run); err != nil {
			ss.sendError(err)
			return
		}
	}
}

func (ss *session) sendError(err error) {
	var s sqlStater
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		ss.log.Info("upstream error", "code", pgErr.Code)
	case errors.As(err, &s):
		ss.log.Debug("query failed", "code", s.SQLState(), "reason", safeReason(err)) // the error's cause may hold data
	default:
		ss.log.Error("internal error", "err", err)
	}
	ss.send(errorResponse(err))
	ss.failed = true // the transaction block is aborted (txabort.go)
}

// run executes one statement of a simple Query message.
func (ss *session) run(ctx context.Context, st *rewrite.Statement) error {
	if st.Copy != nil {
		return ss.copyOut(ctx, st) // copyout.go
	}
	if st.Kind == rewrite.KindPassThrough {
		return ss.passThrough(ctx, st)
	}
	r, err := ss.execute(ctx, st, nil, nil)
	if err != nil {
		return err
	}
	if r.empty {
		ss.send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	if r.fields != nil {
		ss.send(&pgproto3.RowDescription{Fields: r.fields})
	}
	_, err = ss.sendRows(r, nil, 0)
	return err
}

// execute answers a statement the proxy handles itself. p and paramOIDs
// carry bound parameters (extended protocol); nil for a simple query.
func (ss *session) execute(ctx context.Context, st *rewrite.Statement, p *params, paramOIDs []uint32) (*result, error) {
	if err := ss.inFailedBlock(st); err != nil { // txabort.go
		return nil, err
	}
	switch st.Kind {
	case rewrite.KindEmpty:
		return &result{empty: true}, nil
	case rewrite.KindSetDP:
		return ss.setDP(st)
	case rewrite.KindShowDP:
		return ss.showDP(ctx, st)
	case rewrite.KindPrivate:
		// The slot is taken before anything is charged: a query refused
		// for want of one costs nothing (slots.go).
		release, err := ss.srv.lim.acquirePrivate(ctx, ss.user.Name)
		if err != nil {
			return nil, err
		}
		defer release()
		return ss.privateQuery(ctx, st, p, paramOIDs) // clock.go
	case rewrite.KindExplainDP:
		return ss.explainDP(ctx, st, paramOIDs)
	case rewrite.KindDeallocate:
		return ss.deallocate(ctx, st.Deallocate)
	}
	return nil, fail(pgerr.InternalError, "unknown statement kind %d", st.Kind)
}
