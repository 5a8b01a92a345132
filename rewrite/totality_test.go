package rewrite

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// testColumnTypes is what ColumnTypesSQL would read for the tables of
// testConfig (internal/testconf/catalog.yaml: the columns of
// testRelations, and more of other types).
var testColumnTypes = func() map[string]string {
	_, types := testconf.Catalog()
	return types
}()

// renderTotality prints a plan's hoisted constants and type checks for
// the golden files.
func renderTotality(b *strings.Builder, p *Plan) {
	for _, c := range p.Consts {
		if c.Param == 0 {
			fmt.Fprintf(b, "-- const (checked, inline): %s\n", c.SQL)
		} else {
			fmt.Fprintf(b, "-- const $%d: %s\n", c.Param, c.SQL)
		}
	}
	if p.ConstSQL != "" {
		fmt.Fprintf(b, "-- const sql: %s\n", p.ConstSQL)
	}
	for _, c := range p.TypeChecks {
		pattern := ""
		if c.Pattern {
			pattern = " (pattern checked before the charge)"
		}
		fmt.Fprintf(b, "-- type check $%d %s: %s%s\n", c.Param, c.What, strings.Join(c.Types, " "), pattern)
	}
}

// checkConstantsHoisted: in a rewritten query, every subexpression
// without a column is a literal PostgreSQL converts when it parses or
// plans the query, a parameter, or the proxy's seed; anything else (a
// stable cast, to_date, now()) would be evaluated per row, so whether it
// fails would depend on the rows (issue 12). Each hoisted constant is
// bound, and the constant statement has one column per constant.
func checkConstantsHoisted(t testing.TB, src string, p *Plan, tree *pg_query.ParseResult) {
	t.Helper()
	seed := p.SeedParam()
	onlySeed := func(n *pg_query.Node) bool {
		ok := true
		replaceNodes(n, func(x *pg_query.Node) bool {
			if pr := x.GetParamRef(); pr != nil && int(pr.Number) != seed {
				ok = false
			}
			if fc := x.GetFuncCall(); fc != nil {
				ok = false
			}
			return !ok
		})
		return ok
	}
	replaceNodes(tree.Stmts[0].Stmt, func(x *pg_query.Node) bool {
		if x.GetSelectStmt() != nil || x.GetRangeSubselect() != nil || x.GetResTarget() != nil || x.GetSortBy() != nil ||
			x.GetRangeVar() != nil || x.GetJoinExpr() != nil || x.GetWindowDef() != nil || x.GetList() != nil || x.GetString_() != nil ||
			x.GetTypeName() != nil || x.GetCaseWhen() != nil {
			return false
		}
		if !isConstant(x) {
			return false
		}
		if _, lit := literalType(x); lit || x.GetParamRef() != nil || onlySeed(x) {
			return true
		}
		t.Errorf("rewrite of %q keeps the constant %s, which PostgreSQL may evaluate per row:\n%s", src, describe(x), p.SQL)
		return true
	})
	bound := 0
	for _, c := range p.Consts {
		if c.Param == 0 {
			continue
		}
		bound++
		if !strings.Contains(p.SQL, fmt.Sprintf("$%d", c.Param)) {
			t.Errorf("rewrite of %q: constant %s is bound to $%d, which the SQL does not use:\n%s", src, c.SQL, c.Param, p.SQL)
		}
	}
	if len(p.Consts) > 0 {
		ct, err := pg_query.Parse(p.ConstSQL)
		if err != nil || len(ct.Stmts) != 1 || len(ct.Stmts[0].Stmt.GetSelectStmt().GetTargetList()) != len(p.Consts) ||
			len(ct.Stmts[0].Stmt.GetSelectStmt().GetFromClause()) != 0 {
			t.Errorf("rewrite of %q: constant statement %q does not select the %d constants and nothing else (%v)", src, p.ConstSQL, len(p.Consts), err)
		}
	}
	if seed != p.NumParams+bound+1 {
		t.Errorf("rewrite of %q: seed $%d after %d parameters and %d constants", src, seed, p.NumParams, bound)
	}
}

// Positions of a private query where an expression is evaluated on the
// rows that reach it; %s is a constant expression of type timestamptz or
// one compared with ordered_at (timestamptz).
var totalityPositions = []struct{ name, sql string }{
	{"where", `SELECT count(*) FROM orders WHERE customer_id = 42 AND ordered_at > %s`},
	{"filter", `SELECT count(*) FILTER (WHERE customer_id = 42 AND ordered_at > %s) FROM orders`},
	{"case result", `SELECT count(CASE WHEN customer_id = 42 THEN %s END) FROM orders`},
	{"case condition", `SELECT count(CASE WHEN ordered_at > %s THEN 1 END) FROM orders`},
	{"simple case", `SELECT count(CASE ordered_at WHEN %s THEN 1 END) FROM orders`},
	{"aggregate argument", `SELECT count(%s) FROM orders`},
	{"count distinct", `SELECT count(DISTINCT CASE WHEN amount > 5 THEN %s END) FROM orders`},
	{"group key", `SELECT CASE WHEN region = 'north' THEN %s END AS k, count(*) FROM orders GROUP BY 1`},
	{"join condition", `SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id AND o.ordered_at > %s`},
	{"in list", `SELECT count(*) FROM orders WHERE ordered_at IN ('2024-01-01', %s)`},
	{"between", `SELECT count(*) FROM orders WHERE ordered_at BETWEEN %s AND '2030-01-01'`},
	{"coalesce", `SELECT count(coalesce(ordered_at, %s)) FROM orders`},
	{"cte", `WITH o AS (SELECT * FROM orders WHERE ordered_at > %s) SELECT count(*) FROM o`},
	{"having aggregate filter", `SELECT region, count(*) FROM orders GROUP BY region HAVING count(*) FILTER (WHERE ordered_at > %s) > 10`},
}

// TestConstantsHoisted: every constant PostgreSQL does not fold (a cast
// through a stable input function, to_date, now(), a parameter cast) is
// hoisted out of the private query, in every position, and bound as a
// parameter; the rewrite keeps no trace of it. On the code before issue
// 12 each of these was printed into the rewritten SQL.
func TestConstantsHoisted(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, c := range []string{
		`'x'::text::date`, `'x'::text::timestamp`, `'x'::text::timestamptz`, `'x'::text::int`, `'x'::text::numeric`,
		`'x'::text::interval`, `'x'::text::bool`, `CAST('x' AS text)::timestamptz`,
		`to_date('x', 'YYYY-MM-DD')`, `to_timestamp('x', 'YYYY')`, `to_number('x', '999')`,
		`$1::text::timestamptz`, `$1::date`, `now() - interval '30 days'`, `current_date - 30`, `current_timestamp`,
		`date_trunc('day', 'x'::text::timestamptz)`, `make_date(2024, 13, 1)`, `'2024-01-01'::date + 1`,
	} {
		for _, pos := range totalityPositions {
			sql := fmt.Sprintf(pos.sql, c)
			stmts, err := a.Analyze(sql)
			if err != nil {
				t.Errorf("%s, %s: Analyze(%q) = %v, want it hoisted", pos.name, c, sql, err)
				continue
			}
			p := stmts[0].Plan
			want, err := deparseExpr(mustExpr(t, c))
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, k := range p.Consts {
				found = found || (k.SQL == want && k.Param > p.NumParams)
			}
			if !found {
				t.Errorf("%s: Analyze(%q) does not hoist %s: consts %+v", pos.name, sql, want, p.Consts)
			}
			if strings.Contains(p.SQL, want) {
				t.Errorf("%s: Analyze(%q) keeps %s in the rewrite:\n%s", pos.name, sql, want, p.SQL)
			}
			tree, err := pg_query.Parse(p.SQL)
			if err != nil {
				t.Fatal(err)
			}
			checkConstantsHoisted(t, sql, p, tree)
		}
	}
}

func mustExpr(t testing.TB, expr string) *pg_query.Node {
	t.Helper()
	tree, err := pg_query.Parse("SELECT " + expr)
	if err != nil {
		t.Fatal(err)
	}
	return tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
}

// TestConstantsRefused: a constant that cannot be evaluated safely before
// the query (it reads the catalog or a sequence, sleeps, draws random
// numbers, changes a setting, names the upstream role, allocates without
// bound, or casts to a type outside the table) is refused with 42501 in
// every position, naming it.
func TestConstantsRefused(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, c := range []struct{ expr, names string }{
		{`'orders'::text::regclass`, "regclass"},
		{`'orders'::regclass`, "regclass"},
		{`pg_sleep(1)`, "pg_sleep"},
		{`random()`, "random"},
		{`nextval('s')`, "nextval"},
		{`set_config('a', 'b', false)`, "set_config"},
		{`current_setting('TimeZone')`, "current_setting"},
		{`repeat('x', 100000000)`, "repeat"},
		{`'{}'::text::json`, "json"},
		{`'1'::text::mydomain`, "mydomain"},
		{`current_user`, "CURRENT_USER"},
		{`'a' ~ 'b'`, "~"},
		{`public.f()`, "f"},
	} {
		for _, pos := range totalityPositions {
			sql := fmt.Sprintf(pos.sql, c.expr)
			_, err := a.Analyze(sql)
			var re *RejectError
			if !errors.As(err, &re) || re.Code != pgerr.InsufficientPrivilege || !strings.Contains(re.Message, c.names) {
				t.Errorf("%s: Analyze(%q) = %v, want 42501 naming %s", pos.name, sql, err, c.names)
			}
		}
	}
}

// TestFoldedConstantsChecked: arithmetic of number literals stays in the
// rewrite (PostgreSQL folds it when planning, and the range check of
// arithmetic over columns needs its value), but it is evaluated before the
// charge too, so an overflow or a division by zero is not charged.
func TestFoldedConstantsChecked(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, c := range []struct{ sql, constant string }{
		{"SELECT count(*) FROM orders WHERE quantity > 2147483647 + 1", "2147483647 + 1"},
		{"SELECT count(*) FILTER (WHERE amount > 1 / 0) FROM orders", "1 / 0"},
		{"SELECT sum(amount * (2 + 3)) FROM orders", "2 + 3"},
		{"SELECT count(*) FROM orders WHERE quantity > 100000::int2", "100000::int2"},
	} {
		stmts, err := a.Analyze(c.sql)
		if err != nil {
			t.Errorf("Analyze(%q): %v", c.sql, err)
			continue
		}
		p := stmts[0].Plan
		if len(p.Consts) != 1 || p.Consts[0].SQL != c.constant || p.Consts[0].Param != 0 {
			t.Errorf("Analyze(%q) consts %+v, want %q checked only", c.sql, p.Consts, c.constant)
		}
		if !strings.Contains(p.SQL, c.constant) {
			t.Errorf("Analyze(%q): %s is not inline:\n%s", c.sql, c.constant, p.SQL)
		}
	}
}

// TestTypeChecks: a parameter or a hoisted constant has a type only when
// the query runs; where that type decides whether PostgreSQL converts
// every row's value (a float8 compared with a numeric column converts the
// column, which fails beyond ±1.8e308), the plan says which types it may
// have, and TypeCheck.Check refuses the others with 42501.
func TestTypeChecks(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, c := range []struct {
		sql       string
		param     int
		ok, notOK []uint32
	}{
		{"SELECT count(*) FROM orders WHERE amount > $1", 1, []uint32{1700, 23, 20}, []uint32{701, 700, 25, 1082}},
		{"SELECT count(*) FROM orders WHERE score > $1", 1, []uint32{701, 700, 23}, []uint32{1700, 25}},
		{"SELECT count(*) FROM orders WHERE ordered_at > now() - interval '1 day'", 1, []uint32{1184, 1114, 1082}, []uint32{1186, 25}},
		{"SELECT count(*) FROM orders WHERE amount > sqrt(2)", 1, []uint32{1700}, []uint32{701}},
		{"SELECT count(*) FROM orders WHERE $1", 1, []uint32{16}, []uint32{23}},
		{"SELECT count(*) FROM orders WHERE region = 'x' AND $1 IS NOT NULL AND 'a' = lower($2)", 3, []uint32{16}, []uint32{25}},
		{"SELECT count(coalesce(amount, $1)) FROM orders", 1, []uint32{1700, 23}, []uint32{701, 25}},
		{"SELECT count(*) FROM orders WHERE region IN ($1, 'south')", 1, []uint32{25, 1043}, []uint32{23}},
		{"SELECT count(*) FROM orders WHERE CASE WHEN region = 'a' THEN $1 ELSE '1' END > amount", 1, []uint32{1700, 20}, []uint32{701}},
	} {
		stmts, err := a.Analyze(c.sql)
		if err != nil {
			t.Errorf("Analyze(%q): %v", c.sql, err)
			continue
		}
		var checks []TypeCheck
		for _, tc := range stmts[0].Plan.TypeChecks {
			if tc.Param == c.param {
				checks = append(checks, tc)
			}
		}
		if len(checks) == 0 {
			t.Errorf("Analyze(%q): no type check on $%d: %+v", c.sql, c.param, stmts[0].Plan.TypeChecks)
			continue
		}
		pass := func(oid uint32) bool {
			for _, tc := range checks {
				if tc.Check(oid) != nil {
					return false
				}
			}
			return true
		}
		for _, oid := range c.ok {
			if !pass(oid) {
				t.Errorf("Analyze(%q): $%d of type %s refused, want it allowed (%+v)", c.sql, c.param, TypeName(oid), checks)
			}
		}
		for _, oid := range c.notOK {
			if pass(oid) {
				t.Errorf("Analyze(%q): $%d of type %s allowed, want it refused (%+v)", c.sql, c.param, TypeName(oid), checks)
			}
		}
	}
	var re *RejectError
	if err := (TypeCheck{Param: 1, Types: []string{"numeric"}, What: "compared with amount (numeric)"}).Check(701); !errors.As(err, &re) || re.Code != pgerr.InsufficientPrivilege {
		t.Errorf("Check(float8) = %v, want a 42501 refusal", err)
	}
}

// TestTotalityDecisions: what the totality table allows on columns, by
// their types, and what it refuses (with 42501, naming the operation).
func TestTotalityDecisions(t *testing.T) {
	a := newTestAnalyzer(t)
	ok := []string{
		"SELECT count(*) FROM orders WHERE amount > 1.5",
		"SELECT count(*) FROM orders WHERE score > 1.5",                     // the numeric literal is converted once
		"SELECT count(*) FROM orders WHERE quantity > 1e10",                 // the integer column becomes numeric
		"SELECT count(*) FROM orders WHERE created_at < ordered_at",         // cross-type, overflow-safe
		"SELECT count(*) FROM orders WHERE local_time < '2024-01-01'",       // literal takes the column's type
		"SELECT count(*) FROM orders WHERE status = 'paid'",                 // enum
		"SELECT count(*) FROM orders WHERE note LIKE 'a%' AND paid",         // varchar, bool
		"SELECT count(*) FROM orders WHERE ordered_at::date = '2024-01-01'", // timestamptz -> date is total
		"SELECT count(*) FROM orders WHERE quantity::numeric > 1",
		"SELECT count(*) FROM orders WHERE amount::text LIKE '1%'",
		"SELECT count(*) FROM orders WHERE lower(region) = 'north' AND upper(note) <> 'X'",
		"SELECT count(*) FROM orders WHERE extract(hour FROM ordered_at) = 3",
		"SELECT count(*) FROM orders WHERE date_trunc('month', ordered_at) = '2024-03-01'",
		"SELECT count(*) FROM orders WHERE ordered_at IS DISTINCT FROM '2024-01-01'",
		"SELECT date_trunc('week', created_at) AS w, count(*) FROM orders GROUP BY 1",
		"SELECT date_trunc('week', local_time) AS w, count(*) FROM orders GROUP BY 1",
		"SELECT date_trunc('quarter', local_time) AS w, count(*) FROM orders GROUP BY 1",
		"SELECT extract(isodow FROM created_at) AS d, count(*) FROM orders GROUP BY 1",
		"SELECT date_part('hour', local_time) AS h, count(*) FROM orders GROUP BY 1",
		"SELECT extract(timezone_hour FROM ordered_at) AS z, count(*) FROM orders GROUP BY 1",
		"SELECT count(CASE WHEN paid THEN amount END), sum(CASE WHEN paid THEN amount ELSE 0.5 END) FROM orders",
		"SELECT count(coalesce(region, note)) FROM orders",
		"SELECT count((amount > 5)::int) FROM orders",
		"SELECT count(tags) FROM orders", // reading any type
		// Issue 14: what tools write, total by type.
		"SELECT count(*) FROM orders WHERE amount / 2 > 3",                       // numeric(10,2) / constant
		"SELECT count(*) FROM orders WHERE amount * quantity > 100",              // numeric(10,2) * int4 <= 10^8 * 2^31
		"SELECT count(*) FROM orders WHERE quantity::numeric * product_id > 100", // int4 as numeric * int4
		"SELECT count(*) FROM orders WHERE quantity / 2 > 1",                     // integer division, as written
		"SELECT CAST(extract(month FROM created_at) AS integer) AS m, count(*) FROM orders GROUP BY 1",
		"SELECT CAST(extract(year FROM ordered_at) AS integer) AS y, count(*) FROM orders GROUP BY 1",
		"SELECT floor(extract(epoch FROM ordered_at) / 60) * 60 AS t, count(*) FROM orders GROUP BY 1",
		"SELECT floor((amount - 0) / 50) * 50 AS b, count(*) FROM orders GROUP BY 1",
		"SELECT CAST((date_trunc('week', CAST((created_at + INTERVAL '1 day') AS date)) + INTERVAL '-1 day') AS date) AS w, count(*) FROM orders GROUP BY 1",
		"SELECT count(*) FROM orders WHERE email LIKE $1",
	}
	for _, sql := range ok {
		if _, err := a.Analyze(sql); err != nil {
			t.Errorf("Analyze(%q) = %v, want it accepted", sql, err)
		}
	}
	refused := []struct{ sql, names string }{
		{"SELECT count(*) FROM orders WHERE amount > 1.5::float8", "comparing amount (numeric)"},
		{"SELECT count(*) FROM orders WHERE amount > score", "comparing amount (numeric) with score (float8)"},
		{"SELECT count(*) FROM orders WHERE created_at::timestamp > '2024-01-01'", "created_at (date) to timestamp"},
		{"SELECT count(*) FROM orders WHERE ordered_at::timestamp > '2024-01-01'", "to timestamp"},
		{"SELECT count(*) FROM orders WHERE amount::int > 1", "amount (numeric) to int4"},
		{"SELECT count(*) FROM orders WHERE quantity::int2 > 1", "to int2"},
		{"SELECT count(*) FROM orders WHERE score::float4 > 1", "to float4"},
		{"SELECT count(*) FROM orders WHERE amount::numeric(5,2) > 1", "numeric"},
		{"SELECT count(*) FROM orders WHERE region::date > '2024-01-01'", "region (text) to date"},
		{"SELECT count(*) FROM orders WHERE lower(quantity::text) = 'x' AND lower(amount) = 'x'", "lower of amount (numeric)"},
		{"SELECT count(*) FROM orders WHERE quantity LIKE '1%'", "LIKE on quantity (int4)"},
		{"SELECT count(*) FROM orders WHERE tags = '{}'", "comparing tags (_text)"},
		{"SELECT extract(hour FROM created_at) AS h, count(*) FROM orders GROUP BY 1", "valid for type date"},
		{"SELECT extract(timezone FROM local_time) AS h, count(*) FROM orders GROUP BY 1", "valid for type timestamp"},
		{"SELECT date_part('year', created_at) AS y, count(*) FROM orders GROUP BY 1", "use extract"},
		{"SELECT date_trunc('days', ordered_at) AS d, count(*) FROM orders GROUP BY 1", "constant unit"},
		{"SELECT date_trunc('day', ordered_at, 'UTC') AS d, count(*) FROM orders GROUP BY 1", "date_trunc"},
		{"SELECT date_trunc('day', region) AS d, count(*) FROM orders GROUP BY 1", "region (text)"},
		{"SELECT count(CASE WHEN paid THEN created_at ELSE ordered_at END) FROM orders", "the branches of CASE have types date, timestamptz"},
		{"SELECT count(coalesce(amount, score)) FROM orders", "the arguments of COALESCE have types numeric, float8"},
		{"SELECT count(*) FROM orders WHERE isfinite(ordered_at)", "function isfinite"},
		{"SELECT count(*) FROM orders WHERE length(region) > 3", "function length"},
		{"SELECT count(*) FROM orders WHERE discount / 2 > 3", "arithmetic on discount is refused in a condition"},    // unconstrained numeric
		{"SELECT count(*) FROM orders WHERE quantity * product_id > 100", "can exceed type int4"},                     // int4 * int4
		{"SELECT count(*) FROM orders WHERE quantity + 1 > 100", "can exceed type int4"},                              // int4 + 1 overflows at the top
		{"SELECT count(*) FROM orders WHERE score * 2 > 100", "column score has type float8"},                         // float overflow
		{"SELECT count(*) FROM orders WHERE amount * $1 > 100", "a parameter's value is not known"},                   // magnitude unknown
		{"SELECT count(*) FROM orders WHERE quantity / -1 > 100", "not -1 for integers"},                              // INT_MIN / -1
		{"SELECT CAST(extract(epoch FROM created_at) AS integer) AS e, count(*) FROM orders GROUP BY 1", "to int4"},   // beyond int4
		{"SELECT floor(score / 2) AS b, count(*) FROM orders GROUP BY 1", "arithmetic on column score"},               // no bounds
		{"SELECT count(*) FROM orders WHERE created_at + interval '3000 years' > '2024-01-01'", "at most 2000 years"}, // out of range
		{"SELECT count(*) FROM orders WHERE created_at + $1::interval > '2024-01-01'", "unless the interval is a literal"},
		{"SELECT count(CASE WHEN coalesce(amount + 1, 0) > 5 THEN 1 END) FROM orders", "arithmetic (+)"},
		{"SELECT sum(region) FROM orders", "needs clamping bounds"},
	}
	for _, c := range refused {
		_, err := a.Analyze(c.sql)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != pgerr.InsufficientPrivilege || !strings.Contains(re.Message, c.names) {
			t.Errorf("Analyze(%q) = %v, want 42501 naming %q", c.sql, err, c.names)
		}
	}
	// A column missing from the types read at start does not exist (or
	// was added since): 42703; a table without types is refused.
	for sql, code := range map[string]pgerr.Code{
		"SELECT count(*) FROM orders WHERE nosuch > 1": pgerr.UndefinedColumn,
	} {
		_, err := a.Analyze(sql)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != code {
			t.Errorf("Analyze(%q) = %v, want %s", sql, err, code)
		}
	}
	partial := New(a.cfg, Options{Relations: testRelations, ColumnTypes: map[string]string{"public.orders.amount": "numeric"}})
	_, err := partial.Analyze("SELECT count(*) FROM sales.visits WHERE duration > 1")
	var re *RejectError
	if !errors.As(err, &re) || re.Code != pgerr.InsufficientPrivilege || !strings.Contains(re.Message, "does not know the column types of table sales.visits") {
		t.Errorf("without types for sales.visits: %v, want 42501", err)
	}
}

// TestDateTruncGuarded: date_trunc of a value near the ends of the
// timestamp range fails (totality.go), so the rewrite passes it NULL
// there: for timestamp with units of a month or more, for timestamptz
// with units of a minute or more, for a date always.
func TestDateTruncGuarded(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, c := range []struct{ sql, want string }{
		{"SELECT date_trunc('month', local_time) AS m, count(*) FROM orders GROUP BY 1",
			"date_trunc('month', CASE WHEN local_time >= '4714-12-01 00:00:00 BC' OR NOT pg_catalog.isfinite(local_time) THEN local_time END)"},
		{"SELECT date_trunc('day', local_time) AS m, count(*) FROM orders GROUP BY 1", "date_trunc('day', local_time)"},
		{"SELECT date_trunc('day', ordered_at) AS m, count(*) FROM orders GROUP BY 1",
			"date_trunc('day', CASE WHEN ordered_at >= '4714-12-02 00:00:00+00 BC' OR NOT pg_catalog.isfinite(ordered_at) THEN ordered_at END)"},
		{"SELECT date_trunc('second', ordered_at) AS m, count(*) FROM orders GROUP BY 1", "date_trunc('second', ordered_at)"},
		{"SELECT date_trunc('week', created_at) AS m, count(*) FROM orders GROUP BY 1",
			"date_trunc('week', CASE WHEN (created_at >= '4714-12-02 BC' AND created_at <= '294276-12-23') OR NOT pg_catalog.isfinite(created_at) THEN created_at END)"},
	} {
		stmts, err := a.Analyze(c.sql)
		if err != nil {
			t.Errorf("Analyze(%q): %v", c.sql, err)
			continue
		}
		if !strings.Contains(stmts[0].Plan.SQL, c.want) {
			t.Errorf("Analyze(%q) =\n%s\nwant it to contain %s", c.sql, stmts[0].Plan.SQL, c.want)
		}
	}
}

// Extreme values of each type of the table, as SQL literals, for
// TestTotalityTableAgainstPostgres: the ends of each range, infinities,
// NaN, the smallest magnitudes; and for the date/time types the date_trunc
// bounds themselves and values on either side.
var extremeValues = map[string][]string{
	"int2":    {"-32768", "32767", "0"},
	"int4":    {"-2147483648", "2147483647", "0"},
	"int8":    {"-9223372036854775808", "9223372036854775807", "0"},
	"numeric": {"NaN", "Infinity", "-Infinity", "1e131071", "-1e131071", "1e-16383", "0"},
	"float4":  {"NaN", "Infinity", "-Infinity", "3.4028235e38", "-3.4028235e38", "1e-45", "0"},
	"float8":  {"NaN", "Infinity", "-Infinity", "1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "0"},
	"text":    {"", "ß", "a b"}, "varchar": {"", "ß"}, "bpchar": {"", "a  "}, "name": {"", "n"},
	"bool": {"true", "false"},
	"date": {"4714-11-24 BC", "4714-12-01 BC", "4714-12-02 BC", "4713-01-09 BC", "4000-01-09 BC", "294276-12-23", "294276-12-24",
		"294277-01-01", "5874897-12-31", "infinity", "-infinity", "2024-02-29"},
	"timestamp": {"4714-11-24 00:00:00 BC", "4714-11-30 23:59:59.999999 BC", "4714-12-01 00:00:00 BC", "4713-01-01 00:00:00 BC",
		"4711-01-01 00:00:00 BC", "4700-01-01 00:00:00 BC", "4000-01-01 00:00:00 BC", "294276-12-31 23:59:59.999999",
		"infinity", "-infinity", "2024-02-29 12:34:56.789"},
	"timestamptz": {"4714-11-24 00:00:00+00 BC", "4714-12-02 00:00:00+00 BC", "4714-12-09 00:00:00+00 BC", "4713-01-09 00:00:00+00 BC",
		"4711-01-09 00:00:00+00 BC", "4700-01-09 00:00:00+00 BC", "4000-01-09 00:00:00+00 BC", "294276-12-31 23:59:59.999999+00",
		"infinity", "-infinity", "2024-02-29 12:34:56.789+00"},
	"time":     {"00:00:00", "24:00:00"},
	"timetz":   {"00:00:00+15:59", "24:00:00-15:59"},
	"interval": {"178000000 years", "-178000000 years", "0"},
	"uuid":     {"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"},
}

// testTimeZones have the largest offsets PostgreSQL accepts (±167 hours)
// and local mean time offsets with seconds (for dates before 1900).
var testTimeZones = []string{"UTC", "XXX+167", "XXX-167", "Asia/Kolkata", "America/St_Johns", "Pacific/Kiritimati", "Europe/Amsterdam"}

func valuesOf(typ string) string {
	var rows []string
	for _, v := range extremeValues[typ] {
		rows = append(rows, "("+quoteLiteral(v)+"::"+typ+")")
	}
	rows = append(rows, "(NULL::"+typ+")")
	return "(VALUES " + strings.Join(rows, ", ") + ")"
}

// TestTotalityTableAgainstPostgres runs every entry of the totality table
// on a real PostgreSQL at the extreme values of its argument types, in
// time zones with the largest offsets: none may fail. It also checks the
// controls, so that the table is not merely lenient: the decisions it
// refuses do fail there.
func TestTotalityTableAgainstPostgres(t *testing.T) {
	srv := pgtest.StartTB(t, pgtest.Options{Logf: t.Logf})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var types []string
	for typ := range extremeValues {
		types = append(types, typ)
	}
	sort.Strings(types)
	run := func(zone, sql string) error {
		_, err := conn.Exec(ctx, "SET TimeZone = "+quoteLiteral(zone)+"; "+sql)
		return err
	}
	var stmts []string
	for _, a := range types {
		for _, b := range types {
			if comparable(a, b, false, false) {
				stmts = append(stmts, fmt.Sprintf("SELECT count(CASE WHEN x < y THEN 1 END), count(CASE WHEN x <= y THEN 1 END), count(CASE WHEN x = y THEN 1 END), "+
					"count(CASE WHEN x <> y THEN 1 END), count(CASE WHEN x >= y THEN 1 END), count(CASE WHEN x > y THEN 1 END), "+
					"count(CASE WHEN x IS DISTINCT FROM y THEN 1 END) FROM %s AS a(x) CROSS JOIN %s AS b(y)", valuesOf(a), valuesOf(b)))
			}
			if castTotal(a, b) {
				stmts = append(stmts, fmt.Sprintf("SELECT count(x::%s) FROM %s AS a(x)", b, valuesOf(a)))
			}
		}
		if scalarTypes[a] == famString {
			stmts = append(stmts, fmt.Sprintf("SELECT count(lower(x) || upper(x)) FROM %s AS a(x)", valuesOf(a)))
		}
		for _, f := range extractFields[a] {
			e := fmt.Sprintf("extract(%s FROM x)", f)
			if a != "date" {
				e += fmt.Sprintf(", date_part('%s', x)", f)
			}
			stmts = append(stmts, fmt.Sprintf("SELECT count(*) FROM (SELECT %s FROM %s AS a(x)) AS s", e, valuesOf(a)))
		}
		if a == "timestamp" || a == "timestamptz" || a == "date" {
			x := mustExpr(t, "x")
			for _, u := range truncUnits {
				arg := x
				if lo, hi := truncBounds(a, u); lo != "" || hi != "" {
					arg = truncGuard(x, lo, hi)
				}
				e, err := deparseExpr(arg)
				if err != nil {
					t.Fatal(err)
				}
				stmts = append(stmts, fmt.Sprintf("SELECT count(date_trunc('%s', %s)) FROM %s AS a(x)", u, e, valuesOf(a)))
			}
		}
	}
	for _, zone := range testTimeZones {
		for _, sql := range stmts {
			if err := run(zone, sql); err != nil {
				t.Errorf("TimeZone %s: %s: %v", zone, sql, err)
			}
		}
	}
	// Controls: what the table refuses does fail on some value.
	for _, c := range []struct{ zone, sql string }{
		{"UTC", "SELECT count(*) FROM " + valuesOf("numeric") + " AS a(x) WHERE x < 1::float8"},
		{"UTC", "SELECT count(x::timestamp) FROM " + valuesOf("date") + " AS a(x)"},
		{"XXX-167", "SELECT count(x::timestamptz) FROM " + valuesOf("timestamp") + " AS a(x)"},
		{"UTC", "SELECT count(date_part('year', x)) FROM " + valuesOf("date") + " AS a(x)"},
		{"UTC", "SELECT count(date_trunc('week', x)) FROM " + valuesOf("date") + " AS a(x)"},
		{"UTC", "SELECT count(date_trunc('month', x)) FROM " + valuesOf("timestamp") + " AS a(x)"},
		{"UTC", "SELECT count(date_trunc('millennium', x)) FROM (VALUES ('3999-12-31 BC'::timestamp), ('4001-01-01 BC')) AS a(x)"},
		{"XXX-167", "SELECT count(date_trunc('day', x)) FROM " + valuesOf("timestamptz") + " AS a(x)"},
		{"Asia/Kolkata", "SELECT count(date_trunc('minute', x)) FROM " + valuesOf("timestamptz") + " AS a(x)"},
		{"UTC", "SELECT count(extract(hour FROM x)) FROM " + valuesOf("date") + " AS a(x)"},
		{"UTC", "SELECT count(extract(timezone FROM x)) FROM " + valuesOf("timestamp") + " AS a(x)"},
		{"UTC", "SELECT count(x::float4) FROM " + valuesOf("float8") + " AS a(x)"},
		{"UTC", "SELECT count(x::int4) FROM " + valuesOf("int8") + " AS a(x)"},
	} {
		if err := run(c.zone, c.sql); err == nil {
			t.Errorf("control: %s succeeded in TimeZone %s, want it to fail (else the table refuses it for nothing)", c.sql, c.zone)
		}
	}
	// ColumnTypesSQL reads the names the table uses.
	if _, err := conn.Exec(ctx, `CREATE TYPE mood AS ENUM ('ok'); CREATE DOMAIN posint AS int CHECK (VALUE > 0);
		CREATE COLLATION nd (provider = icu, locale = 'und', deterministic = false);
		CREATE TABLE tt (a int, b numeric(10,2), c timestamptz, d mood, e posint, f text COLLATE nd, g text[], h varchar(3), i "char")`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, ColumnTypesSQL, []string{"public.tt"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var col, typ string
	if _, err := pgx.ForEachRow(rows, []any{&col, &typ}, func() error { got[col] = typ; return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"public.tt.a": "int4", "public.tt.b": "numeric", "public.tt.c": "timestamptz", "public.tt.d": "enum",
		"public.tt.e": "int4", "public.tt.f": "text (nondeterministic collation)", "public.tt.g": "_text", "public.tt.h": "varchar", "public.tt.i": "char"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ColumnTypesSQL = %v, want %v", got, want)
	}
}

// TestTotalityWithoutColumnTypes: an analyzer without column types (tests
// of the rewrite's shape) still hoists constants and guards date_trunc
// for every date/time type at once.
func TestTotalityWithoutColumnTypes(t *testing.T) {
	a := New(newTestAnalyzer(t).cfg, Options{})
	stmts, err := a.Analyze("SELECT date_trunc('month', ordered_at) AS m, count(*) FILTER (WHERE ordered_at > 'x'::text::date) FROM orders GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	p := stmts[0].Plan
	if len(p.Consts) != 1 || !strings.Contains(p.SQL, "'4714-12-09 00:00:00 BC'") || !strings.Contains(p.SQL, "'294276-12-23'") {
		t.Errorf("plan without column types: consts %+v\n%s", p.Consts, p.SQL)
	}
}
