package proxy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/rewrite"
)

// TestShapeCache: a pass-through SELECT that is sent as written is reused
// for the same tokens with other constants, and sent with the new text;
// nothing whose checks read a constant, nothing masked and nothing private
// is ever answered from a shape.
func TestShapeCache(t *testing.T) {
	srv := benchServer(t)
	first, err := srv.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = 1")
	if err != nil {
		t.Fatal(err)
	}
	if !first[0].Verbatim || first[0].SQL != "SELECT abalance FROM pgbench_accounts WHERE aid = 1" {
		t.Fatalf("simple public query: Verbatim=%v SQL=%q, want the text as written", first[0].Verbatim, first[0].SQL)
	}
	const second = "SELECT abalance FROM pgbench_accounts WHERE aid = 4711"
	got, err := srv.analyze(second)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].SQL != second {
		t.Errorf("shape hit sends %q, want the new text %q", got[0].SQL, second)
	}
	if srv.shapes.Len() != 1 {
		t.Errorf("shape cache holds %d entries, want 1", srv.shapes.Len())
	}
	// Texts answered by their shape are not kept by text as well: a
	// client filling in constants would otherwise flood the text cache
	// with texts never seen again, evicting the analyses worth keeping.
	before := srv.parsed.Len()
	for i := range 100 {
		if _, err := srv.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = " + strconv.Itoa(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.parsed.Len(); n != before {
		t.Errorf("text cache grew from %d to %d entries on shape hits", before, n)
	}

	// A check that reads a constant: an allowed setting must not make a
	// refused one allowed.
	if _, err := srv.analyze("SELECT current_setting('server_version')"); err != nil {
		t.Fatalf("readable setting refused: %v", err)
	}
	if _, err := srv.analyze("SELECT current_setting('data_directory')"); err == nil {
		t.Errorf("current_setting('data_directory') accepted after current_setting('server_version'): the shape cache reused a check that reads a constant")
	}

	// Masked catalogs are always rewritten.
	for _, q := range []string{"SELECT reltuples FROM pg_class WHERE relname = 'a'", "SELECT reltuples FROM pg_class WHERE relname = 'b'"} {
		st, err := srv.analyze(q)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Verbatim || !strings.Contains(st[0].SQL, "-1") {
			t.Errorf("%s: sent as %q, want the masked rewrite", q, st[0].SQL)
		}
	}

	// An unqualified pg_ name the upstream's catalog lacks would resolve
	// to public upstream: never sent as written.
	if st, err := srv.analyze("SELECT 1 FROM pg_made_up WHERE 1 = 2"); err == nil && st[0].Verbatim {
		t.Errorf("pg_made_up (not in pg_catalog) sent as written: %q", st[0].SQL)
	}

	// Private queries are never shape-cached: constants are part of the
	// question (the answer cache keys on them).
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

	// A refusal is never cached under the shape of an allowed statement.
	if _, err := srv.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = 1; DELETE FROM events"); err == nil {
		t.Errorf("multi-statement with a DELETE accepted")
	}
}

func TestQueryShape(t *testing.T) {
	same := [][2]string{
		{"SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = 99999"},
		{"SELECT a FROM t WHERE b = 'x'", "SELECT a FROM t WHERE b = 'it''s'"},
		{`SELECT "T"."a" FROM "T" WHERE b = 7`, `SELECT "T"."a" FROM "T" WHERE b = 8`},
	}
	// Texts the shape cache must not handle at all: their constants are
	// not plainly delimited, so they are always analysed in full.
	for _, q := range []string{
		"SELECT 1 -- comment", "SELECT /* c */ 1", "SELECT $1", "SELECT $$a$$", `SELECT E'a\'b'`,
		"SELECT B'101'", "SELECT X'1F'", `SELECT U&'d\0061t'`, "SELECT N'x'", "SELECT 1.5", "SELECT 1e5",
		"SELECT 0x1F", "SELECT 1_000", "SELECT 12345678901", `SELECT "a""b"`, "SELECT 'unterminated",
		// A NUL ends the text for PostgreSQL's parser (a C string), so the
		// analyzer refuses it; it must never share a shape with a text
		// without one (and the blanked constants are written with NULs).
		"SELECT '\x00' FROM t", "SELECT \x00S\x00 FROM t", "SELECT 1\x00",
	} {
		if k, ok := queryShape(q); ok {
			t.Errorf("queryShape(%q) = %q, want no shape", q, k)
		}
	}
	for _, p := range same {
		a, _ := queryShape(p[0])
		b, _ := queryShape(p[1])
		if a != b {
			t.Errorf("queryShape(%q) != queryShape(%q)", p[0], p[1])
		}
	}
	differ := [][2]string{
		{"SELECT 'a'''", "SELECT 'a', ''"},
		{"SELECT t1", "SELECT t2"},
		{"SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = -1"},
		{"SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = '1'"},
		{"SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = $1"},
		{"SELECT a FROM t", "SELECT a FROM u"},
		{"SELECT a FROM t", `SELECT a FROM "T"`},
		{"SELECT 1", "SELECT 1; SELECT 2"},
	}
	for _, p := range differ {
		a, _ := queryShape(p[0])
		b, _ := queryShape(p[1])
		if a == b {
			t.Errorf("queryShape(%q) == queryShape(%q)", p[0], p[1])
		}
	}
}

// FuzzShapeCache checks the shape cache's premise: when two texts have the
// same shape and one is a Verbatim pass-through statement, analysing the
// other in full reaches the same decision (allowed, sent as written). If it
// did not, the cache would answer a statement the analyzer refuses.
func FuzzShapeCache(f *testing.F) {
	for _, p := range [][2]string{
		{"SELECT abalance FROM pgbench_accounts WHERE aid = 1", "SELECT abalance FROM pgbench_accounts WHERE aid = 2"},
		{"SELECT current_setting('server_version')", "SELECT current_setting('data_directory')"},
		{"SELECT 'a' FROM pgbench_accounts", "SELECT 'x''; DELETE FROM events; --' FROM pgbench_accounts"},
		{"SELECT relname FROM pg_class WHERE relname = 'a'", "SELECT relname FROM pg_class WHERE relname = 'b'"},
		{"SELECT 1 LIMIT 1", "SELECT 1 LIMIT 2"},
		{"SELECT typname FROM pg_type WHERE oid = 25", "SELECT typname FROM pg_type WHERE oid = 999999999"},
	} {
		f.Add(p[0], p[1])
	}
	srv := benchServer(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		sa, oka := queryShape(a)
		sb, okb := queryShape(b)
		if !oka || !okb || sa != sb {
			return
		}
		first, err := srv.analyzer.Analyze(a)
		if err != nil || len(first) != 1 || !first[0].Verbatim {
			return
		}
		second, err := srv.analyzer.Analyze(b)
		if err != nil {
			t.Fatalf("%q is Verbatim, %q has the same shape but is refused: %v", a, b, err)
		}
		if len(second) != 1 || !second[0].Verbatim || second[0].Kind != first[0].Kind {
			t.Fatalf("%q is Verbatim, %q has the same shape but is analysed differently", a, b)
		}
	})
}
