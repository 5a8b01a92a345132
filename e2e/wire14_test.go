package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Issue 14, the wire protocol and the session as clients expect them from
// PostgreSQL: errors sent before any Sync (asyncpg), a transaction block
// aborted by an error, the database name at startup.

// rawSend writes protocol messages on pc as they are, no Sync added.
func rawSend(t *testing.T, pc *pgconn.PgConn, msgs ...pgproto3.FrontendMessage) {
	t.Helper()
	for _, m := range msgs {
		pc.Frontend().Send(m)
	}
	if err := pc.Frontend().Flush(); err != nil {
		t.Fatal(err)
	}
}

// rawExpect reads messages of the types named by want, in order, each
// within two seconds: a message held back until a Sync fails the test
// instead of hanging it.
func rawExpect(t *testing.T, pc *pgconn.PgConn, want ...string) []pgproto3.BackendMessage {
	t.Helper()
	var got []pgproto3.BackendMessage
	for _, w := range want {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := pc.ReceiveMessage(cctx)
		cancel()
		if err != nil {
			t.Fatalf("waiting for %s (after %d messages): %v", w, len(got), err)
		}
		if n := fmt.Sprintf("%T", msg)[len("*pgproto3."):]; n != w {
			t.Fatalf("got %s (%+v), want %s", n, msg, w)
		}
		got = append(got, msg)
	}
	return got
}

// TestWireErrorBeforeSync: asyncpg prepares with Parse, Describe, Flush
// and waits for the answer without a Sync. PostgreSQL sends the error of
// a refused or mistyped statement at once, and the answers of a good one
// on Flush; then Sync gets ReadyForQuery.
func TestWireErrorBeforeSync(t *testing.T) {
	pc := connect(t, "alice", pwAlice).PgConn()
	for _, sql := range []string{
		"SELECT amount FROM orders",           // refused: a row-level read
		"SELEC 1",                             // a syntax error
		"SELECT no_such_column FROM products", // an error of the upstream
	} {
		t.Run(sql, func(t *testing.T) {
			rawSend(t, pc, &pgproto3.Parse{Name: "s", Query: sql}, &pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Flush{})
			e := rawExpect(t, pc, "ErrorResponse")[0].(*pgproto3.ErrorResponse)
			if e.Severity != "ERROR" {
				t.Errorf("severity %s", e.Severity)
			}
			// The rest of the batch is skipped until Sync.
			rawSend(t, pc, &pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Flush{}, &pgproto3.Sync{})
			if r := rawExpect(t, pc, "ReadyForQuery")[0].(*pgproto3.ReadyForQuery); r.TxStatus != 'I' {
				t.Errorf("ReadyForQuery %c, want I", r.TxStatus)
			}
		})
	}
	t.Run("good statement", func(t *testing.T) {
		rawSend(t, pc, &pgproto3.Parse{Name: "g", Query: "SELECT $1::int4 + 1 AS x"}, &pgproto3.Describe{ObjectType: 'S', Name: "g"}, &pgproto3.Flush{})
		got := rawExpect(t, pc, "ParseComplete", "ParameterDescription", "RowDescription")
		if rd := got[2].(*pgproto3.RowDescription); len(rd.Fields) != 1 || string(rd.Fields[0].Name) != "x" {
			t.Errorf("RowDescription %+v", rd)
		}
		rawSend(t, pc, &pgproto3.Bind{PreparedStatement: "g", Parameters: [][]byte{[]byte("41")}}, &pgproto3.Execute{}, &pgproto3.Flush{})
		got = rawExpect(t, pc, "BindComplete", "DataRow", "CommandComplete")
		if v := string(got[1].(*pgproto3.DataRow).Values[0]); v != "42" {
			t.Errorf("got %s, want 42", v)
		}
		// An error at Bind, in the same batch, is sent at once too.
		rawSend(t, pc, &pgproto3.Bind{PreparedStatement: "nosuch"}, &pgproto3.Flush{})
		rawExpect(t, pc, "ErrorResponse")
		rawSend(t, pc, &pgproto3.Close{ObjectType: 'S', Name: "g"}, &pgproto3.Sync{})
		rawExpect(t, pc, "ReadyForQuery")
	})
	// The connection is still good.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pc.Exec(cctx, "SELECT 1").Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWireAbortedBlock: an error inside a transaction block, a refusal
// of the proxy's included, leaves it aborted until ROLLBACK, as
// PostgreSQL does: 25P02 for later statements (a DP query too, before
// any charge), ReadyForQuery 'E', COMMIT ends it with ROLLBACK, ROLLBACK
// TO SAVEPOINT recovers.
func TestWireAbortedBlock(t *testing.T) {
	const refused = "SELECT amount FROM orders"
	const dpQuery = "SELECT count(*) FROM orders"
	t.Run("simple", func(t *testing.T) {
		conn := connect(t, "alice", pwAlice)
		pc := conn.PgConn()
		mustExec(t, conn, "BEGIN")
		wantCode(t, conn, refused, "42501", "")
		if s := pc.TxStatus(); s != 'E' {
			t.Fatalf("after a refusal in a block: status %c, want E", s)
		}
		wantCode(t, conn, "SELECT 1", "25P02", "current transaction is aborted")
		wantCode(t, conn, dpQuery, "25P02", "current transaction is aborted")
		wantCode(t, conn, "SHOW dp.epsilon", "25P02", "current transaction is aborted")
		if tag := mustExec(t, conn, "COMMIT"); tag != "ROLLBACK" {
			t.Errorf("COMMIT of an aborted block: tag %q, want ROLLBACK", tag)
		}
		if s := pc.TxStatus(); s != 'I' {
			t.Errorf("after COMMIT: status %c", s)
		}
		mustExec(t, conn, "SELECT 1")
	})
	t.Run("savepoint", func(t *testing.T) {
		conn := connect(t, "alice", pwAlice)
		mustExec(t, conn, "BEGIN")
		mustExec(t, conn, "SAVEPOINT s")
		wantCode(t, conn, refused, "42501", "")
		wantCode(t, conn, "SELECT 1", "25P02", "")
		mustExec(t, conn, "ROLLBACK TO SAVEPOINT s")
		if s := conn.PgConn().TxStatus(); s != 'T' {
			t.Errorf("after ROLLBACK TO: status %c, want T", s)
		}
		mustExec(t, conn, "SELECT 1")
		if tag := mustExec(t, conn, "COMMIT"); tag != "COMMIT" {
			t.Errorf("COMMIT after ROLLBACK TO: tag %q", tag)
		}
	})
	t.Run("outside a block", func(t *testing.T) {
		conn := connect(t, "alice", pwAlice)
		wantCode(t, conn, refused, "42501", "")
		if s := conn.PgConn().TxStatus(); s != 'I' {
			t.Errorf("status %c, want I", s)
		}
		mustExec(t, conn, "SELECT 1")
	})
	t.Run("extended", func(t *testing.T) {
		pc := connect(t, "alice", pwAlice).PgConn()
		if err := pc.Exec(ctx, "BEGIN").Close(); err != nil {
			t.Fatal(err)
		}
		// A refusal at Parse, answered at once; the Sync then reports
		// the block aborted.
		rawSend(t, pc, &pgproto3.Parse{Query: refused}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Flush{})
		rawExpect(t, pc, "ErrorResponse")
		rawSend(t, pc, &pgproto3.Sync{})
		if r := rawExpect(t, pc, "ReadyForQuery")[0].(*pgproto3.ReadyForQuery); r.TxStatus != 'E' {
			t.Errorf("ReadyForQuery %c, want E", r.TxStatus)
		}
		for _, sql := range []string{"SELECT 1", dpQuery} {
			if _, err := pc.ExecParams(ctx, sql, nil, nil, nil, nil).Close(); pgCode(err) != "25P02" {
				t.Errorf("%s in an aborted block: %v, want 25P02", sql, err)
			}
		}
		res, err := pc.Exec(ctx, "COMMIT").ReadAll()
		if err != nil || string(res[0].CommandTag.String()) != "ROLLBACK" {
			t.Errorf("COMMIT: %v %v, want tag ROLLBACK", res, err)
		}
		// An error at Execute of a pass-through: PostgreSQL's own.
		if err := pc.Exec(ctx, "BEGIN").Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := pc.ExecParams(ctx, "SELECT 1/$1::int4", [][]byte{[]byte("0")}, nil, nil, nil).Close(); pgCode(err) != "22012" {
			t.Errorf("division by zero: %v", err)
		}
		if s := pc.TxStatus(); s != 'E' {
			t.Errorf("status %c, want E", s)
		}
		if err := pc.Exec(ctx, "ROLLBACK").Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	tag, err := conn.Exec(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.String()
}

// TestWireDatabaseName: a startup naming a database other than the
// upstream's and those of conf databases is refused FATAL 3D000, as
// PostgreSQL refuses an unknown database; none named means the user's
// name, as in PostgreSQL.
func TestWireDatabaseName(t *testing.T) {
	t.Setenv("PGDATABASE", "")
	host, port, _ := net.SplitHostPort(env.proxyAddr)
	u, err := url.Parse(env.upstream)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ db, want string }{
		{"shop", ""},                          // conf databases
		{strings.TrimPrefix(u.Path, "/"), ""}, // the upstream's own name
		{"other", `database "other" does not exist`},
		{"", `database "alice" does not exist`},
	} {
		cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://alice:%s@%s:%s/%s?sslmode=disable", pwAlice, host, port, c.db))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.ConnectConfig(ctx, cc)
		if c.want == "" {
			if err != nil {
				t.Errorf("database %q: %v", c.db, err)
			} else {
				conn.Close(ctx)
			}
			continue
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "3D000" || pe.Severity != "FATAL" || pe.Message != c.want {
			t.Errorf("database %q: got %v, want FATAL 3D000 %s", c.db, err, c.want)
		}
		if conn != nil {
			conn.Close(ctx)
		}
	}
}

// TestWireCurrentUser: current_user and its kin name the analyst, not the
// proxy's upstream role, per session although the analysis of a text is
// shared by all analysts; after RESET ALL and DISCARD ALL too; privilege
// functions still answer for the role the statements run as.
func TestWireCurrentUser(t *testing.T) {
	const q = "SELECT current_user, session_user, user, current_role, pg_catalog.current_user() AS f"
	for _, a := range []struct{ user, pw string }{{"alice", pwAlice}, {"bob", pwBob}} {
		conn := connect(t, a.user, a.pw)
		check := func(when string) {
			t.Helper()
			rows, err := conn.Query(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			names := []string{}
			for _, fd := range rows.FieldDescriptions() {
				names = append(names, fd.Name)
			}
			if fmt.Sprint(names) != "[current_user session_user user current_role f]" {
				t.Errorf("%s: columns %v", when, names)
			}
			for rows.Next() {
				vals, _ := rows.Values()
				for i, v := range vals {
					if v != a.user {
						t.Errorf("%s as %s: column %s = %v", when, a.user, names[i], v)
					}
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("%s: %v", when, err)
			}
		}
		check("simple protocol")
		var ext string
		if err := conn.QueryRow(ctx, "SELECT current_user", pgx.QueryExecModeExec).Scan(&ext); err != nil || ext != a.user {
			t.Errorf("extended protocol: %q, %v", ext, err)
		}
		mustExec(t, conn, "RESET ALL")
		check("after RESET ALL")
		mustExec(t, conn, "BEGIN")
		mustExec(t, conn, "RESET ALL")
		check("after RESET ALL in a block")
		mustExec(t, conn, "ROLLBACK")
		check("after ROLLBACK")
		mustExec(t, conn, "DISCARD ALL")
		check("after DISCARD ALL")
		var priv bool
		if err := conn.QueryRow(ctx, "SELECT has_table_privilege(current_user, 'public.products', 'select')").Scan(&priv); err != nil || !priv {
			t.Errorf("has_table_privilege(current_user, ...): %v, %v", priv, err)
		}
		wantCode(t, conn, "SELECT current_setting('role')", "42501", "current_setting")
		var own string
		if err := conn.QueryRow(ctx, "SELECT current_setting('dpproxy.analyst')").Scan(&own); err != nil || own != a.user {
			t.Errorf("current_setting('dpproxy.analyst') = %q, %v", own, err)
		}
	}
}

const copyConfig = `
upstream: UPSTREAM
auth:
  method: trust
  users:
    - {name: wire_copy, budget: {epsilon: 100, delta: 1.0e-3}}
privacy:
  epsilon: 1.0
  delta: 1.0e-7
tables:
  public.orders:
    privacy_unit: customer_id
    max_groups_per_unit: 4
    max_rows_per_unit: 8
    columns:
      amount: {lower: 0, upper: 500}
      region: {public_values: [north, south, east, west]}
  public.products: {public: true}
`

// TestWireCopy: psql's \copy (SELECT …) TO 'file' sends COPY (…) TO
// STDOUT. Of a DP query, the file holds the released rows (charged like
// the SELECT); of a pass-through query, exactly the bytes PostgreSQL's
// own COPY writes (compared with psql run directly against the database),
// text and CSV, NULLs and values that need quoting or escapes. COPY FROM
// is refused.
func TestWireCopy(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("psql is not installed (Debian: postgresql-client)")
	}
	cfg := configFor(t, copyConfig, nil)
	_, addr, _ := startProxyWith(t, cfg)
	host, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	viaProxy := func(cmd string) (string, error) {
		c := exec.CommandContext(ctx, psql, "-X", "-v", "ON_ERROR_STOP=1", "-c", cmd)
		c.Env = append(os.Environ(), "PGHOST="+host, "PGPORT="+port, "PGUSER=wire_copy", "PGDATABASE=shop", "PGSSLMODE=disable", "PGPASSWORD=")
		out, err := c.CombinedOutput()
		return string(out), err
	}
	direct := func(cmd string) {
		c := exec.CommandContext(ctx, psql, "-X", "-v", "ON_ERROR_STOP=1", "-d", env.upstream, "-c", cmd)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("psql direct: %v\n%s", err, out)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	t.Run("DP query CSV HEADER", func(t *testing.T) {
		f := filepath.Join(dir, "dp.csv")
		out, err := viaProxy(`\copy (SELECT region, count(*) AS n FROM orders GROUP BY region ORDER BY region) TO '` + f + `' WITH CSV HEADER`)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, "COPY 4") {
			t.Errorf("psql said %q, want COPY 4", out)
		}
		lines := strings.Split(strings.TrimSuffix(read("dp.csv"), "\n"), "\n")
		if len(lines) != 5 || lines[0] != "region,n" {
			t.Fatalf("file:\n%s", strings.Join(lines, "\n"))
		}
		for i, want := range []string{"east", "north", "south", "west"} {
			region, n, ok := strings.Cut(lines[i+1], ",")
			if _, err := strconv.ParseFloat(n, 64); region != want || !ok || err != nil {
				t.Errorf("line %d: %q, want %s,<count>", i+2, lines[i+1], want)
			}
		}
	})

	const q = `SELECT name, price, NULL::text AS nothing, '' AS empty, 'a,"b"' AS quoted, E'tab\there back\\slash' AS escaped, E'two\nlines' AS multi, '\N' AS backslash_n FROM products ORDER BY product_id LIMIT 5`
	for _, opts := range []string{"WITH CSV HEADER", "", "WITH (FORMAT csv, DELIMITER ';', NULL 'NULL', QUOTE '''', HEADER)", "WITH (FORMAT text, DELIMITER ',', NULL '')", "WITH (FORMAT text, HEADER true)"} {
		t.Run("pass-through "+opts, func(t *testing.T) {
			p, d := filepath.Join(dir, "proxy.out"), filepath.Join(dir, "direct.out")
			if out, err := viaProxy(`\copy (` + q + `) TO '` + p + `' ` + opts); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			direct(`\copy (` + q + `) TO '` + d + `' ` + opts)
			if got, want := read("proxy.out"), read("direct.out"); got != want {
				t.Errorf("through the proxy:\n%s\nPostgreSQL:\n%s", got, want)
			}
		})
	}
	t.Run("public table", func(t *testing.T) {
		p, d := filepath.Join(dir, "pt.out"), filepath.Join(dir, "dt.out")
		if out, err := viaProxy(`\copy products TO '` + p + `' CSV HEADER`); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		direct(`\copy products TO '` + d + `' CSV HEADER`)
		if got, want := read("pt.out"), read("dt.out"); got != want || got == "" {
			t.Errorf("through the proxy:\n%s\nPostgreSQL:\n%s", got, want)
		}
	})
	t.Run("one column \\.", func(t *testing.T) {
		p, d := filepath.Join(dir, "p1.out"), filepath.Join(dir, "d1.out")
		const one = `SELECT '\.' AS x UNION ALL SELECT 'y'`
		if out, err := viaProxy(`\copy (` + one + `) TO '` + p + `' CSV`); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		direct(`\copy (` + one + `) TO '` + d + `' CSV`)
		if got, want := read("p1.out"), read("d1.out"); got != want {
			t.Errorf("through the proxy %q, PostgreSQL %q", got, want)
		}
	})

	t.Run("refused", func(t *testing.T) {
		src := filepath.Join(dir, "in.csv")
		os.WriteFile(src, []byte("1,x\n"), 0o600)
		for cmd, want := range map[string]string{
			`\copy products FROM '` + src + `' CSV`:                       "COPY FROM is refused",
			`COPY (SELECT 1) TO '/tmp/wire14_server_file'`:                "COPY to a server file or program is refused",
			`\copy (SELECT amount FROM orders) TO '` + src + `.out' CSV`:  "would return one row per table row",
			`\copy orders TO '` + src + `.t' CSV`:                         "individual rows of private table",
			`\copy (SELECT name FROM products) TO '` + src + `.b' BINARY`: "COPY format binary is not supported",
		} {
			out, err := viaProxy(cmd)
			if err == nil || !strings.Contains(out, want) {
				t.Errorf("%s: %v\n%s\nwant a refusal mentioning %q", cmd, err, out, want)
			}
		}
	})

	t.Run("pgx CopyTo", func(t *testing.T) {
		conn, err := dialAt(addr, "wire_copy", "")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var buf strings.Builder
		tag, err := conn.PgConn().CopyTo(ctx, &buf, "COPY (SELECT count(*) FROM orders) TO STDOUT")
		if err != nil || tag.String() != "COPY 1" {
			t.Fatalf("CopyTo: %v %v", tag, err)
		}
		if _, err := strconv.ParseFloat(strings.TrimSpace(buf.String()), 64); err != nil {
			t.Errorf("CopyTo wrote %q", buf.String())
		}
		// The extended protocol refuses it with a message saying why.
		if _, err := conn.PgConn().Prepare(ctx, "", "COPY (SELECT 1) TO STDOUT", nil); pgCode(err) != "0A000" {
			t.Errorf("COPY through Parse: %v", err)
		}
	})
}

// asyncpgScript: asyncpg prepares every statement with Parse, Describe,
// Flush and waits; a refusal, a syntax error and an error inside a
// transaction block must come back at once (each call under a timeout),
// and the connection stay usable.
const asyncpgScript = `
import asyncio, json, os, sys
import asyncpg

async def main():
    c = await asyncpg.connect(host=os.environ["H"], port=int(os.environ["P"]), user="wire_asyncpg", database="shop", ssl=False)
    out = {}
    for name, sql in [("refused", "SELECT amount FROM orders"), ("syntax", "SELEC 1")]:
        try:
            await asyncio.wait_for(c.fetch(sql), 5)
            out[name] = "answered"
        except asyncio.TimeoutError:
            out[name] = "hang"
        except asyncpg.PostgresError as e:
            out[name] = e.sqlstate
    out["user"] = await asyncio.wait_for(c.fetchval("SELECT current_user"), 5)
    out["count"] = await asyncio.wait_for(c.fetchval("SELECT count(*) FROM orders"), 5) is not None
    try:
        async with c.transaction():
            try:
                await asyncio.wait_for(c.fetch("SELECT amount FROM orders"), 5)
            except asyncpg.PostgresError:
                pass
            await asyncio.wait_for(c.fetch("SELECT 1"), 5)
        out["tx"] = "no error"
    except asyncpg.PostgresError as e:
        out["tx"] = e.sqlstate
    out["after"] = await asyncio.wait_for(c.fetchval("SELECT 41 + 1"), 5)
    await c.close()
    print(json.dumps(out))

asyncio.run(main())
`

// TestWireAsyncpg runs the real asyncpg (Debian's python3-asyncpg), when
// installed, through the wire behaviours above.
func TestWireAsyncpg(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import asyncpg").Run(); err != nil {
		t.Skip("python3-asyncpg is not installed (Debian: apt-get install python3-asyncpg)")
	}
	cfg := configFor(t, strings.Replace(copyConfig, "wire_copy", "wire_asyncpg", 1), nil)
	_, addr, _ := startProxyWith(t, cfg)
	host, port, _ := net.SplitHostPort(addr)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "/usr/bin/python3", "-c", asyncpgScript)
	cmd.Env = append(os.Environ(), "H="+host, "P="+port)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("asyncpg: %v\n%s", err, out)
	}
	want := `{"refused": "42501", "syntax": "42601", "user": "wire_asyncpg", "count": true, "tx": "25P02", "after": 42}`
	if strings.TrimSpace(string(out)) != want {
		t.Errorf("asyncpg saw\n%s\nwant\n%s", out, want)
	}
}

// TestWireBackendPID: pg_backend_pid() is the process id the proxy gave
// the client in BackendKeyData (Superset's SQL Lab asks for it before
// every query, as the id to cancel), not the upstream backend's, which
// the session's upstream connection serves to other sessions too; and it
// stays so after RESET ALL and DISCARD ALL.
func TestWireBackendPID(t *testing.T) {
	a, b := connect(t, "alice", pwAlice), connect(t, "bob", pwBob)
	for _, c := range []struct {
		name string
		conn *pgx.Conn
	}{{"alice", a}, {"bob", b}} {
		for _, reset := range []string{"", "RESET ALL", "DISCARD ALL"} {
			if reset != "" {
				if _, err := c.conn.Exec(ctx, reset); err != nil {
					t.Fatalf("%s: %v", reset, err)
				}
			}
			var pid uint32
			var name string
			rows, err := c.conn.Query(ctx, "SELECT pg_backend_pid()")
			if err != nil {
				t.Fatalf("%s after %q: %v", c.name, reset, err)
			}
			name = rows.FieldDescriptions()[0].Name
			for rows.Next() {
				if err := rows.Scan(&pid); err != nil {
					t.Fatal(err)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("%s after %q: %v", c.name, reset, err)
			}
			if want := c.conn.PgConn().PID(); pid != want || name != "pg_backend_pid" {
				t.Errorf("%s after %q: pg_backend_pid() = %d (column %q), want the BackendKeyData pid %d", c.name, reset, pid, name, want)
			}
		}
	}
}
