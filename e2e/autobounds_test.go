package e2e

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// Issue 16, item 2: a column declared bounds: auto gets its clamping
// bounds at query time from a fifth of the query's ε (testconf.AutoBounds:
// privacy.auto_bounds_share 0.2), ApproxBounds-style; the rest answers
// the query with them, all in one charge of the query's ε. The test's own
// table ab_spend: 4,000 users with 5 rows each (R = 5), amounts spread
// over [0, 1000], and one user with an amount of 10^9 in one row; score,
// a float8 in [−30, 70], also NaN, ±Infinity and NULL in a few rows.
func TestAutoBounds(t *testing.T) {
	const pw = "autobounds-pw"
	up := direct(t)
	if _, err := up.Exec(ctx, `DROP TABLE IF EXISTS ab_spend;
		CREATE TABLE ab_spend (user_id integer NOT NULL, kind text NOT NULL, amount numeric(14,2), score float8);
		INSERT INTO ab_spend
		  SELECT u, CASE WHEN r % 2 = 0 THEN 'a' ELSE 'b' END, ((u * 7 + r * 131) % 1001)::numeric
		  FROM generate_series(1, 4000) AS u, generate_series(1, 5) AS r;
		UPDATE ab_spend SET score = amount / 10 - 30;
		UPDATE ab_spend SET score = 'NaN' WHERE user_id = 5;
		UPDATE ab_spend SET score = 'Infinity' WHERE user_id = 6;
		UPDATE ab_spend SET score = '-Infinity' WHERE user_id = 7;
		UPDATE ab_spend SET score = NULL WHERE user_id = 8;
		UPDATE ab_spend SET amount = 1000000000 WHERE user_id = 17 AND kind = 'a' AND amount = (SELECT max(amount) FROM ab_spend WHERE user_id = 17 AND kind = 'a')`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Exec(context.Background(), "DROP TABLE IF EXISTS ab_spend") })
	var truth, truthAvgA float64
	// The truth with the bounds the test expects, [0, 1024]: every user
	// has 5 rows, so row bounding drops nothing.
	if err := up.QueryRow(ctx, `SELECT sum(least(amount, 1024))::float8,
		(SELECT avg(least(amount, 1024))::float8 FROM ab_spend WHERE kind = 'a') FROM ab_spend`).Scan(&truth, &truthAvgA); err != nil {
		t.Fatal(err)
	}

	cfg := configFor(t, testconf.YAML(testconf.AutoBounds), map[string]string{"PW": pw})
	_, addr, _ := startProxyWith(t, cfg)
	cc, err := pgx.ParseConfig("postgres://e2e_autobounds:" + pw + "@" + addr + "/shop?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	var mu sync.Mutex
	var notices []*pgconn.Notice
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lastNotice := func() *pgconn.Notice {
		mu.Lock()
		defer mu.Unlock()
		if len(notices) == 0 {
			t.Fatal("no NOTICE")
		}
		return notices[len(notices)-1]
	}

	// EXPLAIN DP shows both parts and charges nothing.
	before := showBudget(t, conn)
	text := strings.Join(explainOf(t, conn, "EXPLAIN DP SELECT sum(amount) FROM ab_spend"), "\n")
	for _, want := range []string{
		"Charge in total: ε=1 δ=0 (the session's), made once before either part runs: ε=0.2 for the bounds of amount, chosen at query time, then ε=0.8 δ=0 for the answer below",
		"Column amount: bounds: auto, chosen at query time: ε=0.2 (auto_bounds_share)",
		"Laplace, L1 sensitivity L0·R = 5, scale 25",
		"Bounds query for amount",
		"FROM generate_series(-64, 64) AS dp_buckets(dp_b)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("EXPLAIN DP lacks %q:\n%s", want, text)
		}
	}
	if b := showBudget(t, conn); b.epsSpent != before.epsSpent {
		t.Errorf("EXPLAIN DP charged ε=%v", b.epsSpent-before.epsSpent)
	}

	// SUM: the bounds cover the data, [0, 1024], not the outlier (one
	// user's 5 rows are far below the threshold, about 620) nor ±2^63;
	// the answer is within 20 noise scales (R·1024/0.8 = 6,400) of the
	// truth clamped to them, and the ledger is charged ε = 1 once.
	before = showBudget(t, conn)
	var got float64
	if err := conn.QueryRow(ctx, "SELECT sum(amount) FROM ab_spend").Scan(&got); err != nil {
		t.Fatal(err)
	}
	after := showBudget(t, conn)
	if d := after.epsSpent - before.epsSpent; math.Abs(d-1) > 1e-9 {
		t.Errorf("charged ε=%v, want the query's ε=1", d)
	}
	n := lastNotice()
	if want := "bounds of amount chosen at query time (ε=0.2): [0, 1024]"; !strings.Contains(n.Detail, want) {
		t.Errorf("NOTICE DETAIL %q lacks %q", n.Detail, want)
	}
	t.Logf("sum = %v, truth with bounds [0, 1024] %v; NOTICE %q DETAIL %q", got, truth, n.Message, n.Detail)
	if math.Abs(got-truth) > 20*6400 {
		t.Errorf("sum = %v, truth with bounds [0, 1024] %v", got, truth)
	}
	// The ledger: one charge of ε = 1 for the query, its releases the
	// bounds part (one Laplace release of L1 sensitivity L0·R = 5, scale
	// 25, ε = 0.2) and the sum (ε = 0.8, sensitivity R·1024 with the
	// widest bounds' ratio to its scale).
	var chargeID int64
	var chargeEps float64
	if err := up.QueryRow(ctx, `SELECT id, epsilon::float8 FROM dpproxy.charges WHERE analyst = 'e2e_autobounds' AND action = 'charge' ORDER BY id DESC LIMIT 1`).Scan(&chargeID, &chargeEps); err != nil {
		t.Fatal(err)
	}
	if math.Abs(chargeEps-1) > 1e-12 {
		t.Errorf("ledger charge ε=%v, want 1", chargeEps)
	}
	rrows, err := up.Query(ctx, `SELECT mechanism, l0, sensitivity, scale, epsilon FROM dpproxy.releases WHERE charge_id = $1 ORDER BY ordinal`, chargeID)
	if err != nil {
		t.Fatal(err)
	}
	type rel struct {
		Mech           string
		L0             int64
		Sens, Scale, E float64
	}
	rels, err := pgx.CollectRows(rrows, pgx.RowToStructByPos[rel])
	if err != nil {
		t.Fatal(err)
	}
	if len(rels) != 2 || rels[1] != (rel{"laplace", 1, 5, 25, 0.2}) || rels[0].Mech != "laplace" || math.Abs(rels[0].E-0.8) > 1e-12 ||
		math.Abs(rels[0].Sens/rels[0].Scale-0.8) > 1e-9 {
		t.Errorf("releases of the charge: %+v", rels)
	}

	// The same question again: the stored answer, free.
	var again float64
	if err := conn.QueryRow(ctx, "SELECT sum(amount) FROM ab_spend").Scan(&again); err != nil {
		t.Fatal(err)
	}
	if b := showBudget(t, conn); again != got || b.epsSpent != after.epsSpent {
		t.Errorf("repeat: %v (first %v), charged ε=%v", again, got, b.epsSpent-after.epsSpent)
	}

	// GROUP BY with AVG and SUM: one set of bounds from all groups' rows.
	rows, err := conn.Query(ctx, "SELECT kind, avg(amount), sum(amount) FROM ab_spend GROUP BY kind ORDER BY kind")
	if err != nil {
		t.Fatal(err)
	}
	type kindRow struct {
		Kind     string
		Avg, Sum float64
	}
	got2, err := pgx.CollectRows(rows, pgx.RowToStructByPos[kindRow])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GROUP BY kind = %+v, a's true average %v", got2, truthAvgA)
	if len(got2) != 2 || got2[0].Kind != "a" || math.Abs(got2[0].Avg-truthAvgA) > 50 {
		t.Errorf("GROUP BY kind = %+v, want a's average near %v", got2, truthAvgA)
	}
	if want := "bounds of amount chosen at query time (ε=0.2): [0, 1024]"; !strings.Contains(lastNotice().Detail, want) {
		t.Errorf("NOTICE DETAIL %q lacks %q", lastNotice().Detail, want)
	}

	// The extended protocol, a parameter in the condition: the histogram
	// query takes the main query's parameters.
	var gotA float64
	if err := conn.QueryRow(ctx, "SELECT sum(amount) FROM ab_spend WHERE kind = $1", pgx.QueryExecModeDescribeExec, "a").Scan(&gotA); err != nil {
		t.Fatal(err)
	}
	if want := "bounds of amount chosen at query time (ε=0.2): [0, 1024]"; !strings.Contains(lastNotice().Detail, want) {
		t.Errorf("extended protocol: NOTICE DETAIL %q lacks %q", lastNotice().Detail, want)
	}

	// Negative values, NaN, ±Infinity and NULL: the histogram query runs
	// (its expressions are total), the few special rows pass no
	// threshold, and the bounds cover [−30, 70]: [−32, 128], bought with
	// the column's own share of ε, 0.3.
	var gotScore float64
	if err := conn.QueryRow(ctx, "SELECT avg(score) FROM ab_spend").Scan(&gotScore); err != nil {
		t.Fatal(err)
	}
	if want := "bounds of score chosen at query time (ε=0.3): [-32, 128]"; !strings.Contains(lastNotice().Detail, want) {
		t.Errorf("score: NOTICE DETAIL %q lacks %q", lastNotice().Detail, want)
	}
	t.Logf("avg(score) = %v; NOTICE %q", gotScore, lastNotice().Message)

	// Arithmetic over an auto column is refused before any charge.
	before = showBudget(t, conn)
	_, err = conn.Exec(ctx, "SELECT sum(amount * 2) FROM ab_spend")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != string(pgerr.FeatureNotSupported) || !strings.Contains(pgErr.Message, "bounds: auto") {
		t.Errorf("sum(amount * 2): %v, want 0A000 about bounds: auto", err)
	}
	if b := showBudget(t, conn); b.epsSpent != before.epsSpent {
		t.Errorf("a refusal charged ε=%v", b.epsSpent-before.epsSpent)
	}
}
