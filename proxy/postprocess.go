package proxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Post-processing: the original select list, HAVING, ORDER BY, LIMIT and
// OFFSET computed in PostgreSQL over the released rows only.

// typeNames maps built-in type OIDs to names for the post-processing casts.
// It is never registered into after init and TypeForOID only reads, so it
// is safe to share between sessions.
var typeNames = pgtype.NewMap()

// checkPost asks the upstream to analyse the original statement (parse
// analysis reads no table data) so that an ill-typed HAVING or output
// expression is reported before anything is charged.
func (ss *session) checkPost(ctx context.Context, plan *rewrite.Plan) error {
	if plan.Post == nil {
		return nil
	}
	_, err := ss.upstream.Conn().PgConn().Prepare(ctx, "", plan.OriginalSQL, nil)
	return err
}

// postProcess computes the original select list, HAVING, ORDER BY, LIMIT
// and OFFSET over the released rows (post-processing: Dwork & Roth,
// Prop. 2.1). It runs in PostgreSQL, for exact semantics and result types,
// over the noisy values only: they are sent as text arrays and cast back
// to the types the database gave them; the expressions come from the
// rewrite, which lets them reference nothing but those values.
func (ss *session) postProcess(ctx context.Context, plan *rewrite.Plan, a *answer) (*answer, error) {
	sql, params := postSQL(plan, a)
	oids := make([]uint32, len(params))
	for i := range oids {
		oids[i] = 1009 // text[]
	}
	rr := ss.upstream.Conn().PgConn().ExecParams(ctx, sql, params, oids, nil, nil)
	fields := rowDescription(rr.FieldDescriptions()).Fields
	rows := collectRows(rr)
	if _, err := rr.Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "42")) {
			// The post-processing query sees only released values: its
			// data errors (division by zero, ...) reveal nothing more.
			return nil, &Error{Code: pgerr.Code(pgErr.Code), Message: "post-processing of the noisy result failed (the privacy charge is kept): " + pgErr.Message, Cause: err}
		}
		return nil, &Error{Code: pgerr.InternalError, Message: "post-processing of the noisy result failed; the privacy charge is kept", Cause: err}
	}
	return &answer{fields: fields, rows: rows, charged: a.charged, bounds: a.bounds}, nil
}

// postSQL builds the post-processing query and its parameters: one text
// array per released column.
func postSQL(plan *rewrite.Plan, a *answer) (string, [][]byte) {
	n := len(a.fields)
	var casts, us, ps []string
	params := make([][]byte, n)
	for i, f := range a.fields {
		name := "text"
		if t, ok := typeNames.TypeForOID(f.DataTypeOID); ok {
			name = t.Name
		}
		casts = append(casts, fmt.Sprintf("u.c%d::%s AS dp_c%d", i, name, i))
		us = append(us, fmt.Sprintf("c%d", i))
		ps = append(ps, fmt.Sprintf("$%d::text[]", i+1))
		var b strings.Builder
		b.WriteByte('{')
		for j, r := range a.rows {
			if j > 0 {
				b.WriteByte(',')
			}
			if r[i] == nil {
				b.WriteString("NULL")
				continue
			}
			b.WriteByte('"')
			for _, ch := range string(r[i]) {
				if ch == '"' || ch == '\\' {
					b.WriteByte('\\')
				}
				b.WriteRune(ch)
			}
			b.WriteByte('"')
		}
		b.WriteByte('}')
		params[i] = []byte(b.String())
	}
	sql := "SELECT " + plan.Post.Targets + " FROM (SELECT " + strings.Join(casts, ", ") +
		" FROM unnest(" + strings.Join(ps, ", ") + ") AS u(" + strings.Join(us, ", ") + ")) AS dp"
	if plan.Post.Where != "" {
		sql += " WHERE " + plan.Post.Where
	}
	if plan.Post.OrderBy != "" {
		sql += " ORDER BY " + plan.Post.OrderBy
	}
	if plan.Limit >= 0 {
		sql += " LIMIT " + strconv.FormatInt(plan.Limit, 10)
	}
	if plan.Offset > 0 {
		sql += " OFFSET " + strconv.FormatInt(plan.Offset, 10)
	}
	return sql, params
}
