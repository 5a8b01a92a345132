package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// shardColumns are orders' columns, as the shards hold them.
// shardColumns are public.orders' columns with its NOT NULL constraints
// (internal/demo/schema.sql): the proxy reads them (AVG is derived from
// SUM and COUNT(*) only over a NOT NULL column), so both tables must say
// the same for their answers to be compared.
const shardColumns = "order_id bigint NOT NULL, customer_id integer NOT NULL, product_id integer NOT NULL, region text NOT NULL, channel text NOT NULL, quantity integer NOT NULL, amount numeric(10,2) NOT NULL, ordered_at timestamptz NOT NULL"

// TestShardedTable answers private queries over sharded_orders, a table
// partitioned by hash of the privacy unit whose two partitions are
// postgres_fdw foreign tables on two other PostgreSQL servers, holding
// orders' rows: with exact releases (no noise, every group), its answers
// equal orders'. The per-unit pre-aggregation runs on the shards: each
// shard's log shows the GROUP BY of the unit that postgres_fdw sent it,
// and EXPLAIN (VERBOSE) of the rewritten SQL shows Foreign Scans of
// aggregates.
func TestShardedTable(t *testing.T) {
	shards := []*pgtest.Server{
		pgtest.StartTB(t, pgtest.Options{ExtraConfig: []string{"log_statement=all"}}),
		pgtest.StartTB(t, pgtest.Options{ExtraConfig: []string{"log_statement=all"}}),
	}
	admin, err := pgx.Connect(ctx, env.upstream)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	setup := []string{
		"CREATE EXTENSION IF NOT EXISTS postgres_fdw",
		"CREATE TABLE sharded_orders (" + shardColumns + ") PARTITION BY HASH (customer_id)",
	}
	for i, s := range shards {
		c, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(ctx, "CREATE TABLE orders_shard ("+shardColumns+")")
		c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		srv := fmt.Sprintf("dp_shard_%d", i)
		setup = append(setup,
			fmt.Sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '%d', dbname 'postgres', use_remote_estimate 'true', fdw_tuple_cost '0.2')", srv, s.Port),
			// password_required: the query role reaches the shard as its
			// trust-authenticated superuser (a test set-up only).
			fmt.Sprintf("CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (user 'postgres', password_required 'false')", srv),
			fmt.Sprintf("CREATE FOREIGN TABLE sharded_orders_%d PARTITION OF sharded_orders FOR VALUES WITH (MODULUS 2, REMAINDER %d) SERVER %s OPTIONS (table_name 'orders_shard')", i, i, srv),
		)
	}
	setup = append(setup,
		"INSERT INTO sharded_orders SELECT order_id, customer_id, product_id, region, channel, quantity, amount, ordered_at FROM orders",
		"ANALYZE sharded_orders",
	)
	for _, q := range setup {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(ctx, env.upstream)
		if err != nil {
			return
		}
		defer admin.Close(ctx)
		admin.Exec(ctx, "DROP TABLE sharded_orders; DROP SERVER dp_shard_0, dp_shard_1 CASCADE")
	})
	// use_remote_estimate plans with the shards' own statistics.
	for _, s := range shards {
		c, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(ctx, "ANALYZE orders_shard")
		c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	var local, sharded, onShards int64
	if err := admin.QueryRow(ctx, "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM sharded_orders), (SELECT count(*) FROM ONLY sharded_orders_0) + (SELECT count(*) FROM ONLY sharded_orders_1)").Scan(&local, &sharded, &onShards); err != nil {
		t.Fatal(err)
	}
	if local == 0 || sharded != local || onShards != local {
		t.Fatalf("rows: orders %d, sharded_orders %d, on the shards %d", local, sharded, onShards)
	}

	cfg := shardConfig(t)
	_, addr := startExactProxy(t, cfg)
	conn, err := dialAt(addr, "shard_analyst", "shard-secret")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"SELECT count(*) FROM %s",
		"SELECT region, count(*), sum(amount), avg(amount) FROM %s GROUP BY region ORDER BY region",
		"SELECT channel, sum(quantity) FROM %s WHERE amount > 20 GROUP BY channel ORDER BY channel",
		"SELECT count(DISTINCT customer_id) FROM %s",
	} {
		want := answerText(t, conn, fmt.Sprintf(q, "orders"))
		got := answerText(t, conn, fmt.Sprintf(q, "sharded_orders"))
		if got != want {
			t.Errorf("%s:\nsharded %s\nlocal   %s", q, got, want)
		}
	}

	// The shards ran per-unit GROUP BYs of the private queries
	// (postgres_fdw deparses GROUP BY by position).
	for i, s := range shards {
		log, err := os.ReadFile(s.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "FROM public.orders_shard GROUP BY 1") {
			t.Errorf("shard %d never ran a per-unit GROUP BY: the pre-aggregation was not pushed down:\n%s", i, s.LogTail())
		}
	}

	// The plans of the rewritten SQL, as the proxy runs it: the per-unit
	// aggregates of COUNT, SUM and AVG (whose clamp is a CASE that
	// postgres_fdw ships, rewrite/histogram.go's clampSQL) and of a
	// percentile's histogram run on both shards.
	for _, c := range []struct {
		q     string
		perQ  int // per-unit aggregates: one per arm of the rewritten SQL
		inSQL string
	}{
		{"SELECT count(*) FROM sharded_orders", 1, ""},
		{"SELECT region, count(*) FROM sharded_orders GROUP BY region", 1, ""},
		{"SELECT region, sum(amount) FROM sharded_orders GROUP BY region", 1, "CASE WHEN"},
		{"SELECT sum(quantity), avg(amount) FROM sharded_orders", 1, "CASE WHEN"},
		{"SELECT region, percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM sharded_orders GROUP BY region", 2, "width_bucket"},
	} {
		plan := rewrittenPlan(t, admin, conn, c.q)
		if strings.Count(plan, "Relations: Aggregate on") != 2*c.perQ || strings.Count(plan, "FROM public.orders_shard") != 2*c.perQ || !strings.Contains(plan, "GROUP BY 1") {
			t.Errorf("%s: per-unit aggregate not pushed to both shards:\n%s", c.q, plan)
		}
		// The clamp (or bucket) is in the SQL the shards run.
		if !strings.Contains(remoteSQL(plan), c.inSQL) {
			t.Errorf("%s: the shards' SQL lacks %q:\n%s", c.q, c.inSQL, plan)
		}
	}
}

// remoteSQL is the Remote SQL lines of an EXPLAIN (VERBOSE) of foreign
// scans.
func remoteSQL(plan string) string {
	var b strings.Builder
	for _, l := range strings.Split(plan, "\n") {
		if strings.Contains(l, "Remote SQL:") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// shardConfig is the semantic configuration with sharded_orders
// configured as orders is, for analyst shard_analyst.
func shardConfig(t *testing.T) *conf.Config {
	t.Helper()
	c := testconf.Get(testconf.Semantic).
		Set(`[{name: shard_analyst, password_env: PW, budget: {epsilon: 1.0e+9, delta: 0.5}}]`, "auth", "users").
		Copy([]string{"tables", "public.orders"}, []string{"tables", "public.sharded_orders"})
	return configFor(t, c.String(), map[string]string{"PW": "shard-secret"})
}

// answerText runs q and renders its rows.
func answerText(t *testing.T, c *pgx.Conn, q string) string {
	t.Helper()
	rows, err := c.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals...)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return b.String()
}

// rewrittenPlan takes the rewritten SQL of q from EXPLAIN DP and returns
// PostgreSQL's EXPLAIN (VERBOSE) of it, run by the query role with the
// settings of a private query's transaction (enterPrivate).
func rewrittenPlan(t *testing.T, admin, proxyConn *pgx.Conn, q string) string {
	t.Helper()
	out := answerText(t, proxyConn, "EXPLAIN DP "+q)
	i := strings.Index(out, "SELECT")
	if i < 0 {
		t.Fatalf("no SQL in EXPLAIN DP:\n%s", out)
	}
	sql := strings.ReplaceAll(out[i:], "$1::bigint", "42::bigint")
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{env.roles.QueryRole}.Sanitize()+"; "+privateSettings); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN (VERBOSE) "+sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("EXPLAIN of\n%s\n: %v", sql, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// privateSettings are what enterPrivate sets for a private query's
// transaction that matters to its plan (proxy/upstream.go).
const privateSettings = "SET LOCAL work_mem = '64MB'; SET LOCAL enable_partitionwise_aggregate = on"
