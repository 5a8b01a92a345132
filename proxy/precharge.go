package proxy

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// checkAnswerable runs, before the charge, every check of a fresh private
// query that can fail whatever the private rows hold: a failure after the
// charge would make the analyst pay for nothing, and whether it fails must
// never depend on one person. None of these checks reads a private row:
//
//   - the session's transaction is not already aborted (PostgreSQL would
//     refuse the query before reading anything, but after the charge);
//   - every bound parameter is a valid value of its type (text input or
//     binary receive), checked by binding it to a statement that reads no
//     table;
//   - the rewritten SQL plans upstream with the values it will run with:
//     parse analysis and planning read only the catalog and statistics,
//     so an unknown name in the rewrite, or a constant that fails when
//     PostgreSQL folds it, is found here, uncharged.
func (ss *session) checkAnswerable(ctx context.Context, plan *rewrite.Plan, p *params, paramOIDs []uint32, cv *constValues) error {
	if ss.txStatus() == 'E' {
		return &Error{Code: pgerr.InFailedSQLTransaction, Refusal: true, Message: "current transaction is aborted, commands ignored until end of transaction block"}
	}
	n := plan.NumParams
	if len(paramOIDs) < n {
		return refuse(pgerr.ProtocolViolation, "the query has %d parameters but %d types are known", n, len(paramOIDs))
	}
	values, formats, oids := boundParams(plan, p, paramOIDs, cv, [8]byte{}) // the client's, the constants' (consts.go), the seed
	pc := ss.upstream.Conn().PgConn()
	if n > 0 {
		var b strings.Builder
		b.WriteString("SELECT ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + strconv.Itoa(i+1))
		}
		if _, err := pc.ExecParams(ctx, b.String(), values[:n], oids[:n], formats[:n], nil).Close(); err != nil {
			// About the client's own values, which it may see; nothing charged.
			return err
		}
	}
	// Plan, without running, the rewritten SQL with the values it will run
	// with: parse analysis finds a name the rewrite got wrong, planning
	// folds the constants PostgreSQL folds (a literal out of range for the
	// column it is compared with, 1/0), both without reading a row. The
	// plan is discarded, its row estimates never leave the proxy, and the
	// database's message goes to the log only. The original statement is
	// planned too when the noisy rows are post-processed by it (HAVING and
	// output expressions hold constants of their own).
	checks := []struct {
		sql     string
		values  [][]byte
		formats []int16
		oids    []uint32
	}{{plan.SQL, values, formats, oids}}
	if plan.Post != nil {
		checks = append(checks, struct {
			sql     string
			values  [][]byte
			formats []int16
			oids    []uint32
		}{plan.OriginalSQL, values[:n], formats[:n], oids[:n]})
	}
	for _, c := range checks {
		if _, err := pc.ExecParams(ctx, "EXPLAIN (COSTS OFF) "+c.sql, c.values, c.oids, c.formats, nil).Close(); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				return err
			}
			ss.log.Warn("the rewritten query does not plan upstream", "code", pgErr.Code, "err", pgErr.Message)
			return &Error{Code: pgerr.Code(pgErr.Code), Refusal: true, Cause: err,
				Message: "dpproxy cannot answer this query: the database refuses to plan it (a constant that does not fit the type it is compared with, an operation on constants that fails, or a limitation of dpproxy's rewrite); nothing was charged"}
		}
	}
	return nil
}
