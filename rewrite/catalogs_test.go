package rewrite

import (
	"context"
	"errors"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
)

// TestCatalogAllowlistRefuses: a pass-through query reads only the catalog
// relations on the allowlist (allowlists.go). Whatever else it names, however
// spelled and wherever in the query, is refused with 42501 and a message
// naming it.
func TestCatalogAllowlistRefuses(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, c := range []struct {
		name string
		sql  string
		want string // in the message
	}{
		// other sessions' state
		{"pg_locks", "SELECT * FROM pg_locks", "pg_catalog.pg_locks is refused: it is not on dpproxy's catalog allowlist"},
		{"pg_locks qualified", "SELECT locktype, relation, pid FROM pg_catalog.pg_locks", "pg_catalog.pg_locks"},
		{"pg_stat_activity", "SELECT query FROM pg_stat_activity", "pg_catalog.pg_stat_activity"},
		{"pg_prepared_xacts", "SELECT gid FROM pg_prepared_xacts", "pg_catalog.pg_prepared_xacts"},
		{"pg_prepared_statements", "SELECT statement FROM pg_prepared_statements", "pg_catalog.pg_prepared_statements"},
		{"pg_cursors", "SELECT statement FROM pg_cursors", "pg_catalog.pg_cursors"},
		{"pg_stat_ssl", "SELECT * FROM pg_stat_ssl", "pg_catalog.pg_stat_ssl"},
		{"pg_stat_user_functions", "SELECT calls FROM pg_stat_user_functions", "pg_catalog.pg_stat_user_functions"},
		{"pg_stat_replication", "SELECT * FROM pg_stat_replication", "pg_catalog.pg_stat_replication"},
		{"pg_replication_slots", "SELECT * FROM pg_replication_slots", "pg_catalog.pg_replication_slots"},
		{"pg_replication_origin", "SELECT * FROM pg_replication_origin", "pg_catalog.pg_replication_origin"},
		{"pg_replication_origin_status", "SELECT * FROM pg_replication_origin_status", "pg_catalog.pg_replication_origin_status"},
		{"pg_backend_memory_contexts", "SELECT * FROM pg_backend_memory_contexts", "pg_catalog.pg_backend_memory_contexts"},
		{"pg_shmem_allocations", "SELECT * FROM pg_shmem_allocations", "pg_catalog.pg_shmem_allocations"},
		// relations of later PostgreSQL versions are refused until reviewed
		{"pg_stat_io (PostgreSQL 16)", "SELECT * FROM pg_stat_io", "pg_catalog.pg_stat_io"},
		{"pg_wait_events (PostgreSQL 17)", "SELECT * FROM pg_wait_events", "pg_catalog.pg_wait_events is refused: it is not on dpproxy's catalog allowlist"},
		{"pg_aios (PostgreSQL 18)", "SELECT * FROM pg_aios", "pg_catalog.pg_aios"},
		{"unknown relation", "SELECT * FROM pg_foo", "pg_catalog.pg_foo"},
		// settings, server files and build
		{"pg_db_role_setting", "SELECT setconfig FROM pg_db_role_setting", "pg_catalog.pg_db_role_setting"},
		{"pg_file_settings", "SELECT * FROM pg_file_settings", "pg_catalog.pg_file_settings is refused: it reads the server's configuration files"},
		{"pg_hba_file_rules", "SELECT * FROM pg_hba_file_rules", "pg_catalog.pg_hba_file_rules"},
		{"pg_ident_file_mappings", "SELECT * FROM pg_ident_file_mappings", "pg_catalog.pg_ident_file_mappings"},
		{"pg_config", "SELECT * FROM pg_config", "pg_catalog.pg_config"},
		{"pg_available_extensions", "SELECT * FROM pg_available_extensions", "pg_catalog.pg_available_extensions"},
		{"pg_available_extension_versions", "SELECT * FROM pg_available_extension_versions", "pg_catalog.pg_available_extension_versions"},
		{"pg_parameter_acl", "SELECT * FROM pg_parameter_acl", "pg_catalog.pg_parameter_acl"},
		// credentials
		{"pg_authid", "SELECT rolpassword FROM pg_authid", "pg_catalog.pg_authid is refused: it holds the password hashes"},
		{"pg_shadow", "SELECT passwd FROM pg_shadow", "pg_catalog.pg_shadow"},
		{"pg_user_mapping", "SELECT umoptions FROM pg_user_mapping", "pg_catalog.pg_user_mapping"},
		{"pg_user_mappings", "SELECT umoptions FROM pg_user_mappings", "pg_catalog.pg_user_mappings"},
		{"pg_subscription", "SELECT subconninfo FROM pg_subscription", "pg_catalog.pg_subscription"},
		{"pg_subscription_rel", "SELECT * FROM pg_subscription_rel", "pg_catalog.pg_subscription_rel"},
		{"pg_foreign_server", "SELECT srvoptions FROM pg_foreign_server", "pg_catalog.pg_foreign_server"},
		// data, statistics, counts
		{"pg_largeobject", "SELECT data FROM pg_largeobject", "pg_catalog.pg_largeobject"},
		{"pg_largeobject_metadata", "SELECT * FROM pg_largeobject_metadata", "pg_catalog.pg_largeobject_metadata"},
		{"pg_statistic", "SELECT stavalues1 FROM pg_statistic", "pg_catalog.pg_statistic is refused: it holds data values"},
		{"pg_statistic_ext_data", "SELECT * FROM pg_statistic_ext_data", "pg_catalog.pg_statistic_ext_data"},
		{"pg_stats", "SELECT most_common_vals FROM pg_stats", "pg_catalog.pg_stats"},
		{"pg_stats_ext", "SELECT * FROM pg_stats_ext", "pg_catalog.pg_stats_ext"},
		{"pg_stats_ext_exprs", "SELECT * FROM pg_stats_ext_exprs", "pg_catalog.pg_stats_ext_exprs"},
		{"pg_sequences", "SELECT last_value FROM pg_sequences", "pg_catalog.pg_sequences"},
		// security labels, shared dependencies
		{"pg_seclabel", "SELECT label FROM pg_seclabel", "pg_catalog.pg_seclabel"},
		{"pg_seclabels", "SELECT label FROM pg_seclabels", "pg_catalog.pg_seclabels"},
		{"pg_shseclabel", "SELECT label FROM pg_shseclabel", "pg_catalog.pg_shseclabel"},
		{"pg_shdepend", "SELECT * FROM pg_shdepend", "pg_catalog.pg_shdepend"},
		// spellings
		{"quoted", `SELECT * FROM "pg_locks"`, "pg_catalog.pg_locks"},
		{"quoted and qualified", `SELECT * FROM "pg_catalog"."pg_locks"`, "pg_catalog.pg_locks"},
		{"upper case", "SELECT * FROM PG_CATALOG.PG_LOCKS", "pg_catalog.pg_locks"},
		{"mixed case", "SELECT * FROM Pg_Catalog.Pg_Locks", "pg_catalog.pg_locks"},
		{"quoted upper case", `SELECT * FROM pg_catalog."PG_LOCKS"`, "pg_catalog.PG_LOCKS"},
		{"quoted upper-case schema", `SELECT * FROM "PG_CATALOG".pg_class`, "PG_CATALOG.pg_class"},
		{"unicode escape", `SELECT * FROM pg_catalog.U&"pg!005flocks" UESCAPE '!'`, "pg_catalog.pg_locks"},
		{"unicode escape unqualified", `SELECT * FROM U&"pg_\0073tat_activity"`, "pg_catalog.pg_stat_activity"},
		{"spaces and comments", "SELECT * FROM pg_catalog /* x */ . pg_locks", "pg_catalog.pg_locks"},
		{"ONLY", "SELECT * FROM ONLY pg_locks", "pg_catalog.pg_locks"},
		{"inheritance star", "SELECT * FROM pg_locks*", "pg_catalog.pg_locks"},
		{"alias named like an allowed catalog", "SELECT pg_class.pid FROM pg_locks AS pg_class", "pg_catalog.pg_locks"},
		// positions
		{"TABLE", "TABLE pg_locks", "pg_catalog.pg_locks"},
		{"LATERAL", "SELECT c.relname, x.pid FROM pg_class c, LATERAL (SELECT pid FROM pg_locks l WHERE l.relation = c.oid) x", "pg_catalog.pg_locks"},
		{"scalar subquery", "SELECT (SELECT count(*) FROM pg_locks)", "pg_catalog.pg_locks"},
		{"EXISTS", "SELECT 1 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE granted)", "pg_catalog.pg_locks"},
		{"IN", "SELECT relname FROM pg_class WHERE oid IN (SELECT relation FROM pg_locks)", "pg_catalog.pg_locks"},
		{"CTE", "WITH l AS (SELECT * FROM pg_locks) SELECT * FROM l", "pg_catalog.pg_locks"},
		{"recursive CTE", "WITH RECURSIVE l(p) AS (SELECT pid FROM pg_locks UNION SELECT p FROM l) SELECT * FROM l", "pg_catalog.pg_locks"},
		{"set operation", "SELECT relname FROM pg_class UNION ALL SELECT mode FROM pg_locks", "pg_catalog.pg_locks"},
		{"join", "SELECT * FROM pg_class c JOIN pg_locks l ON l.relation = c.oid", "pg_catalog.pg_locks"},
		{"EXPLAIN", "EXPLAIN SELECT * FROM pg_locks", "pg_catalog.pg_locks"},
		{"second statement", "SELECT 1; SELECT * FROM pg_locks", "pg_catalog.pg_locks"},
		// functions behind those relations
		{"pg_lock_status", "SELECT * FROM pg_lock_status()", "pg_lock_status"},
		{"pg_lock_status qualified in ROWS FROM", "SELECT * FROM ROWS FROM (pg_catalog.pg_lock_status())", "pg_lock_status"},
		{"pg_lock_status in LATERAL", "SELECT c.relname FROM pg_class c, LATERAL pg_lock_status() l WHERE l.relation = c.oid", "pg_lock_status"},
		{"pg_show_all_settings", "SELECT * FROM pg_show_all_settings()", "pg_show_all_settings"},
		{"pg_show_all_settings qualified", "SELECT name, setting FROM pg_catalog.pg_show_all_settings() s", "pg_show_all_settings"},
		{"pg_show_all_settings scalar", "SELECT (pg_show_all_settings()).name", "pg_show_all_settings"},
		{"pg_stat_get_activity", "SELECT * FROM pg_stat_get_activity(NULL)", "pg_stat_get_activity"},
		{"pg_prepared_statement", "SELECT * FROM pg_prepared_statement()", "pg_prepared_statement"},
		{"pg_cursor", "SELECT * FROM pg_cursor()", "pg_cursor"},
		{"pg_prepared_xact", "SELECT * FROM pg_prepared_xact()", "pg_prepared_xact"},
		{"pg_blocking_pids", "SELECT pg_blocking_pids(1)", "pg_blocking_pids"},
		// pg_backend_pid() is answered: the session's own BackendKeyData pid (sessionuser.go, session/ok_backend_pid).
		{"pg_get_backend_memory_contexts", "SELECT * FROM pg_get_backend_memory_contexts()", "pg_get_backend_memory_contexts"},
		{"pg_current_logfile", "SELECT pg_current_logfile()", "pg_current_logfile"},
		{"pg_ls_logdir", "SELECT * FROM pg_ls_logdir()", "pg_ls_logdir"},
		{"pg_postmaster_start_time", "SELECT pg_postmaster_start_time()", "pg_postmaster_start_time"},
		{"pg_conf_load_time", "SELECT pg_conf_load_time()", "pg_conf_load_time"},
		{"inet_server_addr", "SELECT inet_server_addr()", "inet_server_addr"},
		{"txid_current", "SELECT txid_current()", "txid_current"},
		{"pg_sequence_last_value", "SELECT pg_sequence_last_value('public.orders_order_id_seq')", "pg_sequence_last_value"},
		{"pg_options_to_table", "SELECT * FROM pg_options_to_table(ARRAY['password=x'])", "pg_options_to_table"},
		{"current_setting of a path", "SELECT current_setting('config_file')", "current_setting"},
		{"current_setting of a computed name", "SELECT current_setting(name) FROM pg_settings", "current_setting"},
		// information_schema
		{"user_mappings", "SELECT * FROM information_schema.user_mappings", "information_schema.user_mappings is refused"},
		{"user_mapping_options", "SELECT option_value FROM information_schema.user_mapping_options", "information_schema.user_mapping_options is refused: its options may hold passwords"},
		{"foreign_server_options", "SELECT option_value FROM information_schema.foreign_server_options", "information_schema.foreign_server_options"},
		{"_pg_user_mappings", "SELECT * FROM information_schema._pg_user_mappings", "information_schema._pg_user_mappings"},
		{"_pg_foreign_servers", "SELECT * FROM information_schema._pg_foreign_servers", "information_schema._pg_foreign_servers"},
		{"_pg_foreign_tables", "SELECT * FROM information_schema._pg_foreign_tables", "information_schema._pg_foreign_tables"},
		{"unknown information_schema view", "SELECT * FROM information_schema.no_such_view", "information_schema.no_such_view is refused: it is not on dpproxy's catalog allowlist"},
		{"quoted upper-case information_schema view", `SELECT * FROM information_schema."TABLES"`, "information_schema.TABLES"},
		{"information_schema in LATERAL", "SELECT n.nspname FROM pg_namespace n, LATERAL (SELECT * FROM information_schema.user_mapping_options o) x", "information_schema.user_mapping_options"},
		{"information_schema function", "SELECT information_schema._pg_truetypid(a, t) FROM pg_attribute a, pg_type t", "_pg_truetypid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := a.Analyze(c.sql)
			var re *RejectError
			if !errors.As(err, &re) || re.Code != pgerr.InsufficientPrivilege {
				t.Fatalf("Analyze(%q) = %v, want SQLSTATE %s", c.sql, err, pgerr.InsufficientPrivilege)
			}
			if !strings.Contains(re.Message, c.want) {
				t.Errorf("Analyze(%q) = %q, want a message containing %q", c.sql, re.Message, c.want)
			}
		})
	}
}

// TestCatalogAllowlistAccepts: what the clients of allowlists.go read is
// passed through (their whole queries are the golden files
// testdata/clients/ok_client_*.sql).
func TestCatalogAllowlistAccepts(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, q := range []string{
		"SELECT * FROM pg_catalog.pg_policy",
		"SELECT pol.polname, pg_get_expr(pol.polqual, pol.polrelid) FROM pg_policies p, pg_policy pol",
		"SELECT seqstart, seqincrement FROM pg_sequence",
		"SELECT rngsubtype FROM pg_range",
		"SELECT enumlabel FROM pg_enum",
		"SELECT extname, extversion FROM pg_extension",
		"SELECT rolname, rolsuper FROM pg_roles",
		"SELECT a.oid, a.* FROM pg_catalog.pg_roles a LEFT JOIN pg_catalog.pg_shdescription pd ON a.oid = pd.objoid ORDER BY a.rolname",
		"SELECT usename, usesysid, usesuper FROM pg_user",
		"SELECT grolist FROM pg_group WHERE groname = 'x'",
		"SELECT member, roleid FROM pg_auth_members",
		"SELECT datname FROM pg_database",
		"SELECT spcname FROM pg_tablespace",
		"SELECT name, utc_offset FROM pg_timezone_names",
		"SELECT abbrev FROM pg_timezone_abbrevs",
		"SELECT schemaname, tablename FROM pg_tables",
		"SELECT viewname, definition FROM pg_views",
		"SELECT matviewname FROM pg_matviews",
		"SELECT indexdef FROM pg_indexes",
		"SELECT rulename FROM pg_rules",
		"SELECT ev_class FROM pg_rewrite",
		"SELECT evtname FROM pg_event_trigger",
		"SELECT fdwname FROM pg_foreign_data_wrapper",
		"SELECT ftoptions FROM pg_foreign_table",
		"SELECT pubname FROM pg_publication_tables",
		"SELECT defaclacl FROM pg_default_acl",
		"SELECT cfgname FROM pg_ts_config",
		"SELECT name, setting FROM pg_settings",
		"SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
		"SELECT column_name, data_type FROM information_schema.columns",
		"SELECT * FROM information_schema.key_column_usage k JOIN information_schema.table_constraints c USING (constraint_name)",
		"SELECT sequence_name, start_value FROM information_schema.sequences",
		"SELECT schema_name FROM information_schema.schemata",
		"SELECT * FROM information_schema.foreign_servers",
		"SELECT * FROM information_schema.sql_features",
		"SELECT * FROM information_schema.routines r JOIN information_schema.parameters p USING (specific_name)",
		`SELECT * FROM "information_schema"."views"`,
		"SELECT format('%I.%I', 'public', 'orders'), parse_ident('public.orders'), string_to_array('a,b', ',')",
	} {
		t.Run(q, func(t *testing.T) {
			stmts, err := a.Analyze(q)
			if err != nil {
				t.Fatalf("Analyze(%q) = %v, want it passed through", q, err)
			}
			if len(stmts) != 1 || stmts[0].Kind != KindPassThrough {
				t.Fatalf("Analyze(%q) = %+v, want one pass-through statement", q, stmts)
			}
			again, err := a.Analyze(stmts[0].SQL)
			if err != nil || again[0].SQL != stmts[0].SQL {
				t.Errorf("pass-through SQL of %q is not a fixed point: %v\n%s", q, err, stmts[0].SQL)
			}
		})
	}
}

// TestReadSettingsMasked: pg_settings is read through a mask that keeps
// only the rows of readableSettings (the list current_setting uses) and
// hides where each value was set (sourcefile and sourceline name server
// files); pg_roles and pg_user hide the roles' settings.
func TestReadSettingsMasked(t *testing.T) {
	a := newTestAnalyzer(t)
	names := make([]string, 0, len(readableSettings))
	for n := range readableSettings {
		if n != strings.ToLower(n) || !regexp.MustCompile(`^[a-z_]+$`).MatchString(n) {
			t.Errorf("readableSettings holds %q: want lower-case names of letters and _", n)
		}
		names = append(names, "'"+n+"'")
	}
	sort.Strings(names)
	filter := "WHERE lower(name) IN (" + strings.Join(names, ", ") + ")"
	for _, c := range []struct {
		sql  string
		want []string
	}{
		{"select * from pg_catalog.pg_settings where name='standard_conforming_strings'",
			[]string{filter, "NULL::text AS sourcefile", "NULL::int AS sourceline", "short_desc", "reset_val"}},
		{"SELECT name, setting FROM pg_settings WHERE name = 'data_directory'", []string{filter}},
		{"SELECT s.sourcefile, s.sourceline FROM pg_settings s", []string{filter, ") s"}},
		{"SELECT (SELECT setting FROM pg_catalog.pg_settings WHERE name = 'config_file')", []string{filter}},
		{"SELECT rolname, rolconfig FROM pg_roles", []string{"NULL::text[] AS rolconfig", "rolname"}},
		{"SELECT usename, useconfig FROM pg_user", []string{"NULL::text[] AS useconfig", "usename"}},
	} {
		t.Run(c.sql, func(t *testing.T) {
			stmts, err := a.Analyze(c.sql)
			if err != nil {
				t.Fatalf("Analyze(%q) = %v, want it answered masked", c.sql, err)
			}
			for _, w := range c.want {
				if !strings.Contains(stmts[0].SQL, w) {
					t.Errorf("Analyze(%q) =\n%s\nwant it to contain %q", c.sql, stmts[0].SQL, w)
				}
			}
		})
	}
	// current_setting reads exactly the settings the mask shows.
	for n := range readableSettings {
		if _, err := a.Analyze("SELECT current_setting('" + n + "')"); err != nil {
			t.Errorf("current_setting(%q) = %v, want it allowed", n, err)
		}
	}
	for _, n := range []string{"data_directory", "config_file", "hba_file", "log_directory", "shared_preload_libraries", "dpproxy.secret"} {
		if readableSettings[n] {
			t.Errorf("readableSettings holds %q, which names server files or operator secrets", n)
		}
	}
}

// TestMaskedRelationsHaveColumns: every masked relation has PostgreSQL 15's
// columns in mask.go for when the upstream cannot be asked, and is a
// relation of pg_catalog.
func TestMaskedRelationsHaveColumns(t *testing.T) {
	if len(pg15Columns) != len(maskedRelations) {
		t.Errorf("mask.go has PostgreSQL 15's columns of %d relations, allowlists.go masks %d", len(pg15Columns), len(maskedRelations))
	}
	for name := range maskedRelations {
		if pg15Columns[name] == "" {
			t.Errorf("masked relation %s has no PostgreSQL 15 column list in mask.go", name)
		}
	}
}

// TestCatalogDecisionsCoverUpstream goes through every relation of
// pg_catalog and information_schema of a real PostgreSQL: each must have a
// decision in allowlists.go (allowed, masked, or refused with a reason), each
// allowed one must be answered as the proxy would send it, and the masked
// pg_settings must return only the readable settings, without their files.
func TestCatalogDecisionsCoverUpstream(t *testing.T) {
	srv := pgtest.StartTB(t, pgtest.Options{Logf: t.Logf})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var version int
	var versionName string
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, current_setting('server_version')").Scan(&version, &versionName); err != nil {
		t.Fatal(err)
	}
	// The proxy reads the masked relations' columns from the upstream.
	cols := map[string][]Column{}
	rows, err := conn.Query(ctx, CatalogColumnsSQL, MaskedCatalogs())
	if err != nil {
		t.Fatal(err)
	}
	var rel, col, typ string
	if _, err := pgx.ForEachRow(rows, []any{&rel, &col, &typ}, func() error {
		cols[rel] = append(cols[rel], Column{Name: col, Type: typ})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	a := newTestAnalyzer(t)
	a = New(a.cfg, Options{CatalogColumns: cols})

	rows, err = conn.Query(ctx, `SELECT n.nspname::text, c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname IN ('pg_catalog', 'information_schema') AND c.relkind IN ('r', 'v', 'm', 'f', 'p') ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	var rels [][2]string
	var schema, name string
	if _, err := pgx.ForEachRow(rows, []any{&schema, &name}, func() error {
		rels = append(rels, [2]string{schema, name})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	upstream := map[string]bool{}
	allowed := 0
	for _, r := range rels {
		q := r[0] + "." + r[1]
		upstream[q] = true
		why := catalogRefusal(r[0], r[1])
		if why != "" {
			// Refused: the decision must be written down, not a default,
			// for every relation of the PostgreSQL versions reviewed.
			if _, listed := refusedRelations[q]; !listed && !statsViewPrefix(r[0], r[1]) && version < 160000 {
				t.Errorf("%s (PostgreSQL %s) is refused by default: review it and list it in allowlists.go", q, versionName)
			}
			continue
		}
		allowed++
		sql := "SELECT * FROM " + q + " LIMIT 1"
		stmts, err := a.Analyze(sql)
		if err != nil {
			t.Errorf("%s is on the allowlist, but Analyze(%q) = %v", q, sql, err)
			continue
		}
		if _, err := conn.Exec(ctx, stmts[0].SQL); err != nil {
			t.Errorf("%s: the upstream refused %q: %v", q, stmts[0].SQL, err)
		}
	}
	if allowed < 100 {
		t.Errorf("only %d catalog relations allowed: the allowlist lost its entries", allowed)
	}
	// Every allowlisted or masked name exists upstream (no typos), except
	// what a later PostgreSQL removed.
	for q := range catalogAllowlist {
		if !upstream[q] && version < 160000 {
			t.Errorf("allowlist entry %s is not a relation of PostgreSQL %s", q, versionName)
		}
	}
	for name := range maskedRelations {
		if !upstream["pg_catalog."+name] {
			t.Errorf("masked relation %s is not a relation of PostgreSQL %s", name, versionName)
		}
	}

	// pg_settings: only readable settings, sourcefile and sourceline NULL,
	// whatever the query asks for.
	if _, err := conn.Exec(ctx, "SET application_name = 'catalogs_test'"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SELECT name, setting, sourcefile, sourceline FROM pg_settings",
		"SELECT name, setting, sourcefile, sourceline FROM pg_catalog.pg_settings WHERE name IN ('data_directory', 'config_file', 'TimeZone')",
		"SELECT s.name, s.setting, s.sourcefile, s.sourceline FROM pg_settings s WHERE s.sourcefile IS NOT NULL OR true",
	} {
		stmts, err := a.Analyze(q)
		if err != nil {
			t.Fatalf("Analyze(%q) = %v", q, err)
		}
		rows, err := conn.Query(ctx, stmts[0].SQL)
		if err != nil {
			t.Fatalf("%s: %v", stmts[0].SQL, err)
		}
		var setName, setting string
		var file *string
		var line *int32
		seen := map[string]string{}
		if _, err := pgx.ForEachRow(rows, []any{&setName, &setting, &file, &line}, func() error {
			seen[strings.ToLower(setName)] = setting
			if !readableSettings[strings.ToLower(setName)] {
				t.Errorf("%q returned the setting %s", q, setName)
			}
			if file != nil || line != nil {
				t.Errorf("%q returned %s's file %v line %v", q, setName, file, line)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) == 0 {
			t.Errorf("%q returned no setting", q)
		}
		if strings.HasPrefix(q, "SELECT name, setting, sourcefile, sourceline FROM pg_settings") {
			if seen["application_name"] != "catalogs_test" || seen["timezone"] == "" || len(seen) < 15 {
				t.Errorf("%q returned %v, want the readable settings with this session's values", q, seen)
			}
		}
	}
}
