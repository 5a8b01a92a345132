package rewrite

import (
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestArithmeticCannotOverflow: numeric overflows beyond about 1e131072
// (and past 16383 digits after the point), only for the rows an
// expression is evaluated on. With count(CASE WHEN <condition on one
// person> THEN amount * 1e131071 END) the query failed exactly when the
// condition held for some row: one exact bit per query at any ε (found by
// a red-team run). Every arithmetic over private columns, in any position,
// must have a range and scale that cannot leave numeric's, whatever the
// rows hold.
func TestArithmeticCannotOverflow(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, q := range []string{
		"SELECT count(CASE WHEN customer_id = 3 AND amount > 73 THEN amount * 1e131071 END) FROM orders",
		"SELECT count(DISTINCT CASE WHEN amount > 7 THEN amount * 1e131071 END) FROM orders",
		"SELECT CASE WHEN amount > 600 THEN amount * 1e131071 END AS k, count(*) FROM orders GROUP BY 1",
		"SELECT sum(CASE WHEN amount > 600 THEN amount * 1e200 ELSE 0 END) FROM orders",
		"SELECT count(CASE WHEN amount > $1 THEN amount * $2 END) FROM orders",
		"SELECT count(amount * 1e-50) FROM orders",
		"SELECT count(amount * 1e99 * 1e99) FROM orders",
		"SELECT count(((((((((((((((((amount * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) * 2) FROM orders",
	} {
		_, err := a.Analyze(q)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != pgerr.InsufficientPrivilege {
			t.Errorf("Analyze(%q) = %v, want a 42501 refusal", q, err)
		}
	}
	for _, q := range []string{
		// discount is an unconstrained numeric (amount is numeric(10,2),
		// whose scale its type bounds: not rounded).
		"SELECT sum(discount * 2 + 1) FROM orders",
		"SELECT count(CASE WHEN discount > 7 THEN discount * 1.5 END) FROM orders",
		"SELECT avg(discount / 100) FROM orders",
	} {
		st, err := a.Analyze(q)
		if err != nil {
			t.Errorf("Analyze(%q): %v", q, err)
			continue
		}
		if !strings.Contains(st[0].Plan.SQL, "round(") {
			t.Errorf("Analyze(%q): a non-integer column is not rounded before arithmetic: %s", q, st[0].Plan.SQL)
		}
	}
}

func TestDecimalScale(t *testing.T) {
	for lit, want := range map[string]int{"1": 0, "1.25": 2, "1e-5": 5, "1.5e3": 0, "1.5E-3": 4, "0.000": 3, "1e5": 0} {
		if got := decimalScale(lit); got != want {
			t.Errorf("decimalScale(%q) = %d, want %d", lit, got, want)
		}
	}
}

// TestNodesOutsideTheFunctionAllowlist: expressions that pg_query parses
// as nodes of their own rather than function calls cannot skip the
// function allowlist (red team: JSON_ARRAY(...) reached a PostgreSQL 15
// upstream as a call of any function named json_array).
func TestNodesOutsideTheFunctionAllowlist(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, q := range []string{
		"SELECT JSON_ARRAY(1, 2)", "SELECT JSON_OBJECT('a': 1)", "SELECT JSON_ARRAYAGG(oid) FROM pg_class",
		"SELECT '{}' IS JSON", "SELECT JSON_ARRAY(SELECT 1)",
		`SELECT XMLPARSE(DOCUMENT '<a/>')`, "SELECT XMLSERIALIZE(CONTENT '<a/>' AS text)", "SELECT XMLELEMENT(NAME a)",
	} {
		if _, err := a.Analyze(q); err == nil {
			t.Errorf("Analyze(%q) accepted", q)
		}
	}
}

// TestPortableAndDeparseSafe: statements pg_query accepts but whose
// deparse would crash the process (SIGSEGV inside pg_query's C deparser,
// found by FuzzDifferential) or carry PostgreSQL 16-only syntax to an
// older upstream are refused with a reason.
func TestPortableAndDeparseSafe(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, q := range []string{
		"SET TIME ZONE INTERVAL '+01:00'",
		"SET LOCAL TIME ZONE INTERVAL '-08:00'",
		"SET TIME ZONE INTERVAL '+01:00' HOUR TO MINUTE",
		"SELECT 0x8000000000000000",
		"SELECT 1_000.5",
		"SELECT pg_catalog.format_type(0x7FFFFFFFFFFFFFFF, NULL)",
		"SELECT * FROM (SELECT name FROM products)",
		"SELECT count(*) FROM (SELECT * FROM orders)",
		`SET LOCAL "DateStyle" TO 1_000.5`,
	} {
		if _, err := a.Analyze(q); err == nil {
			t.Errorf("Analyze(%q) accepted", q)
		}
	}
	for _, q := range []string{"SET TIME ZONE 'UTC'", "SET TIME ZONE LOCAL", "SELECT 0x1F, 1_000", "SELECT * FROM (SELECT name FROM products) p"} {
		if _, err := a.Analyze(q); err != nil {
			t.Errorf("Analyze(%q): %v", q, err)
		}
	}
}

// TestRedTeamSecondPass holds the data-dependent failures a second red-team
// run found in the totality rules: width_bucket with count 2147483647
// (count+1 overflows only for values past the last bound), and an IN list
// mixing date and timestamptz (PostgreSQL converts the date per row, and
// the conversion can fail).
func TestRedTeamSecondPass(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, q := range []string{
		"SELECT count(*) FILTER (WHERE width_bucket(amount, 0, 371.25, 2147483647) > 0) FROM orders WHERE customer_id = 1",
		"SELECT width_bucket(amount, 500, 0, 2147483647) AS b, count(*) FROM orders GROUP BY 1",
		"SELECT count(*) FILTER (WHERE ordered_at IN ('294277-01-01'::date, '2020-01-01'::timestamptz)) FROM orders WHERE customer_id = 1",
		"SELECT sum(CASE WHEN ordered_at IN ('294277-01-01'::date, '2020-01-01'::timestamptz) THEN 1 ELSE 0 END) FROM orders",
		"SELECT count(*) FILTER (WHERE ordered_at IN (TIMESTAMP '294276-12-31 23:00:00', TIMESTAMPTZ '2020-01-01')) FROM orders",
	} {
		if _, err := a.Analyze(q); err == nil {
			t.Errorf("Analyze(%q) accepted", q)
		}
	}
	for _, q := range []string{
		"SELECT width_bucket(amount, 0, 500, 2147483646) AS b, count(*) FROM orders GROUP BY 1",
		"SELECT count(*) FROM orders WHERE region IN ('north', 'south')",
	} {
		if _, err := a.Analyze(q); err != nil {
			t.Errorf("Analyze(%q): %v", q, err)
		}
	}
}
