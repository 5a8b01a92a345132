// Package demo holds the sample online-shop dataset and the configuration
// that `dpproxy demo` runs on, and that the e2e tests reuse.
package demo

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

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

// Config is the demo's configuration, with UPSTREAM to be replaced by the
// database URL. It uses trust authentication: for a local demo only.
//
//go:embed dpproxy.yaml
var Config string

// ConfigFor returns the demo configuration pointing at upstream.
func ConfigFor(upstream string) []byte {
	return []byte(strings.Replace(Config, "UPSTREAM", upstream, 1))
}

// Load creates the dataset in the database at url (dropping the demo
// tables first if they exist).
func Load(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("demo: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("demo: load dataset: %w", err)
	}
	return nil
}

// Queries are the example queries the demo prints, with what to look for.
var Queries = []struct{ SQL, Note string }{
	{"SELECT region, count(*), sum(amount), avg(amount) FROM orders GROUP BY region;",
		"every public region appears; the values are noisy, and a NOTICE gives the charge and the 95% error bounds"},
	{"SELECT channel, count(*) FROM orders GROUP BY channel;",
		"'phone' is used by one customer only: partition selection suppresses it"},
	{"SELECT count(DISTINCT customer_id) FROM orders WHERE amount > 100;",
		"one number for the whole table: no GROUP BY, so each person touches one group"},
	{"EXPLAIN DP SELECT region, sum(amount) FROM orders GROUP BY region;",
		"the rewritten SQL, each column's sensitivity and noise, and the charge, without running or charging"},
	{"SHOW dp.budget;", "what you have spent and what is left"},
	{"SELECT * FROM orders;", "refused: it would return individual rows"},
}
