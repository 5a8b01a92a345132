package rewrite

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/conf"
)

// TestPassThroughAllowlist checks the edges of the pass-through function
// and relation allowlists: what clients need is accepted (their full
// queries are golden files ok_client_*.sql), what reads sizes, counts,
// files, settings, locks or state stays refused. Row-count estimates are
// masked, not refused: TestMaskCatalogs.
func TestPassThroughAllowlist(t *testing.T) {
	a := newTestAnalyzer(t)
	cases := []struct {
		sql  string
		code string // "" = accepted
	}{
		// accepted
		{"SELECT pg_catalog.pg_partition_ancestors('public.products'::regclass)", ""},
		{"SELECT relid, parentrelid, isleaf, level FROM pg_partition_tree('public.products')", ""},
		{"SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend LIMIT 1", ""},
		{"SELECT has_any_column_privilege('public.products', 'select')", ""},
		{"SELECT pg_size_pretty(1024::bigint)", ""},
		{"SELECT current_setting('server_version_num'), current_setting('TimeZone', true)", ""},
		{"SELECT a.attname, i.n FROM pg_attribute a, information_schema._pg_expandarray(ARRAY[1,2]) i", ""},
		{"SELECT s FROM generate_series(1, 3) s", ""},
		// named arguments hide the bounds from seriesBounded
		// (PostgreSQL's generate_series has no parameter names; red
		// team, issue 17)
		{"SELECT s FROM generate_series(start := 1, stop := 20000000) s", "0A000"},
		{"SELECT s FROM generate_series(1, stop => 20000000) s", "0A000"},
		{"SELECT json_build_object('a', 1)", ""},
		// a * over a subquery names only what the subquery selects
		{"SELECT * FROM (SELECT c.oid, c.relname FROM pg_class c) c WHERE relname = 'x'", ""},
		{"SELECT * FROM pg_namespace WHERE oid IN (SELECT relnamespace FROM pg_class)", ""},
		{"SELECT t.oid, t.*, c.relkind FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid", ""},
		{"SELECT stxname, stxkeys FROM pg_statistic_ext", ""},

		// sizes, row counts and statistics
		{"SELECT pg_size_pretty(pg_table_size('public.products'))", "42501"},
		{"SELECT pg_stat_get_live_tuples('public.products'::regclass)", "42501"},
		{"SELECT * FROM pg_stat_activity", "42501"},
		{"SELECT * FROM pg_catalog.pg_stat_database", "42501"},
		{"SELECT * FROM pg_stat_statements", "42501"},
		{"SELECT stxndistinct FROM pg_statistic_ext", "42501"},
		{"SELECT * FROM pg_statistic_ext_data", "42501"},
		{"SELECT * FROM pg_stats WHERE tablename = 'orders'", "42501"},
		// masked relations cannot be sampled
		{"SELECT * FROM pg_class TABLESAMPLE SYSTEM (50)", "42501"},
		{"SELECT relid FROM pg_stat_user_tables TABLESAMPLE BERNOULLI (50)", "42501"},
		// settings: only constant names of a short list
		{"SELECT current_setting('dpproxy.secret')", "42501"},
		{"SELECT current_setting('data_directory')", "42501"},
		{"SELECT current_setting(name) FROM pg_settings", "42501"},
		{"SELECT set_config('search_path', 'evil', false)", "42501"},
		// files, sleep, randomness, locks, large objects, other databases
		{"SELECT pg_read_file('/etc/passwd')", "42501"},
		{"SELECT pg_ls_dir('.')", "42501"},
		{"SELECT pg_sleep(10)", "42501"},
		{"SELECT setseed(0.5)", "42501"},
		{"SELECT random()", "42501"},
		{"SELECT pg_advisory_lock(1)", "42501"},
		{"SELECT pg_try_advisory_lock(1)", "42501"},
		{"SELECT lo_get(1)", "42501"},
		{"SELECT lo_import('/etc/passwd')", "42501"},
		{"SELECT dblink('host=x', 'SELECT 1')", "42501"},
		{"SELECT public.dblink_connect('x')", "42501"},
		{"SELECT information_schema._pg_truetypid(a, t) FROM pg_attribute a, pg_type t", "42501"},
		{"SELECT pg_tablespace_location(oid) FROM pg_tablespace", "42501"},
		{"SELECT nextval('public.orders_order_id_seq')", "42501"},
		{"SELECT query_to_xml('SELECT * FROM orders', true, true, '')", "42501"},
	}
	for _, c := range cases {
		_, err := a.Analyze(c.sql)
		var re *RejectError
		switch {
		case c.code == "" && err != nil:
			t.Errorf("Analyze(%q) = %v, want it passed through", c.sql, err)
		case c.code != "" && err == nil:
			t.Errorf("Analyze(%q) accepted, want SQLSTATE %s", c.sql, c.code)
		case c.code != "" && (!errors.As(err, &re) || string(re.Code) != c.code):
			t.Errorf("Analyze(%q) = %v, want SQLSTATE %s", c.sql, err, c.code)
		}
	}
}

// maskedName reports whether a relation of pg_catalog must be read masked;
// the list is written out here, apart from mask.go's, so that a relation
// dropped from mask.go fails this test.
var maskedName = regexp.MustCompile(`^pg_class$|^pg_stat(io)?_(xact_)?(all|user|sys)_(tables|indexes|sequences)$`)

// identifying are the only columns of the masked relations a pass-through
// query may read as they are; the test's own list, apart from mask.go's.
var identifying = map[string]map[string]bool{
	"pg_class": setOf("oid relname relnamespace reltype reloftype relowner relam relfilenode reltablespace " +
		"reltoastrelid relhasindex relisshared relpersistence relkind relnatts relchecks relhasrules " +
		"relhastriggers relhassubclass relrowsecurity relforcerowsecurity relispopulated relreplident " +
		"relispartition relrewrite relfrozenxid relminmxid relacl reloptions relpartbound"),
	"stat": setOf("relid indexrelid schemaname relname indexrelname"),
}

// checkMasked parses pass-through SQL and checks that every masked
// relation in it is read only by a subquery in FROM that selects the
// relation alone, plain identifying columns and constants: reltuples = -1,
// relpages = relallvisible = 0, everything else NULL.
func checkMasked(t *testing.T, src, sql string) {
	t.Helper()
	tree, err := pg_query.Parse(sql)
	if err != nil {
		t.Fatalf("pass-through SQL of %q does not parse: %v\n%s", src, err, sql)
	}
	ctes := map[string]bool{}
	fromSubqueries := map[*pg_query.SelectStmt]bool{}
	walk(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg_query.CommonTableExpr:
			ctes[x.Ctename] = true
		case *pg_query.RangeSubselect:
			if s := x.Subquery.GetSelectStmt(); s != nil {
				fromSubqueries[s] = true
			}
		}
		return true
	})
	walk(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		sel, ok := m.Interface().(*pg_query.SelectStmt)
		if !ok {
			return true
		}
		for _, f := range sel.FromClause {
			walk(f.ProtoReflect(), func(m protoreflect.Message) bool {
				switch x := m.Interface().(type) {
				case *pg_query.RangeSubselect:
					return false
				case *pg_query.RangeVar:
					if !maskedName.MatchString(x.Relname) || x.Schemaname == "" && ctes[x.Relname] {
						return true
					}
					if x.Schemaname != "pg_catalog" {
						t.Errorf("%q reads %s.%s unqualified:\n%s", src, x.Schemaname, x.Relname, sql)
					}
					checkMaskSelect(t, src, sql, sel, x, fromSubqueries[sel])
				}
				return true
			})
		}
		return true
	})
}

func checkMaskSelect(t *testing.T, src, sql string, sel *pg_query.SelectStmt, rv *pg_query.RangeVar, inFrom bool) {
	t.Helper()
	if !inFrom || len(sel.FromClause) != 1 || sel.FromClause[0].GetRangeVar() != rv || sel.WhereClause != nil ||
		sel.GroupClause != nil || sel.HavingClause != nil || sel.DistinctClause != nil || sel.WithClause != nil ||
		sel.LimitCount != nil || sel.Op != pg_query.SetOperation_SETOP_NONE {
		t.Errorf("%q reads %s other than through a masking subquery:\n%s", src, rv.Relname, sql)
		return
	}
	keep := identifying["stat"]
	if rv.Relname == "pg_class" {
		keep = identifying["pg_class"]
	}
	for _, n := range sel.TargetList {
		rt := n.GetResTarget()
		if c := rt.GetVal().GetColumnRef(); c != nil {
			if name := c.Fields[len(c.Fields)-1].GetString_().GetSval(); len(c.Fields) != 1 || !keep[name] || rt.Name != "" {
				t.Errorf("%q: the mask of %s passes column %s through:\n%s", src, rv.Relname, name, sql)
			}
			continue
		}
		tc := rt.GetVal().GetTypeCast()
		if tc == nil || tc.Arg.GetAConst() == nil {
			t.Errorf("%q: the mask of %s computes %s from data:\n%s", src, rv.Relname, rt.Name, sql)
			continue
		}
		got := "NULL"
		if c := tc.Arg.GetAConst(); !c.Isnull {
			got = fmt.Sprint(c.GetIval().GetIval())
		}
		want := map[string]string{"reltuples": "-1", "relpages": "0", "relallvisible": "0"}[rt.Name]
		if rv.Relname != "pg_class" || want == "" {
			want = "NULL"
		}
		if got != want {
			t.Errorf("%q: the mask of %s sets %s = %s, want %s", src, rv.Relname, rt.Name, got, want)
		}
	}
}

// TestMaskCatalogs sends every path to pg_class and to the statistics
// views of tables: each is answered, and each reads them masked.
func TestMaskCatalogs(t *testing.T) {
	a := newTestAnalyzer(t)
	mask := a.masks["pg_class"].text
	mimic := strings.Replace(mask, "(-1)::real AS reltuples", "reltuples", 1)
	if mimic == mask {
		t.Errorf("mask of pg_class has no (-1)::real AS reltuples: %s", mask)
	}
	for _, q := range []string{
		// spellings of the name
		"SELECT * FROM pg_class",
		"SELECT c.* FROM pg_catalog.pg_class c",
		`SELECT reltuples, relpages, relallvisible FROM "pg_class" WHERE relname = 'orders'`,
		`SELECT "c"."reltuples" FROM "pg_catalog"."pg_class" AS "c"`,
		"SELECT pg_catalog.pg_class.* FROM pg_catalog.pg_class",
		"SELECT pg_catalog.pg_class.reltuples FROM ONLY pg_catalog.pg_class",
		"SELECT pg_class.reltuples FROM pg_class",
		"SELECT * FROM pg_class*",
		"TABLE pg_class",
		// whole rows, joins that compare by name, renamed columns
		"SELECT c FROM pg_class c",
		"SELECT (c).reltuples FROM pg_class c",
		"SELECT j.* FROM (pg_class c JOIN pg_namespace n ON c.relnamespace = n.oid) AS j",
		"SELECT j FROM (pg_class c JOIN pg_namespace n ON c.relnamespace = n.oid) AS j",
		"SELECT relname FROM pg_class NATURAL JOIN (SELECT 'orders'::name AS relname, 16::real AS reltuples) x",
		"SELECT relname FROM pg_class JOIN (VALUES (16::real)) v(reltuples) USING (reltuples)",
		"SELECT x FROM pg_class AS c(a, b, c, d, e, f, g, h, i, j, x)",
		"SELECT * FROM pg_class c1 JOIN pg_catalog.pg_class c2 ON c1.oid = c2.reltoastrelid",
		// CTEs, subqueries, LATERAL, set operations, EXPLAIN
		"WITH t AS (SELECT reltuples FROM pg_class) SELECT * FROM t",
		"WITH RECURSIVE t AS (SELECT reltuples FROM pg_catalog.pg_class UNION ALL SELECT reltuples FROM t WHERE false) SELECT * FROM t",
		"WITH pg_class AS (SELECT reltuples FROM pg_class) SELECT * FROM pg_class",
		"SELECT * FROM (SELECT * FROM pg_class) s",
		"SELECT (SELECT reltuples FROM pg_class WHERE relname = 'orders')",
		"SELECT 1 WHERE EXISTS (SELECT 1 FROM pg_class WHERE reltuples > 1000)",
		"SELECT n.nspname, x.reltuples FROM pg_namespace n CROSS JOIN LATERAL (SELECT reltuples FROM pg_class c WHERE c.relnamespace = n.oid) x",
		"SELECT relname FROM pg_class UNION SELECT reltuples::text FROM pg_class",
		"EXPLAIN SELECT reltuples FROM pg_class",
		"SELECT p.name, c.reltuples FROM products p JOIN pg_class c ON c.relname = 'products'",
		// a subquery that looks like the mask but is not is masked itself
		"SELECT c.reltuples FROM " + "(" + mimic + ") c",
		// statistics views
		"SELECT * FROM pg_stat_user_tables",
		"SELECT n_live_tup, last_analyze FROM pg_catalog.pg_stat_all_tables s WHERE s.relname = 'orders'",
		"SELECT pg_catalog.pg_stat_sys_tables.* FROM pg_catalog.pg_stat_sys_tables",
		"SELECT s FROM pg_stat_xact_user_tables s",
		"SELECT heap_blks_read FROM pg_statio_user_tables",
		"SELECT idx_scan FROM pg_stat_user_indexes",
		"SELECT blks_read FROM pg_statio_all_sequences",
		"SELECT c.relname, s.n_live_tup FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid",
	} {
		stmts, err := a.Analyze(q)
		if err != nil {
			t.Errorf("Analyze(%q) = %v, want it answered masked", q, err)
			continue
		}
		if len(stmts) != 1 || stmts[0].Kind != KindPassThrough {
			t.Errorf("Analyze(%q) = %+v, want one pass-through statement", q, stmts)
			continue
		}
		checkMasked(t, q, stmts[0].SQL)
		again, err := a.Analyze(stmts[0].SQL)
		if err != nil || again[0].SQL != stmts[0].SQL {
			t.Errorf("pass-through SQL of %q is not a fixed point: %v\n%s\n%s", q, err, stmts[0].SQL, again[0].SQL)
		}
	}
	// A query that already holds the mask keeps it as it is.
	q := "SELECT c.reltuples FROM (" + mask + ") c"
	stmts, err := a.Analyze(q)
	if err != nil || stmts[0].SQL != q {
		t.Errorf("Analyze(%q) = %v, %v; want it unchanged", q, stmts, err)
	}
	// A CTE named like a catalog is the CTE.
	stmts, err = a.Analyze("WITH pg_class AS (SELECT 7::real AS reltuples) SELECT reltuples FROM pg_class")
	if err != nil || strings.Contains(stmts[0].SQL, "pg_catalog") {
		t.Errorf("CTE pg_class: %v, %v", stmts, err)
	}
}

// TestMaskCatalogColumns: the column lists read from the upstream decide
// the masks' columns and their order; a column no one reviewed (here
// relallfrozen of PostgreSQL 18 and an invented one) is masked, and a list
// that does not make a query falls back to PostgreSQL 15's.
func TestMaskCatalogColumns(t *testing.T) {
	cfg, err := conf.Parse("test.yaml", []byte(testConfig), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	pgClass := parseColumns(pg15Class)
	pgClass = append(pgClass[:12:12], append([]Column{{"relallfrozen", "integer"}}, pgClass[12:]...)...)
	pgClass = append(pgClass, Column{"relfuturecount", "bigint"})
	a := New(cfg, Options{CatalogColumns: map[string][]Column{
		"pg_class":            pgClass,
		"pg_stat_user_tables": append(parseColumns(pg15Tables), Column{"last_seq_scan", "timestamp with time zone"}),
		"pg_stat_all_tables":  {{"relid", "oid"}, {"n_live_tup", "bigint) AS n_live_tup FROM pg_catalog.pg_stat_all_tables; DROP TABLE orders; SELECT (1"}},
		"pg_stat_sys_tables":  {{"relid", "oid"}, {"n_live_tup", "bigint("}},
	}})
	for q, want := range map[string]string{
		"SELECT * FROM pg_class":                              "0::int AS relallvisible, 0::int AS relallfrozen, reltoastrelid",
		"SELECT relfuturecount FROM pg_class":                 "relpartbound, NULL::bigint AS relfuturecount FROM pg_catalog.pg_class",
		"SELECT last_seq_scan FROM pg_stat_user_tables":       "NULL::timestamp with time zone AS last_seq_scan FROM pg_catalog.pg_stat_user_tables",
		"SELECT n_live_tup FROM pg_stat_all_tables":           "NULL::bigint AS autoanalyze_count FROM pg_catalog.pg_stat_all_tables",
		"SELECT * FROM pg_stat_sys_tables NATURAL JOIN pg_am": "NULL::bigint AS autoanalyze_count FROM pg_catalog.pg_stat_sys_tables",
	} {
		stmts, err := a.Analyze(q)
		if err != nil {
			t.Errorf("Analyze(%q) = %v", q, err)
			continue
		}
		if !strings.Contains(stmts[0].SQL, want) {
			t.Errorf("Analyze(%q) =\n%s\nwant it to contain %q", q, stmts[0].SQL, want)
		}
		if strings.Contains(stmts[0].SQL, "DROP") {
			t.Errorf("Analyze(%q) used an invalid column list:\n%s", q, stmts[0].SQL)
		}
	}
	// 19 relations that count rows, and the three that hold settings
	// (TestReadSettingsMasked).
	if got := len(MaskedCatalogs()); got != 22 {
		t.Errorf("MaskedCatalogs() has %d relations, want 22", got)
	}
	for _, name := range MaskedCatalogs() {
		if !maskedName.MatchString(name) && name != "pg_settings" && name != "pg_roles" && name != "pg_user" {
			t.Errorf("MaskedCatalogs() lists %s, which the test does not know", name)
		}
	}
}
