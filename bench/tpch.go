package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/internal/testconf"
)

// The accuracy table's dataset: a small TPC-H-like schema generated here,
// deterministically (setseed, one backend, no parallel workers), in a
// database of its own on the bench's PostgreSQL. The privacy unit is the
// customer; lineitem carries its order's customer (l_custkey) so that
// every private table names its unit.
//
//   - customer: tpchCustomers rows, a nation each (25 nations, skewed
//     towards the first ones), private (one row per unit).
//   - nation: the 25 nations, public.
//   - orders: 1 + ⌊40·u⁴⌋ orders per customer (most have 1 to 5, a few
//     up to 40: the skew that contribution bounding cuts), dates over
//     1992-01 to 1998-07 with more orders in later years, a total price.
//   - lineitem: 1 to 7 lines per order, TPC-H's columns with TPC-H's
//     ranges: quantity 1–50, extended price = quantity × a part price of
//     900–2,100, discount 0–0.10, return flag and line status from the
//     ship date as in TPC-H.
const tpchCustomers = 20000

var tpchLoad = []string{
	`SET max_parallel_workers_per_gather = 0`,
	`SELECT setseed(0.42)`,
	`DROP TABLE IF EXISTS lineitem, orders, customer, nation`,
	`CREATE TABLE nation (n_nationkey int PRIMARY KEY, n_name text NOT NULL UNIQUE)`,
	`INSERT INTO nation SELECT i, 'NATION_' || lpad(i::text, 2, '0') FROM generate_series(0, 24) AS i`,
	fmt.Sprintf(`CREATE TABLE customer AS
	   SELECT i AS c_custkey,
	          least(24, floor(25 * random() * random()))::int AS c_nationkey,
	          round((random() * 11000 - 1000)::numeric, 2) AS c_acctbal
	     FROM generate_series(1, %d) AS i`, tpchCustomers),
	`ALTER TABLE customer ADD PRIMARY KEY (c_custkey)`,
	`CREATE TABLE orders AS
	   SELECT row_number() OVER (ORDER BY c_custkey, k)::int AS o_orderkey,
	          c_custkey AS o_custkey,
	          (date '1992-01-01' + floor(2400 * sqrt(random()))::int) AS o_orderdate,
	          0::numeric AS o_totalprice
	     FROM customer, LATERAL generate_series(1, 1 + floor(40 * power(random(), 4))::int + 0 * c_custkey) AS k`,
	`CREATE TABLE lineitem AS
	   SELECT o_orderkey AS l_orderkey, o_custkey AS l_custkey, n AS l_linenumber, q AS l_quantity,
	          round((q * (900 + random() * 1200))::numeric, 2) AS l_extendedprice,
	          round((floor(random() * 11) / 100)::numeric, 2) AS l_discount,
	          sd AS l_shipdate,
	          CASE WHEN sd > date '1995-06-17' THEN 'N' WHEN random() < 0.5 THEN 'R' ELSE 'A' END AS l_returnflag,
	          CASE WHEN sd > date '1995-06-17' THEN 'O' ELSE 'F' END AS l_linestatus
	     FROM orders,
	          LATERAL generate_series(1, 1 + floor(7 * random())::int + 0 * o_orderkey) AS n,
	          LATERAL (SELECT 1 + floor(50 * random())::int + 0 * n AS q, o_orderdate + 1 + floor(120 * random())::int + 0 * n AS sd) AS r`,
	`UPDATE orders SET o_totalprice = t.total FROM (SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS total FROM lineitem GROUP BY l_orderkey) t WHERE t.l_orderkey = o_orderkey`,
	`VACUUM ANALYZE nation, customer, orders, lineitem`,
}

// tpchEnv is the accuracy table's database and the proxy serving it.
type tpchEnv struct {
	dbURL    string // superuser, database tpch
	proxy    *exec.Cmd
	port     int
	analysts int // bench0 … bench{analysts-1}: one per run
	summary  string
}

// proxyURL is the URL of analyst i through the accuracy table's proxy.
func (t *tpchEnv) proxyURL(i int) string {
	return fmt.Sprintf("postgres://bench%d@127.0.0.1:%d/tpch?sslmode=disable", i, t.port)
}

func (t *tpchEnv) close() {
	if c := t.proxy; c != nil && c.Process != nil {
		c.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
		}
	}
}

// setupTPCH creates and loads database tpch and starts a dpproxy on it
// with testconf.BenchTPCH and analysts analysts.
func setupTPCH(ctx context.Context, e *benchEnv, analysts int) (*tpchEnv, error) {
	t := &tpchEnv{analysts: analysts}
	var err error
	if t.dbURL, err = e.pg.CreateDatabase(ctx, "tpch"); err != nil {
		return nil, err
	}
	began := time.Now()
	conn, err := pgx.Connect(ctx, t.dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	for _, q := range tpchLoad {
		if _, err := conn.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("tpch load: %s: %w", strings.Fields(q)[0], err)
		}
	}
	var orders, lines, maxOrders, maxLines int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM lineitem),
		(SELECT max(n) FROM (SELECT count(*) n FROM orders GROUP BY o_custkey) a),
		(SELECT max(n) FROM (SELECT count(*) n FROM lineitem GROUP BY l_custkey) b)`).Scan(&orders, &lines, &maxOrders, &maxLines); err != nil {
		return nil, err
	}
	t.summary = fmt.Sprintf("TPC-H-like data (bench/tpch.go): %d customers (the privacy unit), %d orders (up to %d per customer), %d line items (up to %d per customer), 25 public nations; loaded in %v",
		tpchCustomers, orders, maxOrders, lines, maxLines, time.Since(began).Round(time.Second))
	log.Print(t.summary)

	if t.port, err = freePort(); err != nil {
		return nil, err
	}
	users := make([]string, analysts)
	for i := range users {
		users[i] = fmt.Sprintf("{name: bench%d, budget: {epsilon: 1.0e12, delta: 0.5}}", i)
	}
	cfg := testconf.Get(testconf.BenchTPCH).
		SetString(fmt.Sprintf("127.0.0.1:%d", t.port), "listen").
		SetString(t.dbURL, "upstream").
		Set("["+strings.Join(users, ", ")+"]", "auth", "users")
	cfgPath := filepath.Join(e.dir, "tpch.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(e.dir, "tpch.log"))
	if err != nil {
		return nil, err
	}
	t.proxy = exec.Command(e.proxyBin, "serve", "-config", cfgPath)
	t.proxy.Stdout, t.proxy.Stderr = logf, logf
	t.proxy.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := t.proxy.Start(); err != nil {
		return nil, err
	}
	if err := waitConnect(ctx, t.proxyURL(0)); err != nil {
		t.close()
		out, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return t, nil
}
