package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Roles are the two upstream roles a proxy connects as, made by
// CreateRoles as docs/operations.md describes: Query runs analysts'
// statements and may only read the tables it was granted; Ledger owns
// schema dpproxy, which Query cannot reach. A statement on a query
// connection therefore cannot change a budget, whatever the proxy lets
// through.
type Roles struct {
	QueryRole, LedgerRole string
	// QueryURL and LedgerURL connect as each role to the database of the
	// admin URL given to CreateRoles: upstream and ledger_upstream.
	QueryURL, LedgerURL string
}

// CreateRoles creates, in the database at admin (a URL of a role that may
// create roles and schemas, e.g. a superuser), the login roles
// PREFIX_query and PREFIX_ledger with random passwords, schema dpproxy
// owned by the ledger role (so that it needs no CREATE on the database and
// can add ledger tables on upgrade), and grants the query role SELECT on
// tables (schema.table names) and USAGE on their schemas, nothing else. It
// fails when schema dpproxy already exists: its owner is the ledger role.
// Callers remove the roles with Drop.
func CreateRoles(ctx context.Context, admin, prefix string, tables []string) (*Roles, error) {
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, errors.New("demo: roles: the upstream is not a postgres:// URL")
	}
	r := &Roles{QueryRole: prefix + "_query", LedgerRole: prefix + "_ledger"}
	q, l := pgx.Identifier{r.QueryRole}.Sanitize(), pgx.Identifier{r.LedgerRole}.Sanitize()
	qpw, lpw := randomHex(16), randomHex(16)
	stmts := []string{
		"CREATE ROLE " + q + " LOGIN PASSWORD '" + qpw + "'",
		"CREATE ROLE " + l + " LOGIN PASSWORD '" + lpw + "'",
		"CREATE SCHEMA dpproxy AUTHORIZATION " + l,
		"REVOKE ALL ON SCHEMA dpproxy FROM PUBLIC",
	}
	schemas := map[string]bool{}
	for _, t := range tables {
		schema, _, ok := strings.Cut(t, ".")
		if !ok {
			return nil, fmt.Errorf("demo: roles: %q is not schema.table", t)
		}
		if !schemas[schema] {
			schemas[schema] = true
			stmts = append(stmts, "GRANT USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+q)
		}
		stmts = append(stmts, "GRANT SELECT ON "+pgx.Identifier(strings.SplitN(t, ".", 2)).Sanitize()+" TO "+q)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("demo: roles: connect: %w", err)
	}
	defer conn.Close(ctx)
	// One transaction: a failure leaves no half-made roles behind.
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", strings.Replace(strings.Replace(s, qpw, "...", 1), lpw, "...", 1), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("demo: roles: %w", err)
	}
	qu, lu := *u, *u
	qu.User = url.UserPassword(r.QueryRole, qpw)
	lu.User = url.UserPassword(r.LedgerRole, lpw)
	r.QueryURL, r.LedgerURL = qu.String(), lu.String()
	return r, nil
}

// Drop removes the roles and everything they own in the database at admin
// (the ledger, schema dpproxy, included), and their grants there.
func (r *Roles) Drop(ctx context.Context, admin string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("demo: roles: connect: %w", err)
	}
	defer conn.Close(ctx)
	both := pgx.Identifier{r.QueryRole}.Sanitize() + ", " + pgx.Identifier{r.LedgerRole}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP OWNED BY "+both+" CASCADE; DROP ROLE "+both); err != nil {
		return fmt.Errorf("demo: roles: drop: %w", err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
