package proxy

import (
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/dpproxy/dpproxy/rewrite"
)

// TestParseCache: an analysis is reused only for the very same text, and
// what is sent upstream is always the proxy's own deparse of what it
// checked.
func TestParseCache(t *testing.T) {
	srv := benchServer(t)
	const q = "SELECT abalance FROM pgbench_accounts WHERE aid = 1"
	first, err := srv.analyze(q)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].SQL != "SELECT abalance FROM public.pgbench_accounts WHERE aid = 1" {
		t.Errorf("analyze(%q).SQL = %q, want the qualified deparse", q, first[0].SQL)
	}
	again, err := srv.analyze(q)
	if err != nil || again[0] != first[0] {
		t.Errorf("the same text was analysed again instead of read from the cache")
	}
	other, err := srv.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = 4711")
	if err != nil {
		t.Fatal(err)
	}
	if other[0] == first[0] || other[0].SQL != "SELECT abalance FROM public.pgbench_accounts WHERE aid = 4711" {
		t.Errorf("a text with another constant shares an analysis: %q", other[0].SQL)
	}
	// Long texts are not kept, so the cache's memory stays bounded.
	before := srv.parsed.Len()
	long := "SELECT 1 WHERE 1 = 1" + strings.Repeat(" AND 1 = 1", parseCacheMaxText/10)
	if _, err := srv.analyze(long); err != nil {
		t.Fatal(err)
	}
	if srv.parsed.Len() != before {
		t.Errorf("a text of %d bytes was cached", len(long))
	}

	// Private queries: constants are part of the question.
	a, err := srv.analyze("SELECT count(*) FROM events WHERE val > 1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := srv.analyze("SELECT count(*) FROM events WHERE val > 2")
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Kind != rewrite.KindPrivate || a[0].Key == b[0].Key {
		t.Errorf("two private questions share a key: %q", a[0].Key)
	}
}

// TestUEscapeCannotReuseAnAnalysis is the regression test of the shape
// cache hole (issue 11): U&"..." UESCAPE 'c' makes the escape character a
// string constant, so blanking constants made these two texts one shape.
// The first names a CTE "events"; the second a CTE "ev!0065nts" and reads
// the private table events row by row. Each must get its own verdict, and
// what is sent upstream is the deparse, in which no UESCAPE remains.
func TestUEscapeCannotReuseAnAnalysis(t *testing.T) {
	srv := benchServer(t)
	pairs := [][2]string{
		{`WITH U&"ev!0065nts" UESCAPE '!' AS (SELECT 1 AS val) SELECT val FROM events`,
			`WITH U&"ev!0065nts" UESCAPE '#' AS (SELECT 1 AS val) SELECT val FROM events`},
		{`WITH U&"ev*0065nts" UESCAPE '*' AS (SELECT 1 AS unit_id, 2 AS val) SELECT unit_id, val FROM events WHERE val = 1`,
			`WITH U&"ev*0065nts" UESCAPE '+' AS (SELECT 1 AS unit_id, 2 AS val) SELECT unit_id, val FROM events WHERE val = 2`},
		{`SELECT 1 FROM pg_catalog.U&"pg!005fclass" UESCAPE '!'`, `SELECT 1 FROM pg_catalog.U&"pg!005fstats" UESCAPE '!'`},
	}
	for _, p := range pairs {
		allowed, err := srv.analyze(p[0])
		if err != nil {
			t.Fatalf("analyze(%q): %v", p[0], err)
		}
		for _, st := range allowed {
			if st.Kind == rewrite.KindPassThrough && strings.Contains(strings.ToUpper(st.SQL), "UESCAPE") {
				t.Errorf("analyze(%q).SQL = %q: the client's escape syntax reached the upstream text", p[0], st.SQL)
			}
		}
		if got, err := srv.analyze(p[1]); err == nil && got[0].Kind == rewrite.KindPassThrough {
			t.Errorf("analyze(%q) after %q = pass-through %q, want a refusal", p[1], p[0], got[0].SQL)
		}
	}
}

// TestPassThroughSQLIsTheCheckedTree: for every accepted pass-through
// statement, the text sent upstream parses (with PostgreSQL's own parser,
// as pg_query embeds it) back to exactly the tree the proxy checked.
func TestPassThroughSQLIsTheCheckedTree(t *testing.T) {
	srv := benchServer(t)
	for i, q := range []string{
		"SELECT abalance FROM pgbench_accounts WHERE aid = 1",
		"select E'a\\'b', 'it''s', $$x$$, U&'d\\0061t', X'1F', B'101', 0x1F, 1_000 from pgbench_accounts",
		"SET TimeZone = 'UTC'", "SET DateStyle TO 'ISO, MDY'", "begin", "commit", "show TimeZone",
		"SELECT /* a /* nested */ comment */ 1 -- trailing",
		`SELECT U&"ab!0063" UESCAPE '!' FROM (SELECT 1 AS abc) s`,
	} {
		stmts, err := srv.analyze(q)
		if err != nil {
			t.Fatalf("%d: analyze(%q): %v", i, q, err)
		}
		for _, st := range stmts {
			if st.Kind != rewrite.KindPassThrough {
				continue
			}
			if st.SQL == q {
				t.Errorf("analyze(%q).SQL is the client's text, want the proxy's deparse", q)
			}
			got, err := pg_query.Parse(st.SQL)
			if err != nil {
				t.Fatalf("analyze(%q).SQL = %q does not parse: %v", q, st.SQL, err)
			}
			// Names may have been qualified and catalogs masked; the
			// deparse of the deparse must be stable.
			again, _ := pg_query.Deparse(got)
			if again != st.SQL {
				t.Errorf("deparse of %q is not a fixed point: %q", st.SQL, again)
			}
		}
	}
}

// FuzzParseCache compares the cache's verdict with a fresh analysis of the
// same text, whatever was analysed before: the same error or none, and the
// same statements with the same upstream SQL.
func FuzzParseCache(f *testing.F) {
	for _, p := range [][2]string{
		{"SELECT abalance FROM pgbench_accounts WHERE aid = 1", "SELECT abalance FROM pgbench_accounts WHERE aid = 2"},
		{"SELECT current_setting('server_version')", "SELECT current_setting('data_directory')"},
		{"SELECT 'a' FROM pgbench_accounts", "SELECT 'x''; DELETE FROM events; --' FROM pgbench_accounts"},
		{`WITH U&"ev!0065nts" UESCAPE '!' AS (SELECT 1 AS val) SELECT val FROM events`, `WITH U&"ev!0065nts" UESCAPE '#' AS (SELECT 1 AS val) SELECT val FROM events`},
		{"SELECT relname FROM pg_class WHERE relname = 'a'", "SELECT relname FROM pg_class WHERE relname = 'b'"},
		{"SELECT count(*) FROM events WHERE val > 1", "SELECT count(*) FROM events WHERE val > 2"},
		{"SELECT '\x00' FROM pgbench_accounts", "SELECT '' FROM pgbench_accounts"},
	} {
		f.Add(p[0], p[1])
	}
	srv := benchServer(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, q := range []string{a, b, a} {
			cached, cerr := srv.analyze(q)
			fresh, ferr := srv.analyzer.Analyze(q)
			if (cerr == nil) != (ferr == nil) {
				t.Fatalf("analyze(%q): cache says err=%v, a fresh analysis err=%v", q, cerr, ferr)
			}
			if len(cached) != len(fresh) {
				t.Fatalf("analyze(%q): cache has %d statements, fresh %d", q, len(cached), len(fresh))
			}
			for i := range cached {
				if cached[i].Kind != fresh[i].Kind || cached[i].SQL != fresh[i].SQL || cached[i].Key != fresh[i].Key {
					t.Fatalf("analyze(%q) statement %d: cache (%v, %q) != fresh (%v, %q)", q, i, cached[i].Kind, cached[i].SQL, fresh[i].Kind, fresh[i].SQL)
				}
				if cached[i].Plan != nil && cached[i].Plan.SQL != fresh[i].Plan.SQL {
					t.Fatalf("analyze(%q): cached plan differs from a fresh one", q)
				}
			}
		}
	})
}
