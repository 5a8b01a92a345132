package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// Timing (docs/threat-model.md, "Timing"): a private query's running time
// must not tell whether one person is in the data. Joins that let one
// person's rows multiply the work are refused; what remains is hidden by
// releasing every private response at the end of a time slot
// (privacy.response_quantum) and cutting queries off at
// privacy.max_query_time. The tests assert only what cannot flake on a
// loaded machine (refusals, lower bounds of response times, the opaque
// error, the charge); TestTimingSideChannel measures and logs the ratios.

// fanoutAttacks are the shapes of the attack: copies of a public table
// joined so that only the selected person's rows are multiplied.
var fanoutAttacks = []string{
	`SELECT count(*) FROM orders o JOIN products c1 ON o.customer_id = 42 JOIN products c2 ON true JOIN products c3 ON true JOIN products c4 ON true JOIN products c5 ON true`,
	`SELECT count(*) FROM orders o JOIN products c1 ON o.customer_id = 42 AND o.region LIKE 'nor%' JOIN products c2 ON true JOIN products c3 ON true`,
	`SELECT count(*) FROM orders o CROSS JOIN products c1 CROSS JOIN products c2 WHERE o.customer_id = 42`,
	`SELECT count(*) FROM orders o, products c1, products c2 WHERE o.customer_id = 42`,
	`SELECT count(*) FROM orders o JOIN products c1 ON c1.category = o.region JOIN products c2 ON c2.category = c1.category`,
	`SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id JOIN products c ON c.price > p.price`,
	`SELECT count(*) FROM orders o LEFT JOIN products c1 ON o.customer_id = 42 LEFT JOIN products c2 ON true`,
	`SELECT region, count(*) FROM orders o JOIN products c1 ON c1.product_id >= o.product_id GROUP BY region`,
	`WITH c AS (SELECT * FROM products) SELECT count(*) FROM orders o JOIN c ON true WHERE o.customer_id = 42`,
	`WITH c AS (SELECT p.product_id FROM products p, products q) SELECT count(*) FROM orders o JOIN c ON c.product_id = o.product_id`,
	`SELECT count(*) FROM (SELECT o.amount FROM orders o JOIN products c1 ON true JOIN products c2 ON true WHERE o.customer_id = 42) t`,
}

// TestTimingJoinsRefused: the fan-out shapes are refused before anything
// runs (0A000, nothing charged, the connection still answers), in both
// protocols; joins on a unique key (many-to-one) are answered.
func TestTimingJoinsRefused(t *testing.T) {
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
			for _, sql := range fanoutAttacks {
				runAttackAs(t, conn, sql, "0A000")
			}
			for _, sql := range []string{
				`SELECT count(*) FROM orders o JOIN products p1 ON p1.product_id = o.product_id JOIN products p2 ON p2.product_id = o.product_id JOIN products p3 ON p3.product_id = o.product_id`,
				`SELECT p.category, count(*) FROM orders o JOIN products p USING (product_id) GROUP BY p.category`,
				`WITH c AS (SELECT p.product_id AS pid, p.category FROM products p) SELECT count(*) FROM orders o LEFT JOIN c ON c.pid = o.product_id`,
			} {
				if _, err := countRows(conn, sql); err != nil {
					t.Errorf("%s: %v, want an answer (a join on a unique key)", sql, err)
				}
			}
		})
	}
}

// timingTable is a private table large enough that a query over all of
// it takes seconds: persons 1000.. with 20 rows each, person 42 with
// timingBigPerson rows, person 7 with 5; person 99 has none.
const (
	timingRows      = 2_000_000
	timingBigPerson = 5_000
)

var timingOnce struct {
	sync.Once
	err error
}

func timingData(t *testing.T) {
	t.Helper()
	timingOnce.Do(func() {
		conn, err := pgx.Connect(ctx, env.upstream)
		if err != nil {
			timingOnce.err = err
			return
		}
		defer conn.Close(ctx)
		_, timingOnce.err = conn.Exec(ctx, fmt.Sprintf(`
			CREATE TABLE public.timing_events (person_id integer NOT NULL, kind text NOT NULL, v integer NOT NULL);
			INSERT INTO public.timing_events
			  SELECT 1000 + i %% (%[1]d / 20), (ARRAY['E11.9 type 2 diabetes', 'I10 hypertension', 'K21.0 reflux', 'M54.5 back pain'])[1 + i %% 4], i %% 100
			  FROM generate_series(1, %[1]d) AS i;
			INSERT INTO public.timing_events SELECT 42, 'J45.0 asthma', i %% 100 FROM generate_series(1, %[2]d) AS i;
			INSERT INTO public.timing_events SELECT 7, 'J45.0 asthma', i FROM generate_series(1, 5) AS i;
			ANALYZE public.timing_events`, timingRows, timingBigPerson))
	})
	if timingOnce.err != nil {
		t.Fatalf("creating public.timing_events: %v", timingOnce.err)
	}
}

// timingConfig is timingProxy's configuration (testconf.Timing): analyst
// user with a large budget, user_poor with almost none, and privacy lines
// (indented two spaces) added to the privacy section.
func timingConfig(user, privacy string) string {
	return testconf.Get(testconf.Timing).SetString(user, "auth", "users", "0", "name").
		SetString(user+"_poor", "auth", "users", "1", "name").Merge(privacy, "privacy").String()
}

// timingProxy starts a proxy whose analyst user has a large budget, with
// privacy lines (indented two spaces) added to its privacy section.
func timingProxy(t *testing.T, user, privacy string) string {
	t.Helper()
	timingData(t)
	cfg := configFor(t, timingConfig(user, privacy), map[string]string{"PW": "timing-secret"})
	_, addr, _ := startProxyWith(t, cfg)
	return addr
}

// timed runs sql and returns how long it took, its rows and its error.
func timed(conn *pgx.Conn, sql string, args ...any) (time.Duration, int, error) {
	start := time.Now()
	rows, err := conn.Query(ctx, sql, args...)
	n := 0
	if err == nil {
		for rows.Next() {
			n++
		}
		rows.Close()
		err = rows.Err()
	}
	return time.Since(start), n, err
}

// TestTimingQuantum: every response to a private query, fresh, repeated
// (answer cache) or refused after analysis (budget), leaves no earlier than
// the end of the first time slot, in both protocols.
func TestTimingQuantum(t *testing.T) {
	const q = 250 * time.Millisecond
	addr := timingProxy(t, "timing_q", "  response_quantum: 250ms")
	for i, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, addr, "timing_q", "timing-secret", m.mode)
			poor := connectAt(t, addr, "timing_q_poor", "timing-secret", m.mode)
			fresh := fmt.Sprintf("SELECT count(*) FROM orders WHERE amount > %d", i)
			cases := []struct {
				what string
				conn *pgx.Conn
				sql  string
				code string
			}{
				{"fresh", conn, fresh, ""},
				{"cache hit", conn, fresh, ""},
				{"fresh with a join", conn, fmt.Sprintf("SELECT p.category, count(*) FROM orders o JOIN products p ON p.product_id = o.product_id WHERE o.quantity > %d GROUP BY p.category", i), ""},
				{"person present", conn, fmt.Sprintf("SELECT count(*) FROM timing_events WHERE person_id = 42 AND v >= %d", i), ""},
				{"person absent", conn, fmt.Sprintf("SELECT count(*) FROM timing_events WHERE person_id = 99 AND v >= %d", i), ""},
				{"budget exceeded", poor, fresh, "53400"},
			}
			for _, c := range cases {
				d, _, err := timed(c.conn, c.sql)
				checkCode(t, c.what, err, c.code)
				t.Logf("%-18s %v (%.2f slots)", c.what, d.Round(time.Millisecond), float64(d)/float64(q))
				if d < q {
					t.Errorf("%s: answered after %v, before the end of the first slot (%v)", c.what, d, q)
				}
			}
			// Not on the clock: statements that read no private table.
			if d, _, err := timed(conn, "SELECT count(*) FROM products"); err != nil || d >= q {
				t.Logf("pass-through took %v (%v): it is not on the clock, a loaded machine may still be slow", d, err)
			}
		})
	}
}

// TestTimingMaxQueryTime: a private query still running at
// privacy.max_query_time is cancelled upstream and answered with the one
// opaque error then, not earlier; the charge is kept; the connection and
// the upstream are free for the next query, in both protocols.
func TestTimingMaxQueryTime(t *testing.T) {
	const maxTime = 600 * time.Millisecond
	addr := timingProxy(t, "timing_m", "  response_quantum: 100ms\n  max_query_time: 600ms")
	admin, err := pgx.Connect(ctx, env.upstream)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for i, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, addr, "timing_m", "timing-secret", m.mode)
			before := showBudget(t, conn)
			// Over the whole table (2M rows, grouped per person and kind),
			// which takes seconds.
			slow := fmt.Sprintf("SELECT kind, count(*), sum(v) FROM timing_events WHERE v >= %d GROUP BY kind", -i)
			d, n, err := timed(conn, slow)
			var pe *pgconn.PgError
			switch {
			case err == nil:
				t.Fatalf("the slow query was answered (%d rows) after %v: it must take longer than max_query_time %v for this test", n, d, maxTime)
			case !errors.As(err, &pe) || pe.Code != "XX000" || pe.Message != "the database could not complete this DP query; the charge is kept" || pe.Detail != "" || pe.Hint != "":
				t.Errorf("slow query: %v, want the opaque XX000", err)
			}
			t.Logf("cut off after %v (max_query_time %v)", d.Round(time.Millisecond), maxTime)
			if d < maxTime {
				t.Errorf("answered after %v, before max_query_time %v", d, maxTime)
			}
			if d > maxTime+10*time.Second {
				t.Errorf("answered after %v: the query was not cut off at max_query_time %v", d, maxTime)
			}
			if after := showBudget(t, conn); !(after.epsSpent > before.epsSpent) {
				t.Errorf("budget %+v -> %+v: the charge of a query cut off must be kept", before, after)
			}
			eventually(t, 5*time.Second, "the cut-off query still runs upstream", func() error {
				var running int
				if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%timing_events%' AND pid <> pg_backend_pid()`).Scan(&running); err != nil {
					return err
				}
				if running > 0 {
					return fmt.Errorf("%d statements over timing_events still active", running)
				}
				return nil
			})
			var one int
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("connection unusable after the cut-off: %v", err)
			}
			if _, _, err := timed(conn, fmt.Sprintf("SELECT count(*) FROM orders WHERE quantity > %d", i)); err != nil {
				t.Errorf("a private query after the cut-off: %v", err)
			}
		})
	}
}

// TestTimingCancel: a client's CancelRequest during a private query takes
// effect at the end of a time slot (proxy/clock_test.go checks when); the
// query is cancelled upstream and answered with the opaque error, the
// charge is kept and the connection answers the next query, in both
// protocols.
func TestTimingCancel(t *testing.T) {
	const after = 300 * time.Millisecond
	addr := timingProxy(t, "timing_c", "  response_quantum: 100ms\n  max_query_time: 1m")
	for i, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, addr, "timing_c", "timing-secret", m.mode)
			before := showBudget(t, conn)
			slow := fmt.Sprintf("SELECT kind, count(*), sum(v) FROM timing_events WHERE v >= %d GROUP BY kind", -i)
			cancelled := make(chan error, 1)
			go func() {
				time.Sleep(after)
				cancelled <- conn.PgConn().CancelRequest(ctx)
			}()
			d, n, err := timed(conn, slow)
			if cerr := <-cancelled; cerr != nil {
				t.Fatalf("CancelRequest: %v", cerr)
			}
			var pe *pgconn.PgError
			switch {
			case err == nil:
				t.Fatalf("the slow query was answered (%d rows) after %v: it must run longer than %v for this test", n, d, after)
			case !errors.As(err, &pe) || pe.Code != "XX000" || pe.Message != "the database could not complete this DP query; the charge is kept":
				t.Errorf("cancelled query: %v, want the opaque XX000", err)
			}
			t.Logf("cancel sent after %v, answered after %v", after, d.Round(time.Millisecond))
			if d < after {
				t.Errorf("answered after %v, before the cancel was sent (%v)", d, after)
			}
			if a := showBudget(t, conn); !(a.epsSpent > before.epsSpent) {
				t.Errorf("budget %+v -> %+v: the charge of a cancelled query must be kept", before, a)
			}
			if _, _, err := timed(conn, fmt.Sprintf("SELECT count(*) FROM orders WHERE quantity > %d", 10+i)); err != nil {
				t.Errorf("a private query after the cancel: %v", err)
			}
			// A pass-through statement is cancelled at once, as before.
			go func() {
				time.Sleep(200 * time.Millisecond)
				conn.PgConn().CancelRequest(ctx)
			}()
			if _, _, err := timed(conn, "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b"); err == nil || !strings.Contains(err.Error(), "57014") {
				t.Errorf("a cancelled pass-through statement: %v, want 57014", err)
			}
		})
	}
}

// timingShape is one attack shape, measured with the person present and
// absent.
type timingShape struct{ name, present, absent string }

var timingShapes = []timingShape{
	{"5 joins on a key (allowed fan-out), 300 rows vs none",
		`SELECT count(*) FROM orders o JOIN products p1 ON p1.product_id = o.product_id JOIN products p2 ON p2.product_id = o.product_id JOIN products p3 ON p3.product_id = o.product_id JOIN products p4 ON p4.product_id = o.product_id JOIN products p5 ON p5.product_id = o.product_id WHERE o.customer_id = 250 AND o.amount >= $1`,
		`SELECT count(*) FROM orders o JOIN products p1 ON p1.product_id = o.product_id JOIN products p2 ON p2.product_id = o.product_id JOIN products p3 ON p3.product_id = o.product_id JOIN products p4 ON p4.product_id = o.product_id JOIN products p5 ON p5.product_id = o.product_id WHERE o.customer_id = 99999 AND o.amount >= $1`},
	{"LIKE on a private column, match vs none",
		`SELECT count(*) FROM timing_events WHERE person_id = 42 AND kind LIKE 'J45%' AND v >= $1`,
		`SELECT count(*) FROM timing_events WHERE person_id = 42 AND kind LIKE 'E11%' AND v >= $1`},
	{"small person (5 rows) vs absent",
		`SELECT count(*) FROM timing_events WHERE person_id = 7 AND v >= $1`,
		`SELECT count(*) FROM timing_events WHERE person_id = 99 AND v >= $1`},
	{fmt.Sprintf("large person (%d rows) vs absent", timingBigPerson),
		`SELECT count(*) FROM timing_events WHERE person_id = 42 AND v >= $1`,
		`SELECT count(*) FROM timing_events WHERE person_id = 99 AND v >= $1`},
	{fmt.Sprintf("slow predicate on a large person (%d rows) vs absent", timingBigPerson),
		`SELECT count(*) FROM timing_events WHERE person_id = 42 AND kind LIKE '%a%s%t%h%m%a%' AND kind ILIKE '%J%4%5%.%0%' AND v >= $1`,
		`SELECT count(*) FROM timing_events WHERE person_id = 99 AND kind LIKE '%a%s%t%h%m%a%' AND kind ILIKE '%J%4%5%.%0%' AND v >= $1`},
}

// TestTimingSideChannel measures the attack shapes, person present vs
// absent, through a proxy without a useful clock (1ms) and with the clock
// (the default response_quantum, and 500ms), and logs the medians, their
// ratio and in which slots the responses left. It asserts only that the
// fan-out attack is refused and that no clocked response leaves before the
// first slot's end: times on a shared machine flake. By default it runs 3
// repetitions of each; DPPROXY_TIMING_MEASURE=1 runs the measurement of
// docs/threat-model.md, "Timing" (15 each, with -v to see it).
func TestTimingSideChannel(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	reps := 3
	type clock struct {
		name string
		q    time.Duration
		conn *pgx.Conn
	}
	clocks := []clock{
		{"no clock (1ms)", time.Millisecond, connectAt(t, timingProxy(t, "timing_raw", "  response_quantum: 1ms"), "timing_raw", "timing-secret", pgx.QueryExecModeExec)},
		{fmt.Sprintf("clock %v (default)", conf.DefaultResponseQuantum), conf.DefaultResponseQuantum, connectAt(t, timingProxy(t, "timing_clk", ""), "timing_clk", "timing-secret", pgx.QueryExecModeExec)},
	}
	if os.Getenv("DPPROXY_TIMING_MEASURE") != "" {
		reps = 15
		clocks = append(clocks, clock{"clock 500ms", 500 * time.Millisecond,
			connectAt(t, timingProxy(t, "timing_clk500", "  response_quantum: 500ms"), "timing_clk500", "timing-secret", pgx.QueryExecModeExec)})
	}

	// The attack itself, straight on the database (the proxy refuses it).
	up, err := pgx.Connect(ctx, env.upstream)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close(ctx)
	attack := `SELECT count(*) FROM orders o JOIN products c1 ON o.customer_id = %d JOIN products c2 ON true JOIN products c3 ON true`
	var ap, aa []time.Duration
	for range reps {
		d, _, err := timed(up, fmt.Sprintf(attack, 250))
		if err != nil {
			t.Fatal(err)
		}
		ap = append(ap, d)
		if d, _, err = timed(up, fmt.Sprintf(attack, 99999)); err != nil {
			t.Fatal(err)
		}
		aa = append(aa, d)
	}
	t.Logf("%d repetitions each, alternating present and absent; medians", reps)
	t.Logf("%-58s | %-22s | %9s %9s %7s | %s", "shape (person present vs absent)", "via", "present", "absent", "ratio", "slots present / absent")
	t.Logf("%-58s | %-22s | %9v %9v %7.2f |", "3 copies of products ON true, 300 rows vs none", "PostgreSQL directly", median(ap), median(aa), ratio(ap, aa))
	if _, _, err := timed(clocks[1].conn, fmt.Sprintf(attack, 250)); err == nil || !strings.Contains(err.Error(), "0A000") {
		t.Errorf("the fan-out attack through the proxy: %v, want 0A000", err)
	}

	arg := 0
	for _, s := range timingShapes {
		for _, c := range clocks {
			var p, a []time.Duration
			for range reps {
				// A new argument each time: no answer comes from the cache.
				arg--
				d, _, err := timed(c.conn, s.present, arg)
				if err != nil {
					t.Fatalf("%s: %v", s.present, err)
				}
				p = append(p, d)
				arg--
				if d, _, err = timed(c.conn, s.absent, arg); err != nil {
					t.Fatalf("%s: %v", s.absent, err)
				}
				a = append(a, d)
			}
			hist := ""
			if c.q > time.Millisecond {
				hist = slots(p, c.q) + " / " + slots(a, c.q)
				for _, d := range append(p, a...) {
					if d < c.q {
						t.Errorf("%s via %s: a response after %v, before the first slot's end", s.name, c.name, d)
					}
				}
			}
			t.Logf("%-58s | %-22s | %9v %9v %7.2f | %s", s.name, c.name, median(p), median(a), ratio(p, a), hist)
		}
	}
}

// slots counts the responses by how many whole quanta they took ("2:13
// 3:2": 13 left at the end of the second slot, 2 at the end of the third).
func slots(ds []time.Duration, q time.Duration) string {
	n := map[int]int{}
	for _, d := range ds {
		n[int(d/q)]++
	}
	keys := slices.Sorted(maps.Keys(n))
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%d:%d", k, n[k]))
	}
	return strings.Join(out, " ")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(100 * time.Microsecond)
}

// ratio is the larger median over the smaller.
func ratio(a, b []time.Duration) float64 {
	x, y := float64(median(a)), float64(median(b))
	return max(x, y) / min(x, y)
}
