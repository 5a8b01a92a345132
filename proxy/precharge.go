package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/rewrite"
)

// checkAnswerable runs, before the charge, every check of a fresh private
// query that can fail whatever the private rows hold: a failure after the
// charge would make the analyst pay for nothing, and whether it fails must
// never depend on one person. None of these checks reads a private row:
//
//   - the session's transaction is not already aborted (PostgreSQL would
//     refuse the query before reading anything, but after the charge);
//   - the rewritten SQL prepares upstream: parse analysis reads only the
//     catalog, so an ambiguous or unknown name in the rewrite (a bug of the
//     rewrite) is found here, uncharged;
//   - every bound parameter is a valid value of its type (text input or
//     binary receive), checked by binding it to a statement that reads no
//     table.
func (ss *session) checkAnswerable(ctx context.Context, plan *rewrite.Plan, p *params, paramOIDs []uint32, cv *constValues) error {
	if ss.txStatus() == 'E' {
		return &Error{Code: "25P02", Message: "current transaction is aborted, commands ignored until end of transaction block"}
	}
	n := plan.NumParams
	if len(paramOIDs) < n {
		return newError(codeProtocol, "the query has %d parameters but %d types are known", n, len(paramOIDs))
	}
	_, _, oids := boundParams(plan, p, paramOIDs, cv, [8]byte{}) // the client's, the constants' (consts.go), the seed
	pc := ss.upstream.Conn().PgConn()
	key := "bounded\x00" + fmt.Sprint(oids) + "\x00" + plan.SQL
	if _, ok := ss.srv.describes.Get(key); !ok {
		if _, err := pc.Prepare(ctx, "", plan.SQL, oids); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				return err
			}
			ss.log.Error("the rewritten query does not prepare upstream", "code", pgErr.Code, "err", pgErr.Message)
			return &Error{Code: codeUnsupported, cause: err,
				Message: "dpproxy cannot answer this query: its rewritten SQL is refused by the database (a limitation of dpproxy); nothing was charged",
				Detail:  pgErr.Message}
		}
		ss.srv.describes.Add(key, &description{})
	}
	if n == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(i+1))
	}
	values, formats := p.values[:n], p.formats[:n]
	if _, err := pc.ExecParams(ctx, b.String(), values, oids[:n], formats, nil).Close(); err != nil {
		// About the client's own values, which it may see; nothing charged.
		return err
	}
	return nil
}
