package e2e

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// Issue 12, "Charge only what can be answered": everything that can fail
// whatever the private rows hold is checked before the charge. A failure
// after the charge would make the analyst pay for nothing, and whether it
// fails must not depend on one person. Each case here fails; none may be
// charged, and the connection stays usable.

// TestBadParametersAreNotCharged binds values that are not valid for
// their parameter's type, in text and in binary format.
func TestBadParametersAreNotCharged(t *testing.T) {
	conn := connectAt(t, env.proxyAddr, "carol", pwCarol, pgx.QueryExecModeExec)
	pc := conn.PgConn()
	cases := []struct {
		name    string
		sql     string
		values  [][]byte
		oids    []uint32
		formats []int16
	}{
		{"text for an integer", "SELECT count(*) FROM orders WHERE quantity > $1", [][]byte{[]byte("abc")}, []uint32{23}, []int16{0}},
		{"3-byte binary integer", "SELECT count(*) FROM orders WHERE quantity > $1", [][]byte{{0, 0, 1}}, []uint32{23}, []int16{1}},
		{"bad date", "SELECT count(*) FROM orders WHERE ordered_at > $1", [][]byte{[]byte("not a date")}, []uint32{1184}, []int16{0}},
		{"integer out of range", "SELECT count(*) FROM orders WHERE quantity > $1", [][]byte{[]byte("99999999999")}, []uint32{23}, []int16{0}},
		{"bad numeric", "SELECT sum(amount) FROM orders WHERE amount > $1", [][]byte{[]byte("1.2.3")}, []uint32{1700}, []int16{0}},
		{"second of two", "SELECT count(*) FROM orders WHERE quantity > $1 AND region = $2", [][]byte{[]byte("1"), []byte("\xff")}, []uint32{23, 25}, []int16{0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := showBudget(t, conn)
			_, err := pc.ExecParams(ctx, c.sql, c.values, c.oids, c.formats, nil).Close()
			if err == nil {
				t.Fatalf("%s: accepted", c.name)
			}
			if after := showBudget(t, conn); after != before {
				t.Errorf("%s (%v) was charged: %+v -> %+v", c.name, err, before, after)
			}
			var one int
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				t.Fatalf("connection unusable: %v", err)
			}
		})
	}
	// A control: the same statement with a valid value is answered and
	// charged, so the cases above fail for their values.
	before := showBudget(t, conn)
	if _, err := pc.ExecParams(ctx, "SELECT count(*) FROM orders WHERE quantity > $1", [][]byte{[]byte("-7")}, []uint32{23}, []int16{0}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if after := showBudget(t, conn); after == before {
		t.Errorf("the control query was not charged")
	}
}

// TestAbortedTransactionIsNotCharged: in a transaction that already
// failed, PostgreSQL refuses every query before reading anything; the
// proxy refuses a private query the same way, before the charge.
func TestAbortedTransactionIsNotCharged(t *testing.T) {
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
			before := showBudget(t, conn)
			if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "SELECT 1/0"); err == nil {
				t.Fatal("1/0 succeeded")
			}
			_, err := conn.Exec(ctx, "SELECT count(*) FROM orders WHERE amount > 17")
			checkCode(t, "private query in an aborted transaction", err, "25P02")
			if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			if after := showBudget(t, conn); after != before {
				t.Errorf("a private query in an aborted transaction was charged: %+v -> %+v", before, after)
			}
		})
	}
}

// TestFailureAfterChargeIsOpaque: whatever makes a charged private query
// fail in the database, the client sees one code and one text.
func TestFailureAfterChargeIsOpaque(t *testing.T) {
	addr := startLimited(t, "mallory_opaque", "scram-sha-256", "  statement_timeout: 200ms\n")
	conn := connectAt(t, addr, "mallory_opaque", "pw", pgx.QueryExecModeSimpleProtocol)
	_, err := conn.Exec(ctx, "SELECT count(*) FROM dp_slow_orders")
	checkCode(t, "timed out private query", err, "XX000")
	if err == nil || err.Error() != "ERROR: the database could not complete this DP query; the charge is kept (SQLSTATE XX000)" {
		t.Errorf("timeout: %v, want the one opaque error", err)
	}
}

// TestHugeUpstreamRowRefused: nested ROW(...) doubles record_out's quoting
// per level, so 27 levels (a few hundred bytes of SQL) make PostgreSQL send
// a 134 MB row (red team). The proxy caps upstream messages: the statement
// fails instead of the proxy holding the row, and the proxy keeps serving.
func TestHugeUpstreamRowRefused(t *testing.T) {
	nested := func(depth int) string {
		q := "1"
		for range depth {
			q = "ROW(" + q + ", 'x')"
		}
		return "SELECT " + q
	}
	conn := connectAt(t, env.proxyAddr, "carol", pwCarol, pgx.QueryExecModeSimpleProtocol)
	var small string
	if err := conn.QueryRow(ctx, nested(8)).Scan(&small); err != nil {
		t.Fatalf("a small nested row: %v", err)
	}
	if _, err := conn.Exec(ctx, nested(27)); err == nil {
		t.Errorf("a 134 MB row was relayed")
	}
	again := connectAt(t, env.proxyAddr, "carol", pwCarol, pgx.QueryExecModeSimpleProtocol)
	var one int
	if err := again.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the proxy stopped serving: %v", err)
	}
}

// TestPlanTimeFailuresAreNotCharged: a constant that fails only when
// PostgreSQL plans the query (folded against a column's type, or in
// HAVING) is found before the charge.
func TestPlanTimeFailuresAreNotCharged(t *testing.T) {
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
			for _, sql := range []string{
				"SELECT count(*) FROM orders WHERE quantity > 3000000000::int4",
				"SELECT count(*) FROM orders WHERE quantity > 1/0",
				"SELECT region, count(*) FROM orders GROUP BY region HAVING count(*) > 1/0",
				"SELECT region, count(*) + 1/0 AS c FROM orders GROUP BY region",
			} {
				before := showBudget(t, conn)
				_, err := conn.Exec(ctx, sql)
				if err == nil {
					t.Errorf("%s: answered", sql)
				}
				if after := showBudget(t, conn); after != before {
					t.Errorf("%s (%v) was charged: %+v -> %+v", sql, err, before, after)
				}
			}
		})
	}
}
