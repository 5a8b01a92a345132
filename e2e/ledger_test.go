package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/proxy"
)

// budgetRows reads every analyst's row of the ledger as the superuser.
func budgetRows(t *testing.T) string {
	t.Helper()
	var s string
	err := direct(t).QueryRow(ctx, `SELECT coalesce(string_agg(format('%s %s %s %s %s', analyst, epsilon_limit, epsilon_spent, delta_limit, delta_spent), '; ' ORDER BY analyst), '')
		FROM dpproxy.budgets`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestQueryRoleCannotTouchTheLedger: connected straight to the upstream as
// the role the proxy runs analysts' statements under, in a read-write
// transaction, no statement reads or moves the budget: whatever a parsing
// confusion lets through the proxy, the upstream refuses it with 42501.
func TestQueryRoleCannotTouchTheLedger(t *testing.T) {
	// Spend something, so that there is a budget to reset.
	alice := connect(t, "alice", pwAlice)
	if _, err := alice.Exec(ctx, "SELECT count(*) FROM orders WHERE quantity = 3"); err != nil {
		t.Fatal(err)
	}
	before := budgetRows(t)

	conn, err := pgx.Connect(ctx, env.cfg.Upstream.Reveal()) // the proxy's own query role
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var role string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil || role != env.roles.QueryRole {
		t.Fatalf("the proxy's upstream connects as %q (%v), want the query role %s", role, err, env.roles.QueryRole)
	}
	for _, stmt := range []string{
		"UPDATE dpproxy.budgets SET epsilon_spent = 0",
		"SELECT epsilon_spent FROM dpproxy.budgets",
		"INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, action, actor) VALUES ('alice', '', -100, 0, 'grant', 'mallory')",
		"DELETE FROM dpproxy.answers",
		"TRUNCATE dpproxy.charges",
		"SELECT nextval('dpproxy.charges_id_seq')",
		"CREATE TABLE dpproxy.evil (x int)",
		"CREATE FUNCTION dpproxy.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT now()'",
		"CREATE TRIGGER evil BEFORE UPDATE ON dpproxy.budgets FOR EACH ROW EXECUTE FUNCTION dpproxy.append_only()",
		"ALTER TABLE dpproxy.budgets DROP CONSTRAINT budgets_pkey",
		"DROP TABLE dpproxy.budgets",
		"DROP SCHEMA dpproxy CASCADE",
		"ALTER SCHEMA dpproxy RENAME TO old_ledger",
		"CREATE SCHEMA dpproxy2",
		"SET ROLE " + env.roles.LedgerRole,
		"SET SESSION AUTHORIZATION " + env.roles.LedgerRole,
		"GRANT USAGE ON SCHEMA dpproxy TO " + env.roles.QueryRole,
		"REVOKE ALL ON SCHEMA dpproxy FROM " + env.roles.LedgerRole,
	} {
		_, err := conn.Exec(ctx, "BEGIN READ WRITE; "+stmt+"; COMMIT")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s as the query role: err = %v, want SQLSTATE 42501 (permission denied)", stmt, err)
		}
		conn.Exec(ctx, "ROLLBACK")
	}
	if after := budgetRows(t); after != before {
		t.Errorf("the ledger changed under the query role's statements:\nbefore %s\nafter  %s", before, after)
	}
}

// TestProxyConnectsAsTwoRoles: the running proxy's query connections are
// the query role's, its ledger connections the ledger role's.
func TestProxyConnectsAsTwoRoles(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM orders WHERE quantity = 2"); err != nil {
		t.Fatal(err)
	}
	rows, err := direct(t).Query(ctx, `SELECT DISTINCT application_name || ' ' || usename FROM pg_stat_activity
		WHERE datname = current_database() AND application_name IN ('dpproxy', 'dpproxy-ledger') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dpproxy " + env.roles.QueryRole, "dpproxy-ledger " + env.roles.LedgerRole}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the proxy's upstream connections are %q, want %q", got, want)
	}
}

// reachingRole creates a login role that can read the demo tables and, by
// grants, do what grants says to the ledger; it is dropped when the test
// ends. It returns the role and its URL.
func reachingRole(t *testing.T, grants ...string) (string, string) {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "dpreach_" + hex.EncodeToString(b[:])
	admin := direct(t)
	for _, s := range append([]string{
		"CREATE ROLE " + name + " LOGIN",
		"GRANT SELECT ON public.orders, public.customers, public.products TO " + name,
	}, grants...) {
		s = strings.ReplaceAll(s, "ROLE_", name)
		if _, err := admin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), env.upstream)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		c.Exec(context.Background(), "DROP OWNED BY "+name)
		c.Exec(context.Background(), "DROP ROLE "+name)
	})
	u := mustURL(t, env.upstream)
	u.User = url.User(name)
	return name, u.String()
}

// TestServeRefusesAQueryRoleThatReachesTheLedger: with ledger_upstream
// set, a proxy refuses to start when its query role (or a role it can
// become) can reach schema dpproxy, naming the role and the REVOKE; with
// one DSN for both (the demo's set-up) it starts and warns.
func TestServeRefusesAQueryRoleThatReachesTheLedger(t *testing.T) {
	yaml := `
upstream: QUERY
ledger_upstream: LEDGER
auth:
  method: trust
  users:
    - {name: reach_someone, budget: {epsilon: 1, delta: 1.0e-6}}
` + shopTables
	superURL := env.upstream
	for _, tc := range []struct {
		name   string
		grants []string
		query  func(role string) string // the query URL, given the reaching role's
		want   []string
	}{
		{"update on budgets", []string{"GRANT USAGE ON SCHEMA dpproxy TO ROLE_", "GRANT UPDATE ON dpproxy.budgets TO ROLE_"}, nil,
			[]string{"upstream: role ROLE_ can reach the ledger (UPDATE ON dpproxy.budgets)", "REVOKE ALL ON SCHEMA dpproxy FROM ROLE_"}},
		{"member of the ledger role", []string{"GRANT " + env.roles.LedgerRole + " TO ROLE_"}, nil,
			[]string{"role ROLE_ can reach the ledger", "owns schema dpproxy", "through role " + env.roles.LedgerRole, "REVOKE " + env.roles.LedgerRole + " FROM ROLE_"}},
		{"pg_write_all_data", []string{"GRANT pg_write_all_data TO ROLE_"}, nil,
			[]string{"role ROLE_ can reach the ledger", "UPDATE ON dpproxy.budgets", "REVOKE pg_write_all_data FROM ROLE_"}},
		{"the ledger role for queries", nil, func(string) string {
			u := mustURL(t, env.roles.LedgerURL) // another DSN, the same role
			q := u.Query()
			q.Set("connect_timeout", "10")
			u.RawQuery = q.Encode()
			return u.String()
		},
			[]string{"role " + env.roles.LedgerRole + " can reach the ledger", "ledger_upstream connects as the same role"}},
		{"superuser", nil, func(string) string { return superURL },
			[]string{"is a superuser, so a statement on a query connection could change budgets"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role, queryURL := reachingRole(t, tc.grants...)
			if tc.query != nil {
				queryURL = tc.query(role)
			}
			cfg := configFor(t, strings.NewReplacer("QUERY", queryURL, "LEDGER", env.roles.LedgerURL).Replace(yaml), nil)
			srv, err := proxy.New(ctx, cfg, proxy.Options{})
			if err == nil {
				srv.Close()
				t.Fatal("the proxy started with a query role that can reach the ledger")
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "ROLE_", role); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	t.Run("one DSN warns", func(t *testing.T) {
		one := strings.Replace(strings.Replace(yaml, "ledger_upstream: LEDGER\n", "", 1), "QUERY", env.roles.LedgerURL, 1)
		cfg := configFor(t, one, nil)
		logs := &syncBuffer{}
		srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatalf("a one-DSN (demo) configuration was refused: %v", err)
		}
		srv.Close()
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "one upstream role for queries and the ledger") {
			t.Errorf("no start-up warning about the shared role:\n%s", logs.String())
		}
	})

	t.Run("two roles start quietly", func(t *testing.T) {
		cfg := configFor(t, strings.NewReplacer("QUERY", env.roles.QueryURL, "LEDGER", env.roles.LedgerURL).Replace(yaml), nil)
		logs := &syncBuffer{}
		srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if strings.Contains(logs.String(), "ledger_upstream") {
			t.Errorf("a warning about the roles with two of them:\n%s", logs.String())
		}
	})
}
