package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Constants first (rewrite/hoist.go): a private query's constant
// subexpressions are evaluated in one statement that reads no table,
// before the charge, and their values are bound to the rewritten SQL. An
// error there depends only on the client's constants and parameters and
// the session's settings, never on a private row: it reaches the client
// as PostgreSQL raised it, with nothing charged.

// constValues are a plan's hoisted constants as evaluated upstream.
type constValues struct {
	params []int    // $n of Plan.SQL
	values [][]byte // binary format; nil for NULL
	oids   []uint32
}

// key renders the values for the answer cache: a question with now() asked
// at two moments is two questions.
func (c *constValues) key() string {
	if c == nil || len(c.params) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("consts:")
	for i, v := range c.values {
		if v == nil {
			fmt.Fprintf(&b, "%d:%d:N;", c.params[i], c.oids[i])
			continue
		}
		fmt.Fprintf(&b, "%d:%d:%x;", c.params[i], c.oids[i], v)
	}
	return b.String()
}

// evalConstants evaluates plan.ConstSQL with the client's parameters and
// checks the types of parameters and constants against plan.TypeChecks.
// It reads no table: the statement is the plan's constant expressions,
// checked against rewrite's allowlist of functions that read nothing.
func (ss *session) evalConstants(ctx context.Context, plan *rewrite.Plan, p *params, paramOIDs []uint32) (*constValues, error) {
	cv := &constValues{}
	if plan.SeedParam() > maxParams {
		// The rewrite binds the constants and its seed after the client's parameters.
		return nil, refuse(pgerr.ProgramLimitExceeded, "this query over a private table would need %d parameters with its constants and seed, more than %d", plan.SeedParam(), maxParams)
	}
	if plan.ConstSQL == "" && len(plan.TypeChecks) == 0 {
		return cv, nil
	}
	desc, err := ss.describe(ctx, plan, paramOIDs)
	if err != nil {
		return nil, err
	}
	n := plan.NumParams
	if len(desc.paramOIDs) < n {
		return nil, refuse(pgerr.ProtocolViolation, "the query has %d parameters but %d types are known", n, len(desc.paramOIDs))
	}
	typeOf := map[int]uint32{}
	for i := range n {
		typeOf[i+1] = desc.paramOIDs[i]
	}
	if plan.ConstSQL != "" {
		var values [][]byte
		var formats []int16
		if p != nil {
			values, formats = p.values[:n], p.formats[:n]
		}
		done := upstreamTimer(ctx)
		rr := ss.upstream.Conn().PgConn().ExecParams(ctx, plan.ConstSQL, values, desc.paramOIDs[:n], formats, []int16{1})
		fields := rr.FieldDescriptions()
		rows := collectRows(rr)
		_, err := rr.Close()
		done()
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				// About the client's own constants, which it may see.
				return nil, &Error{Code: pgerr.Code(pgErr.Code), Refusal: true, Message: pgErr.Message, Detail: pgErr.Detail, Cause: err,
					Hint: "dpproxy evaluates the constant expressions of a DP query before it reads any private row; nothing was charged"}
			}
			return nil, err
		}
		if len(rows) != 1 || len(rows[0]) != len(plan.Consts) || len(fields) != len(plan.Consts) {
			return nil, fail(pgerr.InternalError, "the constants of the query did not evaluate to one row of %d values", len(plan.Consts))
		}
		for i, c := range plan.Consts {
			if c.Param == 0 {
				continue // only checked: it stays inline
			}
			oid := fields[i].DataTypeOID
			if rewrite.TypeName(oid) == "" {
				return nil, refuse(pgerr.InsufficientPrivilege, "the constant %s has a type dpproxy cannot bind to a query over a private table (type oid %d)", c.SQL, oid)
			}
			cv.params = append(cv.params, c.Param)
			cv.values = append(cv.values, rows[0][i])
			cv.oids = append(cv.oids, oid)
			typeOf[c.Param] = oid
		}
	}
	for _, tc := range plan.TypeChecks {
		if err := tc.Check(typeOf[tc.Param]); err != nil {
			return nil, err
		}
		if tc.Pattern {
			// A LIKE pattern bound per execution (a client's parameter or
			// a constant evaluated above, in the simple protocol too):
			// checked here, before the charge and before anything is
			// planned (the planner matches it against the column's
			// statistics), as PostgreSQL would fail on a bad one only
			// when a row reaches its end. Its type is text or varchar
			// (TypeCheck.Check above), so these bytes are exactly the
			// text the operator receives.
			if err := tc.CheckPattern(cv.value(tc.Param, plan.NumParams, p)); err != nil {
				return nil, err
			}
		}
	}
	return cv, nil
}

// value is the bound value of parameter n of plan.SQL: the client's
// ($1..$numParams) or an evaluated constant; nil for NULL.
func (c *constValues) value(n, numParams int, p *params) []byte {
	if n <= numParams {
		if p != nil && n-1 < len(p.values) {
			return p.values[n-1]
		}
		return nil
	}
	for i, param := range c.params {
		if param == n {
			return c.values[i]
		}
	}
	return nil
}

// boundParams lays out the parameters of plan.SQL: the client's ($1 ..
// $NumParams, as they came), the hoisted constants (binary, at their
// Param), and the seed ($SeedParam(), bigint, text).
func boundParams(plan *rewrite.Plan, p *params, paramOIDs []uint32, cv *constValues, seed [8]byte) (values [][]byte, formats []int16, oids []uint32) {
	total := plan.SeedParam()
	values, formats, oids = make([][]byte, total), make([]int16, total), make([]uint32, total)
	for i := range plan.NumParams {
		values[i], formats[i] = p.values[i], p.formats[i]
		if i < len(paramOIDs) {
			oids[i] = paramOIDs[i]
		}
	}
	if cv != nil {
		for i, n := range cv.params {
			values[n-1], formats[n-1], oids[n-1] = cv.values[i], 1, cv.oids[i]
		}
	}
	values[total-1] = strconv.AppendInt(nil, int64(binary.LittleEndian.Uint64(seed[:])), 10)
	oids[total-1] = oidInt8
	return values, formats, oids
}

// columnTypes reads the type of every column of the configured tables
// (rewrite.ColumnTypesSQL), for the totality table.
func columnTypes(ctx context.Context, pool querier, cfg *conf.Config) (map[string]string, error) {
	var names []string
	for _, t := range cfg.Tables {
		names = append(names, t.QualifiedName())
	}
	rows, err := pool.Query(ctx, rewrite.ColumnTypesSQL, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types := map[string]string{}
	for rows.Next() {
		var col, typ string
		if err := rows.Scan(&col, &typ); err != nil {
			return nil, err
		}
		types[col] = typ
	}
	return types, rows.Err()
}
