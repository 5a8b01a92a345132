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
)

// Regression tests of issue 11, "One text, one meaning": the proxy checked
// one reading of a client's text and PostgreSQL ran another. Each test
// first shows, directly on the database, that the attack's bytes do mean
// something else to PostgreSQL under the client's setting (so the test
// fails if the proxy ever forwards them), then that the proxy refuses
// them, charges nothing and keeps the connection usable, in the simple
// and the extended protocol.

// multibyte characters whose second byte is a backslash (0x5C) in the
// client-only encodings PostgreSQL accepts that have such characters (UHC
// and JOHAB have none that convert to UTF-8; they are refused like every
// encoding but UTF-8 all the same).
var backslashEndings = map[string]string{
	"SJIS":    "\x95\x5c", // 表
	"GBK":     "\x81\x5c",
	"BIG5":    "\xa4\x5c", // 功
	"GB18030": "\x81\x5c",
}

// clientOnlyEncodings are every client encoding PostgreSQL accepts other
// than UTF8: the proxy must refuse each one, at startup and by SET.
var clientOnlyEncodings = []string{"SJIS", "GBK", "BIG5", "GB18030", "UHC", "JOHAB", "LATIN1", "LATIN2", "LATIN9",
	"WIN1252", "WIN1251", "WIN866", "KOI8R", "EUC_JP", "EUC_KR", "EUC_CN", "EUC_TW", "MULE_INTERNAL", "SQL_ASCII",
	"ISO_8859_5", "Shift_JIS", "sjis", "Windows-1252"}

// TestEncodingAttackIsRealUpstream shows what the proxy must never let
// through: under SJIS (and the other client-only encodings), PostgreSQL
// ends the string literal at the backslash inside a character, and runs
// what follows as SQL.
func TestEncodingAttackIsRealUpstream(t *testing.T) {
	db := direct(t)
	for enc, ch := range backslashEndings {
		t.Run(enc, func(t *testing.T) {
			if _, err := db.Exec(ctx, "SET client_encoding = '"+enc+"'", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
			defer db.Exec(ctx, "RESET client_encoding", pgx.QueryExecModeSimpleProtocol)
			// One column to a UTF-8 reader, three to PostgreSQL under enc.
			sql := "SELECT E'" + ch + "', 2 AS b, 3 AS c --'"
			rr := db.PgConn().Exec(ctx, sql)
			res, err := rr.ReadAll()
			if err != nil {
				t.Fatalf("%s: %v", enc, err)
			}
			if len(res) != 1 || len(res[0].FieldDescriptions) != 3 {
				t.Fatalf("%s: PostgreSQL read %d results, want 1 with 3 columns (the premise of the attack)", enc, len(res))
			}
		})
	}
}

// TestClientEncodingRefused: every client encoding but UTF-8 is refused
// at startup (FATAL 0A000, before anything runs) and by SET / SET NAMES
// (0A000, connection usable); UTF-8 under any of its names is accepted,
// and ParameterStatus tells the truth.
func TestClientEncodingRefused(t *testing.T) {
	for _, enc := range clientOnlyEncodings {
		conn, err := dialParams(map[string]string{"client_encoding": enc})
		if err == nil {
			conn.Close(ctx)
			t.Errorf("startup with client_encoding %s accepted", enc)
		} else {
			checkCode(t, "startup client_encoding="+enc, err, "0A000")
		}
		conn, err = dialParams(map[string]string{"options": "-c client_encoding=" + enc})
		if err == nil {
			conn.Close(ctx)
			t.Errorf("startup with options -c client_encoding=%s accepted", enc)
		}
	}
	for _, enc := range []string{"UTF8", "utf-8", "Unicode", "UTF_8"} {
		conn, err := dialParams(map[string]string{"client_encoding": enc})
		if err != nil {
			t.Errorf("startup with client_encoding %s: %v", enc, err)
			continue
		}
		if got := conn.PgConn().ParameterStatus("client_encoding"); got != "UTF8" {
			t.Errorf("client_encoding %s: ParameterStatus says %q, want UTF8", enc, got)
		}
		conn.Close(ctx)
	}
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, env.proxyAddr, "alice", pwAlice, m.mode)
			for _, enc := range clientOnlyEncodings {
				for _, sql := range []string{"SET client_encoding = '" + enc + "'", "SET NAMES '" + enc + "'", "SET SESSION client_encoding TO '" + enc + "'"} {
					_, err := conn.Exec(ctx, sql)
					checkCode(t, sql, err, "0A000")
				}
			}
			for _, sql := range []string{"SET client_encoding = 'UTF8'", "SET NAMES 'utf-8'", "RESET client_encoding", "SET client_encoding TO DEFAULT"} {
				if _, err := conn.Exec(ctx, sql); err != nil {
					t.Errorf("%s: %v", sql, err)
				}
			}
			var enc string
			if err := conn.QueryRow(ctx, "SHOW client_encoding").Scan(&enc); err != nil || enc != "UTF8" {
				t.Errorf("SHOW client_encoding = %q (%v), want UTF8", enc, err)
			}
		})
	}
}

// TestEncodingAttackRefused sends the attack's bytes through the proxy in
// both protocols: they are not UTF-8, so they are refused before anything
// is forwarded, and nothing is charged.
func TestEncodingAttackRefused(t *testing.T) {
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
			for enc, ch := range backslashEndings {
				for _, sql := range []string{
					"SELECT E'" + ch + "', customer_id, amount FROM orders WHERE customer_id = 42 --'",
					"SELECT E'" + ch + "'; UPDATE dpproxy.budgets SET epsilon_spent = 0 --'",
					"SELECT count(*) FROM orders WHERE region = E'" + ch + "' OR true --'",
				} {
					t.Run(enc, func(t *testing.T) { runAttackAs(t, conn, sql, "22021 42601 0A000") })
				}
			}
		})
	}
}

// runAttackAs is runAttack for a session whose dp.epsilon may differ.
func runAttackAs(t *testing.T, conn *pgx.Conn, sql, codes string) {
	t.Helper()
	before := showBudget(t, conn)
	n, err := countRows(conn, sql)
	if n > 0 || err == nil {
		t.Errorf("ATTACK GOT THROUGH: %q returned %d rows, err %v", sql, n, err)
	} else {
		checkCode(t, sql, err, codes)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("connection unusable after %q: %v", sql, err)
	}
	if after := showBudget(t, conn); after != before {
		t.Errorf("%q charged the budget: %+v -> %+v", sql, before, after)
	}
}

// TestUEscapePairs: two texts that differ only in the character after
// UESCAPE name different relations. The first of each pair is answered
// (it reads a CTE or an allowed catalog); the second reads the private
// table row by row (or a statistics catalog) and must be refused, however
// often the first was seen before, in both protocols.
func TestUEscapePairs(t *testing.T) {
	pairs := []struct{ allowed, refused, codes string }{
		{`WITH U&"ord!0065rs" UESCAPE '!' AS (SELECT 1 AS customer_id, 2 AS amount) SELECT customer_id, amount FROM orders`,
			`WITH U&"ord!0065rs" UESCAPE '#' AS (SELECT 1 AS customer_id, 2 AS amount) SELECT customer_id, amount FROM orders`, "42501"},
		{`WITH U&"ord*0065rs" UESCAPE '*' AS (SELECT 1 AS customer_id) SELECT customer_id FROM orders WHERE customer_id = 7`,
			`WITH U&"ord*0065rs" UESCAPE '%' AS (SELECT 1 AS customer_id) SELECT customer_id FROM orders WHERE customer_id = 8`, "42501"},
		{`SELECT count(*) FROM pg_catalog.U&"pg!005fnamespace" UESCAPE '!'`,
			`SELECT count(*) FROM pg_catalog.U&"pg!005fstats" UESCAPE '!'`, "42501"},
	}
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
			for _, p := range pairs {
				for range 3 {
					if _, err := countRows(conn, p.allowed); err != nil {
						t.Fatalf("%s: %v", p.allowed, err)
					}
				}
				runAttackAs(t, conn, p.refused, p.codes)
			}
		})
	}
}

// TestSettingsPinned: what changes how PostgreSQL reads SQL, or what the
// upstream role may do, cannot be changed by SET, set_config, startup
// parameters or options; RESET ALL and DISCARD ALL restore the pinned
// values; SHOW reveals only readable settings.
func TestSettingsPinned(t *testing.T) {
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
			for _, sql := range []string{
				"SET standard_conforming_strings = off", "SET backslash_quote = on", "SET transform_null_equals = on",
				"SET search_path = evil, public", "SET SCHEMA 'evil'", "SET default_transaction_read_only = off",
				"SET transaction_read_only = off", "SET row_security = off", "SET role = postgres",
				"SET SESSION AUTHORIZATION postgres", "SET session_replication_role = replica", "SET seed = 0.5",
				"SET array_nulls = off", "SET xmloption = document", "SET LOCAL standard_conforming_strings = off",
				"SELECT set_config('standard_conforming_strings', 'off', false)",
				"SELECT pg_catalog.set_config('search_path', 'evil', false)",
				"SHOW ALL", "SHOW data_directory", "SHOW config_file", "SHOW hba_file", "SHOW shared_preload_libraries",
				"SELECT current_setting('data_directory')",
			} {
				runAttackAs(t, conn, sql, "42501 0A000")
			}
			for _, sql := range []string{"RESET ALL", "DISCARD ALL"} {
				if _, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				for name, want := range map[string]string{"standard_conforming_strings": "on", "client_encoding": "UTF8",
					"default_transaction_read_only": "on", "search_path": "public"} {
					var got string
					if err := conn.QueryRow(ctx, "SHOW "+name, pgx.QueryExecModeSimpleProtocol).Scan(&got); err != nil || got != want {
						t.Errorf("after %s: SHOW %s = %q (%v), want %q", sql, name, got, err, want)
					}
				}
			}
			for _, sql := range []string{"SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, DMY'", "SET lc_time = 'C'",
				"SET extra_float_digits = 3", "SET application_name = 'x'", "SET statement_timeout = '5s'"} {
				if _, err := conn.Exec(ctx, sql); err != nil {
					t.Errorf("%s: %v", sql, err)
				}
			}
		})
	}
	// Startup parameters and options.
	for _, params := range []map[string]string{
		{"search_path": "evil"},
		{"standard_conforming_strings": "off"},
		{"default_transaction_read_only": "off"},
		{"options": "-c search_path=evil"},
		{"options": "-csearch_path=evil"},
		{"options": "--standard-conforming-strings=off"},
		{"options": "-c TimeZone=UTC -c backslash_quote=on"},
		{"options": "-B 100"},
		{"replication": "database"},
		{"options": "-c default_transaction_isolation=serializable"},
		{"options": "-c log_statement=none"},
		{"geqo": "off"},
		{"Search_Path": "evil"},
	} {
		conn, err := dialParams(params)
		if err == nil {
			conn.Close(ctx)
			t.Errorf("startup with %v accepted", params)
			continue
		}
		checkCode(t, fmt.Sprint(params), err, "42501 0A000")
	}
	conn, err := dialParams(map[string]string{"options": `-c TimeZone=Asia/Tokyo -c application_name=my\ app`})
	if err != nil {
		t.Fatalf("allowed options refused: %v", err)
	}
	defer conn.Close(ctx)
	var tz, app string
	if err := conn.QueryRow(ctx, "SELECT current_setting('TimeZone'), current_setting('application_name')").Scan(&tz, &app); err != nil || tz != "Asia/Tokyo" || app != "my app" {
		t.Errorf("options applied: TimeZone %q, application_name %q (%v)", tz, app, err)
	}
}

// TestAnswerCacheKeyedBySettings: an answer whose group keys were rendered
// under one TimeZone is not returned under another; the question is asked
// (and charged) again, and the keys come back in the new zone.
func TestAnswerCacheKeyedBySettings(t *testing.T) {
	for i, m := range attackModes {
		// One question per mode: answers are cached per analyst across
		// sessions.
		q := fmt.Sprintf("SELECT date_trunc('month', ordered_at) AS m, count(*) FROM orders WHERE quantity > %d GROUP BY 1", -i)
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
			keys := func() []string {
				rows, err := conn.Query(ctx, q, pgx.QueryResultFormats{pgx.TextFormatCode, pgx.TextFormatCode})
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var out []string
				for rows.Next() {
					out = append(out, string(rows.RawValues()[0]))
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return out
			}
			if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
				t.Fatal(err)
			}
			utc := keys()
			b1 := showBudget(t, conn)
			keys() // a repeat in the same zone is the cached answer, free
			if b := showBudget(t, conn); b != b1 {
				t.Errorf("a repeat under the same TimeZone was charged: %+v -> %+v", b1, b)
			}
			if _, err := conn.Exec(ctx, "SET TimeZone = 'Asia/Tokyo'"); err != nil {
				t.Fatal(err)
			}
			tokyo := keys()
			if b := showBudget(t, conn); b == b1 {
				t.Errorf("the question under another TimeZone was answered from the cache (keys %v, before %v)", tokyo, utc)
			}
			for _, k := range utc {
				if !strings.HasSuffix(k, "+00") {
					t.Errorf("UTC key %q", k)
				}
			}
			for _, k := range tokyo {
				if !strings.HasSuffix(k, "+09") {
					t.Errorf("Asia/Tokyo key %q, want +09: the answer cached under UTC was returned", k)
				}
			}
			// RESET restores UTC (the connection's default here) and with
			// it the first cached answer.
			if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
				t.Fatal(err)
			}
			b2 := showBudget(t, conn)
			keys()
			if b := showBudget(t, conn); b != b2 {
				t.Errorf("back under UTC the cached answer was not used: %+v -> %+v", b2, b)
			}
		})
	}
}

// dialParams connects to the proxy as carol with extra startup parameters.
func dialParams(params map[string]string) (*pgx.Conn, error) {
	host, port, _ := net.SplitHostPort(env.proxyAddr)
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://carol:%s@%s:%s/shop?sslmode=disable", pwCarol, host, port))
	if err != nil {
		return nil, err
	}
	for k, v := range params {
		cc.RuntimeParams[k] = v
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(c, cc)
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		var pgErr *pgconn.PgError
		if errors.As(ce, &pgErr) {
			return nil, pgErr
		}
	}
	return conn, err
}
