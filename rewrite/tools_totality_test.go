package rewrite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/internal/golden"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
)

// toolCases are the golden cases of issue 14 (the expressions tools
// write) that TestToolExpressionsAgainstPostgres runs.
var toolCases = []string{
	"ok_metabase_month_date", "ok_metabase_week_date", "ok_metabase_month_of_year", "ok_extract_year_integer",
	"ok_extract_dow", "ok_superset_week_date", "ok_grafana_timegroup", "ok_metabase_binning", "ok_binning_integer_division",
	"ok_group_by_output_alias", "ok_group_key_division_numeric", "ok_metabase_contains_filter", "ok_upper_like",
	"ok_like_param_pattern", "ok_like_param_expression", "ok_ilike_param", "ok_where_numeric_times_int",
	"ok_where_int_cast_numeric", "ok_superset_to_date", "ok_superset_to_timestamp", "ok_now_current_date",
	"ok_date_column_plus_interval", "ok_three_part_current_db",
}

// toolExtremes are the rows of the test tables: every column at the ends
// of its type's range (numeric(10,2) at its precision's), infinities,
// NaN, the guards' bounds and the values beside them.
var toolExtremes = map[string][]string{
	"int4":          {"-2147483648", "2147483647", "0", "1"},
	"numeric(10,2)": {"99999999.99", "-99999999.99", "NaN", "0"},
	"numeric":       {"NaN", "Infinity", "-Infinity", "1e131071", "0"},
	"text":          {"", "ß", "a b", `a\`},
	"date": {"4714-11-24 BC", "2000-01-01 BC", "2001-01-01 BC", "292000-01-01", "292001-01-01", "294276-12-23",
		"294276-12-31", "5874897-12-31", "infinity", "-infinity", "2024-02-29"},
	"timestamp": {"4714-11-24 00:00:00 BC", "2000-01-01 00:00:00 BC", "294276-12-31 23:59:59.999999", "infinity", "-infinity", "2024-02-29 12:34:56.789"},
	"timestamptz": {"4714-11-24 00:00:00+00 BC", "2000-01-01 00:00:00+00 BC", "294276-12-31 23:59:59.999999+00",
		"infinity", "-infinity", "2024-02-29 12:34:56.789+00"},
}

// TestToolExpressionsAgainstPostgres runs the rewritten SQL of every
// tool case on a real PostgreSQL over rows holding the extreme values of
// every column's type, in the time zones with the largest offsets: none
// may fail (whether it fails must not depend on the rows). Controls: the
// original statements of the cases whose rewrite guards a value do fail
// on those rows, so the guards are not for nothing.
func TestToolExpressionsAgainstPostgres(t *testing.T) {
	srv := pgtest.StartTB(t, pgtest.Options{Logf: t.Logf})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tables := map[string][][2]string{
		"public.orders": {{"customer_id", "int4"}, {"product_id", "int4"}, {"quantity", "int4"}, {"amount", "numeric(10,2)"},
			{"discount", "numeric"}, {"region", "text"}, {"email", "text"}, {"created_at", "date"}, {"local_time", "timestamp"}, {"ordered_at", "timestamptz"}},
		"sales.visits": {{"user_id", "int4"}, {"duration", "int4"}, {"visit_date", "date"}, {"started", "timestamp"}},
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA sales"); err != nil {
		t.Fatal(err)
	}
	for name, cols := range tables {
		var defs, sel []string
		rows := 0
		for _, c := range cols {
			defs = append(defs, c[0]+" "+c[1])
			rows = max(rows, len(toolExtremes[c[1]]))
		}
		for i := range rows * 3 {
			var vals []string
			for j, c := range cols {
				ex := toolExtremes[c[1]]
				vals = append(vals, quoteLiteral(ex[(i+j*(i/rows))%len(ex)])+"::"+c[1])
			}
			sel = append(sel, "("+strings.Join(vals, ", ")+")")
		}
		sql := fmt.Sprintf("CREATE TABLE %s (%s); INSERT INTO %s VALUES %s", name, strings.Join(defs, ", "), name, strings.Join(sel, ", "))
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	a := newTestAnalyzer(t)
	cases := map[string]golden.Case{}
	for _, c := range goldenCases(t) {
		cases[c.Name] = c
	}
	pc := conn.PgConn()
	for _, name := range toolCases {
		c, ok := cases[name]
		if !ok {
			t.Errorf("no golden case %s", name)
			continue
		}
		stmts, err := a.Analyze(c.SQL)
		if err != nil || len(stmts) != 1 {
			t.Errorf("%s: %v", name, err)
			continue
		}
		plan := stmts[0].Plan
		if plan == nil {
			continue // pass-through
		}
		// The client's parameters are patterns ('%a%'); the constants
		// are evaluated first, as the proxy does.
		var values [][]byte
		var oids []uint32
		for range plan.NumParams {
			values, oids = append(values, []byte("%a%")), append(oids, 25)
		}
		if plan.ConstSQL != "" {
			rr := pc.ExecParams(ctx, plan.ConstSQL, values, oids, nil, nil)
			fields := rr.FieldDescriptions()
			var row [][]byte
			for rr.NextRow() {
				for _, v := range rr.Values() {
					row = append(row, append([]byte(nil), v...))
				}
			}
			if _, err := rr.Close(); err != nil {
				t.Errorf("%s: constants: %v", name, err)
				continue
			}
			for i, cst := range plan.Consts {
				if cst.Param == 0 {
					continue
				}
				for len(values) < cst.Param {
					values, oids = append(values, nil), append(oids, 0)
				}
				values[cst.Param-1], oids[cst.Param-1] = row[i], fields[i].DataTypeOID
			}
		}
		values, oids = append(values, []byte("12345")), append(oids, 20)
		for _, zone := range testTimeZones {
			if _, err := conn.Exec(ctx, "SET TimeZone = "+quoteLiteral(zone)); err != nil {
				t.Fatal(err)
			}
			rr := pc.ExecParams(ctx, plan.SQL, values, oids, nil, nil)
			for rr.NextRow() {
			}
			if _, err := rr.Close(); err != nil {
				t.Errorf("%s, TimeZone %s: the rewritten query failed on extreme values: %v\n%s", name, zone, err, plan.SQL)
			}
		}
	}
	// Controls: PostgreSQL fails on these rows without the guards.
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ok_metabase_week_date", "ok_extract_year_integer", "ok_date_column_plus_interval"} {
		sql := cases[name].SQL
		if _, err := conn.Exec(ctx, sql); err == nil {
			t.Errorf("control: %s: %s succeeded on the extreme rows, want it to fail (else its guard is for nothing)", name, sql)
		}
	}
	for _, sql := range []string{
		"SELECT count(*) FROM public.orders WHERE quantity * product_id > 100",      // int4 * int4 overflows
		"SELECT count(*) FROM public.orders WHERE discount * quantity > 100",        // unconstrained numeric overflows
		"SELECT count(*) FROM public.orders WHERE quantity / -1 > 100",              // INT_MIN / -1
		"SELECT count(*) FROM public.orders WHERE email LIKE region",                // a pattern ending in the escape
		"SELECT CAST(extract(epoch FROM created_at) AS integer) FROM public.orders", // beyond int4
		"SELECT count(*) FROM public.orders WHERE created_at + interval '3000 years' > '2024-01-01'",
	} {
		if _, err := conn.Exec(ctx, sql); err == nil {
			t.Errorf("control: %s succeeded on the extreme rows, want it to fail (else the refusal is for nothing)", sql)
		}
	}
}

// TestLikePatternCheck: a LIKE pattern bound per execution is refused
// (42501, PostgreSQL's message) exactly when it ends in an unescaped
// escape character; NULL and other patterns pass.
func TestLikePatternCheck(t *testing.T) {
	c := TypeCheck{Param: 1, Types: []string{"text"}, What: "a LIKE pattern", Pattern: true}
	for pat, bad := range map[string]bool{`a\`: true, `\`: true, `a\\\`: true, `a\\`: false, `%a%`: false, `a\%`: false, ``: false} {
		err := c.CheckPattern([]byte(pat))
		var re *RejectError
		if bad != (err != nil) || bad && (!errors.As(err, &re) || re.Code != pgerr.InsufficientPrivilege || !strings.Contains(re.Message, "escape character")) {
			t.Errorf("CheckPattern(%q) = %v, want refused: %v", pat, err, bad)
		}
	}
	if err := c.CheckPattern(nil); err != nil {
		t.Errorf("CheckPattern(NULL) = %v", err)
	}
	if err := (TypeCheck{Param: 1}).CheckPattern([]byte(`a\`)); err != nil {
		t.Errorf("a check that is not a pattern's refused %v", err)
	}
}
