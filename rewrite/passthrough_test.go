package rewrite

import (
	"errors"
	"testing"
)

// TestPassThroughAllowlist checks the edges of the pass-through function
// allowlist and of the pg_class column rules: what clients need is
// accepted (their full queries are golden files ok_client_*.sql), what
// reads sizes, counts, files, settings, locks or state stays refused.
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
		{"SELECT json_build_object('a', 1)", ""},
		// a * over a subquery names only what the subquery selects
		{"SELECT * FROM (SELECT c.oid, c.relname FROM pg_class c) c WHERE relname = 'x'", ""},
		{"SELECT * FROM pg_namespace WHERE oid IN (SELECT relnamespace FROM pg_class)", ""},
		{"SELECT t.oid, t.*, c.relkind FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid", ""},
		{"SELECT stxname, stxkeys FROM pg_statistic_ext", ""},

		// sizes, row counts and statistics
		{"SELECT pg_size_pretty(pg_table_size('public.products'))", "42501"},
		{"SELECT pg_stat_get_live_tuples('public.products'::regclass)", "42501"},
		{"SELECT * FROM pg_stat_user_tables", "42501"},
		{"SELECT stxndistinct FROM pg_statistic_ext", "42501"},
		{"SELECT * FROM pg_statistic_ext_data", "42501"},
		// pg_class row estimates through *, whole rows and join aliases
		{"SELECT * FROM pg_class", "42501"},
		{"SELECT c.oid, c.* FROM pg_class c", "42501"},
		{"SELECT pg_catalog.pg_class.* FROM pg_catalog.pg_class", "42501"},
		{"SELECT * FROM (SELECT * FROM pg_class) s", "42501"},
		{"SELECT * FROM (SELECT oid, reltuples FROM pg_class) s", "42501"},
		{"SELECT * FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid", "42501"},
		{"SELECT j.* FROM (pg_class c JOIN pg_namespace n ON c.relnamespace = n.oid) AS j", "42501"},
		{"SELECT j FROM (pg_class c JOIN pg_namespace n ON c.relnamespace = n.oid) AS j", "42501"},
		{"SELECT * FROM pg_class TABLESAMPLE SYSTEM (50)", "42501"},
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
		case c.code != "" && (!errors.As(err, &re) || re.Code != c.code):
			t.Errorf("Analyze(%q) = %v, want SQLSTATE %s", c.sql, err, c.code)
		}
	}
}
