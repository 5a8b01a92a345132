package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// connectMode opens a connection through the proxy with the given pgx
// query mode (the default, QueryExecModeCacheStatement, uses named
// prepared statements and binary results).
func connectMode(t *testing.T, user, password string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	host, port, _ := net.SplitHostPort(env.proxyAddr)
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s:%s/shop?sslmode=disable", user, password, host, port))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = mode
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

var execModes = map[string]pgx.QueryExecMode{
	"cache-statement": pgx.QueryExecModeCacheStatement,
	"cache-describe":  pgx.QueryExecModeCacheDescribe,
	"describe-exec":   pgx.QueryExecModeDescribeExec,
	"exec":            pgx.QueryExecModeExec,
	"simple":          pgx.QueryExecModeSimpleProtocol,
}

func TestExtendedProtocolDPQueryWithParameters(t *testing.T) {
	for name, mode := range execModes {
		t.Run(name, func(t *testing.T) {
			conn := connectMode(t, "alice", pwAlice, mode)
			rows, err := conn.Query(ctx, "SELECT region, count(*), sum(amount), avg(amount) FROM orders WHERE amount > $1 AND channel = $2 GROUP BY region", 10, "web")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for rows.Next() {
				var region string
				var count int64
				var sum, avg pgtype.Numeric
				if err := rows.Scan(&region, &count, &sum, &avg); err != nil {
					t.Fatalf("scan: %v", err)
				}
				a, _ := avg.Float64Value()
				if count < 0 || a.Float64 < 0 || a.Float64 > 500 {
					t.Errorf("%s: count %d avg %v out of range", region, count, a.Float64)
				}
				n++
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if n != 4 {
				t.Errorf("got %d regions, want 4", n)
			}
		})
	}
}

func TestExtendedProtocolRefusesAtParseAndStaysUsable(t *testing.T) {
	conn := connectMode(t, "carol", pwCarol, pgx.QueryExecModeCacheStatement)
	before := showBudget(t, conn)
	for _, c := range []struct{ sql, code string }{
		{"SELECT * FROM orders WHERE amount > $1", "42501"},
		{"SELECT customer_id FROM orders WHERE amount > $1", "42501"},
		{"SELECT count(*) FROM orders WHERE amount / $1 > 1", "42501 0A000"},
		{"DELETE FROM orders WHERE amount > $1", "42501"},
	} {
		_, err := conn.Exec(ctx, c.sql, 1)
		checkCode(t, c.sql, err, c.code)
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("connection unusable after %q: %v", c.sql, err)
		}
	}
	if after := showBudget(t, conn); after != before {
		t.Errorf("refused statements charged: %+v -> %+v", before, after)
	}
}

func TestParametersArePartOfTheQuestion(t *testing.T) {
	conn := connectMode(t, "carol", pwCarol, pgx.QueryExecModeCacheStatement)
	const q = "SELECT count(*) FROM orders WHERE quantity = $1"
	before := showBudget(t, conn)
	var a, b, c int64
	for _, x := range []struct {
		dst *int64
		arg int
	}{{&a, 1}, {&b, 1}, {&c, 2}} {
		if err := conn.QueryRow(ctx, q, x.arg).Scan(x.dst); err != nil {
			t.Fatal(err)
		}
	}
	if a != b {
		t.Errorf("same statement and parameter gave fresh noise: %d then %d", a, b)
	}
	if d := showBudget(t, conn).epsSpent - before.epsSpent; d != 2 {
		t.Errorf("two distinct questions (one repeated) charged ε=%v, want 2", d)
	}
}

func TestPassThroughWithParametersIsExact(t *testing.T) {
	conn := connectMode(t, "alice", pwAlice, pgx.QueryExecModeCacheStatement)
	var name string
	var price pgtype.Numeric
	if err := conn.QueryRow(ctx, "SELECT name, price FROM products WHERE product_id = $1", 7).Scan(&name, &price); err != nil {
		t.Fatal(err)
	}
	var want string
	if err := direct(t).QueryRow(ctx, "SELECT name FROM products WHERE product_id = 7").Scan(&want); err != nil || name != want {
		t.Errorf("product 7 through the proxy = %q, directly %q (%v)", name, want, err)
	}
}

func TestTransactions(t *testing.T) {
	conn := connectMode(t, "alice", pwAlice, pgx.QueryExecModeCacheStatement)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := conn.PgConn().TxStatus(); s != 'T' {
		t.Errorf("status in a transaction = %c, want T", s)
	}
	var n int64
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM orders WHERE quantity > $1", 2).Scan(&n); err != nil {
		t.Fatalf("DP query in a transaction: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if s := conn.PgConn().TxStatus(); s != 'I' {
		t.Errorf("status after COMMIT = %c, want I", s)
	}
	// A failed statement upstream puts the transaction in the failed state.
	tx, _ = conn.Begin(ctx)
	if _, err := tx.Exec(ctx, "SELECT no_such_column FROM products"); err == nil {
		t.Fatal("bad column accepted")
	}
	if s := conn.PgConn().TxStatus(); s != 'E' {
		t.Errorf("status after an error in a transaction = %c, want E", s)
	}
	tx.Rollback(ctx)
	_, err = conn.Exec(ctx, "BEGIN READ WRITE")
	checkCode(t, "BEGIN READ WRITE", err, "42501")
	if s := conn.PgConn().TxStatus(); s != 'I' {
		t.Errorf("status after refused BEGIN = %c, want I", s)
	}
}

// rawSession gives a test the wire protocol itself, through the proxy.
func rawSession(t *testing.T, user, password string) (*pgproto3.Frontend, func()) {
	t.Helper()
	host, port, _ := net.SplitHostPort(env.proxyAddr)
	pc, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%s/shop?sslmode=disable", user, password, host, port))
	if err != nil {
		t.Fatal(err)
	}
	hc, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	return hc.Frontend, func() { hc.Conn.Close() }
}

// receiveUntilReady collects message types until ReadyForQuery.
func receiveUntilReady(t *testing.T, fe *pgproto3.Frontend) []string {
	t.Helper()
	var got []string
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("receive: %v (so far %v)", err, got)
		}
		name := strings.TrimPrefix(fmt.Sprintf("%T", msg), "*pgproto3.")
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			name += ":" + e.Code
		}
		got = append(got, name)
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return got
		}
	}
}

func TestExecuteWithRowLimitSuspendsThePortal(t *testing.T) {
	fe, done := rawSession(t, "alice", pwAlice)
	defer done()
	for _, q := range []string{
		"SELECT region, count(*) FROM orders GROUP BY region",   // private: 4 rows
		"SELECT product_id FROM products WHERE product_id <= 4", // pass-through: 4 rows
	} {
		fe.Send(&pgproto3.Parse{Query: q})
		fe.Send(&pgproto3.Bind{})
		fe.Send(&pgproto3.Describe{ObjectType: 'P'})
		fe.Send(&pgproto3.Execute{MaxRows: 3})
		fe.Send(&pgproto3.Execute{MaxRows: 3})
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(receiveUntilReady(t, fe), " ")
		want := "ParseComplete BindComplete RowDescription DataRow DataRow DataRow PortalSuspended DataRow CommandComplete"
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s:\n got %s\nwant %s ...", q, got, want)
		}
	}
}

func TestErrorInBatchDiscardsUntilSync(t *testing.T) {
	fe, done := rawSession(t, "alice", pwAlice)
	defer done()
	fe.Send(&pgproto3.Parse{Query: "SELECT * FROM orders"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Parse{Query: "SELECT 1"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "ErrorResponse:42501 ReadyForQuery" {
		t.Errorf("refused batch: got %s", got)
	}
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "ParseComplete BindComplete DataRow CommandComplete ReadyForQuery" {
		t.Errorf("next batch: got %s", got)
	}
}

func TestCancelRequestReachesTheUpstream(t *testing.T) {
	conn := connectMode(t, "alice", pwAlice, pgx.QueryExecModeCacheStatement)
	// A CancelRequest on a new connection, with the key the proxy handed
	// out, while a long query (50^5 rows) runs.
	go func() {
		time.Sleep(200 * time.Millisecond)
		if err := conn.PgConn().CancelRequest(ctx); err != nil {
			t.Errorf("CancelRequest: %v", err)
		}
	}()
	start := time.Now()
	_, err := conn.Exec(ctx, "SELECT count(*) FROM products a, products b, products c, products d, products e")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("cancelled query: err = %v after %v, want SQLSTATE 57014", err, time.Since(start))
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("connection unusable after cancel: %v", err)
	}
}

func TestDeallocateAndReprepare(t *testing.T) {
	conn := connectMode(t, "alice", pwAlice, pgx.QueryExecModeCacheStatement)
	if _, err := conn.Prepare(ctx, "byid", "SELECT name FROM products WHERE product_id = $1"); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := conn.QueryRow(ctx, "byid", 3).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DEALLOCATE byid", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("DEALLOCATE: %v", err)
	}
	if _, err := conn.Exec(ctx, "DEALLOCATE byid", pgx.QueryExecModeSimpleProtocol); err == nil {
		t.Errorf("second DEALLOCATE of the same statement succeeded")
	}
}
