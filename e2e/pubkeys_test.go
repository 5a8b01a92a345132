package e2e

import (
	"context"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/internal/testconf"
)

// Issue 16, item 4: a GROUP BY key that is a column of a public table
// joined many-to-one to the private table releases every value of that
// column, a group without private rows with a noised zero, and costs no
// partition selection: the whole ε goes to the aggregates. The test's own
// public tables (testconf.PubKeys): pk_products, the demo's products with
// a product no one ordered, and pk_wide, more keys than
// rewrite.MaxPublicTableKeys, which falls back to partition selection.
func TestPublicTableKeysCostNoSelection(t *testing.T) {
	const pw = "pubkeys-pw"
	up := direct(t)
	if _, err := up.Exec(ctx, `DROP TABLE IF EXISTS pk_products, pk_wide, pk_regions;
		CREATE TABLE pk_regions (name text PRIMARY KEY);
		INSERT INTO pk_regions VALUES ('north'), ('south'), ('east'), ('west'), ('central');
		CREATE TABLE pk_products (product_id integer PRIMARY KEY, name text NOT NULL, category text NOT NULL);
		INSERT INTO pk_products SELECT product_id, name, category FROM products;
		INSERT INTO pk_products VALUES (1000, 'Rake 1000', 'garden');
		CREATE TABLE pk_wide (id integer PRIMARY KEY);
		INSERT INTO pk_wide SELECT i FROM generate_series(1, 10001) AS i`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Exec(context.Background(), "DROP TABLE IF EXISTS pk_products, pk_wide, pk_regions") })
	cfg := configFor(t, testconf.YAML(testconf.PubKeys), map[string]string{"PW": pw})
	_, addr, _ := startProxyWith(t, cfg)
	conn, err := dialAt(addr, "e2e_pubkeys", pw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	const byProduct = `SELECT p.product_id, count(*) FROM orders o JOIN pk_products p ON p.product_id = o.product_id GROUP BY p.product_id`
	lines := explainLines(t, conn, "EXPLAIN DP "+byProduct)
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		"Charge: ε=1 δ=0 (of the session's ε=1 δ=0.0000001; ε split in 1 equal share(s): 1 aggregate(s))",
		"Column product_id: group key from public table public.pk_products: all 51 of its values are released",
		"Column count (count): laplace, sensitivity L0=4 L∞=8, ε=1 δ=0,",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("EXPLAIN DP lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Partition selection") {
		t.Errorf("EXPLAIN DP shows a partition selection for keys from a public table:\n%s", text)
	}

	// Every product, the one without orders too, for exactly ε = 1 and δ = 0.
	before := showBudget(t, conn)
	counts := productCounts(t, conn, byProduct)
	after := showBudget(t, conn)
	if len(counts) != 51 {
		t.Errorf("%d products released, want the 51 of pk_products", len(counts))
	}
	for id := 1; id <= 50; id++ {
		if _, ok := counts[id]; !ok {
			t.Errorf("product %d not released", id)
		}
	}
	c, ok := counts[1000]
	if !ok {
		t.Errorf("product 1000, which no one ordered, not released")
	}
	// Laplace noise of scale 32 (L0·R/ε) exceeds 500 with probability e^-15.6.
	if math.Abs(float64(c)) > 500 {
		t.Errorf("product 1000 has count %d, want a noised 0", c)
	}
	if d := after.epsSpent - before.epsSpent; math.Abs(d-1) > 1e-9 {
		t.Errorf("charged ε = %v, want the session's 1", d)
	}
	if d := after.deltaSpent - before.deltaSpent; d != 0 {
		t.Errorf("charged δ = %v, want 0: no partition selection", d)
	}

	// The key set is read for every fresh question: a product added to
	// the public table is a key of the next one.
	if _, err := up.Exec(ctx, `INSERT INTO pk_products VALUES (1001, 'Hoe 1001', 'garden')`); err != nil {
		t.Fatal(err)
	}
	if counts := productCounts(t, conn, byProduct); len(counts) != 52 {
		t.Errorf("%d products released after one was added, want 52", len(counts))
	} else if _, ok := counts[1001]; !ok {
		t.Errorf("the added product 1001 not released")
	}

	// Keys only: every category, "garden" too, and nothing charged.
	before = showBudget(t, conn)
	rows, err := conn.Query(ctx, `SELECT DISTINCT p.category FROM orders o JOIN pk_products p ON p.product_id = o.product_id`)
	if err != nil {
		t.Fatal(err)
	}
	cats, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(cats)
	if got := strings.Join(cats, ","); got != "audio,garden,home,kitchen,office,travel" {
		t.Errorf("categories = %s, want all six of pk_products", got)
	}
	if after = showBudget(t, conn); after.epsSpent != before.epsSpent {
		t.Errorf("the public categories cost ε %v", after.epsSpent-before.epsSpent)
	}

	// The same through the extended protocol, and as a UNION ALL branch.
	ext, err := conn.Query(ctx, byProduct+" HAVING count(*) > -1000000", pgx.QueryExecModeExec)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ext.Next() {
		n++
	}
	if ext.Close(); ext.Err() != nil || n != 52 {
		t.Errorf("extended protocol: %d products, %v; want 52", n, ext.Err())
	}
	const union = `SELECT p.category, count(*) FROM orders o JOIN pk_products p ON p.product_id = o.product_id GROUP BY p.category
		UNION ALL SELECT p.name, count(*) FROM orders o JOIN pk_products p ON p.product_id = o.product_id WHERE o.amount > 100 GROUP BY p.name`
	if got := regions(t, conn, union); strings.Count(got, ",") != 6+52-1 || !strings.Contains(got, ",garden,") || !strings.Contains(got, ",Rake 1000,") || !strings.Contains(got, ",Hoe 1001,") {
		t.Errorf("UNION ALL of public keys = %s, want the 6 categories and 52 names", got)
	}

	// public_values naming pk_regions.name: its five values, read at
	// start, exactly as the literal list would be: "central" has no
	// orders and appears; no selection.
	const byRegion = `SELECT region, count(*) FROM orders GROUP BY region`
	if got := regions(t, conn, byRegion); got != "central,east,north,south,west" {
		t.Errorf("regions = %s, want the five of pk_regions", got)
	}
	if text := strings.Join(explainLines(t, conn, "EXPLAIN DP "+byRegion), "\n"); !strings.Contains(text, "Column region: group key with public values: all 5 are released") ||
		strings.Contains(text, "Partition selection") {
		t.Errorf("EXPLAIN DP of the regions:\n%s", text)
	}
	// A value added to pk_regions is a key from the next start on.
	if _, err := up.Exec(ctx, `INSERT INTO pk_regions VALUES ('islands')`); err != nil {
		t.Fatal(err)
	}
	if got := regions(t, conn, "SELECT region, count(*) FROM orders WHERE amount >= 0 GROUP BY region"); got != "central,east,north,south,west" {
		t.Errorf("regions before a restart = %s, want the five read at start", got)
	}
	_, addr2, _ := startProxyWith(t, cfg)
	conn2, err := dialAt(addr2, "e2e_pubkeys", pw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	if got := regions(t, conn2, byRegion); got != "central,east,islands,north,south,west" {
		t.Errorf("regions after a restart = %s, want the six of pk_regions", got)
	}

	// More keys than MaxPublicTableKeys: partition selection, as before.
	wide := explainLines(t, conn, "EXPLAIN DP SELECT w.id, count(*) FROM orders o JOIN pk_wide w ON w.id = o.product_id GROUP BY w.id")
	if text := strings.Join(wide, "\n"); !strings.Contains(text, "Partition selection") {
		t.Errorf("a public key column of 10001 values is not selected:\n%s", text)
	}
}

// productCounts runs a GROUP BY product query: count by product id.
func productCounts(t *testing.T, conn *pgx.Conn, sql string) map[int]int64 {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	out := map[int]int64{}
	for rows.Next() {
		var id int
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// regions runs a GROUP BY region query: the released regions, sorted.
func regions(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		var n int64
		if err := rows.Scan(&r, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
