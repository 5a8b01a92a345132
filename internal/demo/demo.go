// Package demo holds the sample online-shop dataset and the configuration
// that `dpproxy demo` runs on, and that the e2e tests reuse.
package demo

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Schema creates and fills the sample dataset: customers and their orders
// (private, protected per customer) and a public product catalogue. The data
// is generated inside PostgreSQL from a fixed seed, so every run has the same
// rows: 2,000 customers in four regions, about 20,000 orders with a skewed
// number per customer (a few customers order hundreds of times), and one
// sales channel ('phone') used by a single customer only, which partition
// selection must suppress.
//
//go:embed schema.sql
var Schema string

// Config is the demo's configuration, with UPSTREAM and LEDGER_UPSTREAM to
// be replaced by the query role's and the ledger role's URLs. It uses trust
// authentication: for a local demo only.
//
//go:embed dpproxy.yaml
var Config string

// ConfigFor returns the demo configuration connecting to upstream for
// queries and to ledger for the ledger (the same URL for a one-role demo).
func ConfigFor(upstream, ledger string) []byte {
	return []byte(strings.NewReplacer("LEDGER_UPSTREAM", ledger, "UPSTREAM", upstream).Replace(Config))
}

// Marker is the comment the demo puts on its tables.
const Marker = "dpproxy demo data"

// tables are the demo's tables, in the order they can be dropped.
var tables = []string{"public.orders", "public.customers", "public.products"}

// Load creates the dataset in the database at url, replacing the demo
// tables of an earlier run. It refuses to touch a table of the same name
// that the demo did not create (one without Marker as its comment).
func Load(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("demo: connect: %w", err)
	}
	defer conn.Close(ctx)
	if err := checkForeign(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("demo: load dataset: %w", err)
	}
	return nil
}

func checkForeign(ctx context.Context, conn *pgx.Conn) error {
	for _, t := range tables {
		var exists bool
		var comment *string
		err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1), 'pg_class')`, t).Scan(&exists, &comment)
		if err != nil {
			return fmt.Errorf("demo: inspect %s: %w", t, err)
		}
		if exists && (comment == nil || *comment != Marker) {
			return fmt.Errorf("demo: the database already has a table %s that the demo did not create; point DPPROXY_UPSTREAM at an empty database", t)
		}
	}
	return nil
}

// Setup is what Install made.
type Setup struct {
	// Upstream and LedgerUpstream are the URLs the proxy connects with,
	// those of Roles, or both the URL given to Install when Shared.
	Upstream, LedgerUpstream string
	// Roles are the query and ledger roles Install created; nil when
	// Shared.
	Roles *Roles
	// Shared, when not "", says why the demo could not create two roles
	// and runs with one for queries and the ledger.
	Shared string
}

// Install loads the dataset like Load, creates a query role and a ledger
// role (CreateRoles) as a production set-up would have them, and returns
// them with a function that removes everything the demo created: its
// tables, its roles, and the ledger (schema dpproxy) unless it existed
// before. When the roles cannot be created (schema dpproxy exists, or the
// URL's role may not create roles), the demo uses url for both, which
// Setup.Shared explains.
func Install(ctx context.Context, url string) (setup *Setup, cleanup func(context.Context) error, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("demo: connect: %w", err)
	}
	var ledgerExisted bool
	err = conn.QueryRow(ctx, `SELECT to_regnamespace('dpproxy') IS NOT NULL`).Scan(&ledgerExisted)
	conn.Close(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("demo: inspect schema dpproxy: %w", err)
	}
	if err := Load(ctx, url); err != nil {
		return nil, nil, err
	}
	setup = &Setup{Upstream: url, LedgerUpstream: url}
	if ledgerExisted {
		setup.Shared = "schema dpproxy already exists, so the demo cannot give it to a ledger role of its own"
	} else if setup.Roles, err = CreateRoles(ctx, url, "dpproxy_demo_"+randomHex(4), tables); err != nil {
		setup.Shared = err.Error()
	} else {
		setup.Upstream, setup.LedgerUpstream = setup.Roles.QueryURL, setup.Roles.LedgerURL
	}
	return setup, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return fmt.Errorf("demo: connect: %w", err)
		}
		defer conn.Close(ctx)
		drop := "DROP TABLE IF EXISTS " + strings.Join(tables, ", ")
		if !ledgerExisted {
			drop += "; DROP SCHEMA IF EXISTS dpproxy CASCADE"
		}
		if _, err := conn.Exec(ctx, drop); err != nil {
			return fmt.Errorf("demo: drop: %w", err)
		}
		if setup.Roles != nil {
			return setup.Roles.Drop(ctx, url)
		}
		return nil
	}, nil
}

// Query is an example query of the tour, with what to look for.
type Query struct{ SQL, Note string }

// Queries are the tour's three example queries.
var Queries = []Query{
	{"SELECT region, count(*), sum(amount), avg(amount) FROM orders GROUP BY region;",
		"all four regions appear (their values are public); the numbers are noisy, and the NOTICE gives the charge and each column's 95% error, e.g. count: ±193 (95%)"},
	{"SELECT channel, count(*) FROM orders GROUP BY channel;",
		"'phone' is missing: one customer uses it, and partition selection hides keys held by too few people"},
	{"SELECT count(DISTINCT customer_id) FROM orders WHERE amount > 100;",
		"no GROUP BY, so each person touches one number and the error is small; run it again: the same answer, nothing charged"},
}

// More are further things to try, printed after the tour.
var More = []Query{
	{"SHOW dp.budget;", "what you have spent and what is left"},
	{"SET dp.epsilon = 0.5;", "less budget per query, more noise"},
	{"SET dp.notices = off;", "silences the NOTICE"},
	{"SELECT * FROM orders;", "refused: it would return individual rows"},
}

// Tour prints the example queries and the EXPLAIN DP of the first one,
// asked of the proxy at url (EXPLAIN DP runs nothing and charges nothing).
func Tour(ctx context.Context, w io.Writer, url string) {
	fmt.Fprintln(w, "A short tour: paste these into psql.")
	for i, q := range Queries {
		fmt.Fprintf(w, "\n %d. %s\n    Look for: %s\n", i+1, q.SQL, q.Note)
	}
	explain := "EXPLAIN DP " + strings.TrimSuffix(Queries[0].SQL, ";")
	fmt.Fprintf(w, "\nHow query 1 is answered (%s):\n\n", explain+";")
	lines, err := explainLines(ctx, url, explain)
	if err != nil {
		fmt.Fprintf(w, "    (could not ask the proxy: %v)\n", err)
	}
	for _, l := range lines {
		fmt.Fprintln(w, "    "+l)
	}
	fmt.Fprintln(w, "\nAlso try:")
	for _, q := range More {
		fmt.Fprintf(w, "    %-24s -- %s\n", q.SQL, q.Note)
	}
}

func explainLines(ctx context.Context, url, sql string) ([]string, error) {
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
