package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// The compatibility matrix (issue 3, README "Clients"): each real client
// connects with SCRAM, browses the schema its usual way, runs a DP
// aggregate with a bound parameter (through a prepared statement where the
// client has one), gets a refusal and uses the connection again. The
// programs live in e2e/clients and print what they saw as JSON (psql: its
// unaligned output); the judgement is here. scripts/install-clients.sh
// installs the clients.

// clientsConfig is the matrix's proxy (testconf.Clients): an analyst per
// client, password_env PW.
var clientsConfig = testconf.YAML(testconf.Clients)

// The matrix's password: ASCII with a quote and a space, so a client that
// mangles it fails SCRAM.
const matrixPassword = "matrix 'pw' 42"

// The DP question every client asks, with $1 = 10 first and 400 after the
// refusal. Its count has Laplace noise of scale 64 (ε/2 per aggregate,
// sensitivity 8 rows × 4 groups); countTolerance is 15.6 scales, so a
// correct count misses it with probability e^-15.6 ≈ 2e-7, about 1e-5 for
// the whole matrix.
const (
	dpQuestion     = "SELECT region, count(*) AS n, avg(amount) AS mean FROM orders WHERE amount > $1 GROUP BY region ORDER BY region"
	countTolerance = 1000
)

var dpRegions = []string{"east", "north", "south", "west"}

// clientReport is what a client program prints.
type clientReport struct {
	Driver      string            `json:"driver"`
	Schema      string            `json:"schema"`
	Tables      []string          `json:"tables"`
	Columns     map[string]string `json:"columns"`
	PrimaryKey  []string          `json:"primary_key"`
	ForeignKeys []string          `json:"foreign_keys"`
	DP          dpReport          `json:"dp"`
	DPNamed     *dpReport         `json:"dp_named"`
	Refusal     string            `json:"refusal"`
	RefusalMsg  string            `json:"refusal_message"`
	DPAfter     dpReport          `json:"dp_after"`
	PublicCount int64             `json:"public_count"`
}

type dpReport struct {
	TypeOIDs  []uint32 `json:"type_oids"`
	TypeNames []string `json:"type_names"`
	Names     []string `json:"names"`
	Rows      []dpRow  `json:"rows"`
}

type dpRow struct {
	Region string
	Count  float64
	Mean   float64
}

func (r *dpRow) UnmarshalJSON(b []byte) error {
	var a []any
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if len(a) != 3 {
		return fmt.Errorf("row %s: want [region, count, mean]", b)
	}
	var ok1, ok2, ok3 bool
	r.Region, ok1 = a[0].(string)
	r.Count, ok2 = a[1].(float64)
	r.Mean, ok3 = a[2].(float64)
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("row %s: want [string, number, number]", b)
	}
	return nil
}

// types names the result columns' types, from OIDs or driver type names.
func (d dpReport) types() []string {
	if len(d.TypeNames) > 0 {
		return d.TypeNames
	}
	names := map[uint32]string{25: "text", 20: "int8", 1700: "numeric", 701: "float8"}
	out := make([]string, len(d.TypeOIDs))
	for i, o := range d.TypeOIDs {
		out[i] = names[o]
		if out[i] == "" {
			out[i] = "oid " + strconv.FormatUint(uint64(o), 10)
		}
	}
	return out
}

// matrix is the proxy and the truth the client subtests share.
type matrix struct {
	host, port string
	// truth[threshold][region] is the count after contribution bounding
	// (each customer orders in one region, so only the 8-row cap binds).
	truth map[int]map[string]float64
	db    string // the upstream database's name (what \l and current_database() show)
}

func TestClients(t *testing.T) {
	cfg := configFor(t, clientsConfig, map[string]string{"PW": matrixPassword})
	_, addr, _ := startProxyWith(t, cfg)
	m := &matrix{truth: map[int]map[string]float64{}}
	m.host, m.port, _ = net.SplitHostPort(addr)
	up := direct(t)
	if err := up.QueryRow(ctx, "SELECT current_database()").Scan(&m.db); err != nil {
		t.Fatal(err)
	}
	for _, th := range []int{10, 400} {
		m.truth[th] = map[string]float64{}
		rows, err := up.Query(ctx, `SELECT region, sum(least(n, 8))::float8 FROM (
			SELECT customer_id, region, count(*) AS n FROM orders WHERE amount > $1 GROUP BY 1, 2) t
			GROUP BY region`, th)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var r string
			var c float64
			if err := rows.Scan(&r, &c); err != nil {
				t.Fatal(err)
			}
			m.truth[th][r] = c
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}

	// Each client takes seconds (the JVM most); they run side by side.
	t.Run("psql", func(t *testing.T) { t.Parallel(); m.psql(t) })
	t.Run("pgx", func(t *testing.T) { t.Parallel(); m.pgx(t) })
	t.Run("psycopg2", func(t *testing.T) { t.Parallel(); m.python(t, "psycopg2") })
	t.Run("psycopg3", func(t *testing.T) { t.Parallel(); m.python(t, "psycopg") })
	t.Run("pgjdbc", func(t *testing.T) { t.Parallel(); m.jdbc(t) })
	t.Run("node-postgres", func(t *testing.T) { t.Parallel(); m.node(t) })
}

// missing skips a client that is not installed, or fails under CI=true,
// where scripts/install-clients.sh must have installed every one.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + " (scripts/install-clients.sh installs it)"
	if pgtest.InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// run executes a client program with the proxy's address and the
// analyst's credentials in its environment and returns its stdout.
func (m *matrix) run(t *testing.T, user string, name string, args ...string) []byte {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Dir = "clients"
	cmd.Env = append(os.Environ(),
		"DPPROXY_HOST="+m.host, "DPPROXY_PORT="+m.port, "DPPROXY_USER="+user,
		"DPPROXY_PASSWORD="+matrixPassword, "DPPROXY_DB=shop",
		"PGHOST="+m.host, "PGPORT="+m.port, "PGUSER="+user, "PGPASSWORD="+matrixPassword,
		"PGDATABASE=shop", "PGSSLMODE=disable", "PGAPPNAME=matrix-psql",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("%s ran in %v", filepath.Base(name), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	if testing.Verbose() && stderr.Len() > 0 {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return out
}

func (m *matrix) decode(t *testing.T, out []byte) *clientReport {
	t.Helper()
	var r clientReport
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("client output is not the expected JSON: %v\n%s", err, out)
	}
	return &r
}

// check judges a client's report: the schema as browsed, the DP answers,
// the refusal, the connection's use after it, and the analyst's charge.
func (m *matrix) check(t *testing.T, user string, r *clientReport, wantTypes []string) {
	t.Helper()
	for _, tbl := range []string{"customers", "orders", "products"} {
		if !slices.Contains(r.Tables, tbl) {
			t.Errorf("tables browsed = %v, want %s among them", r.Tables, tbl)
		}
	}
	if r.Columns != nil {
		for col, types := range map[string][]string{
			"customer_id": {"integer", "int4"},
			"amount":      {"numeric"},
			"ordered_at":  {"timestamp with time zone", "timestamptz"},
		} {
			if !slices.Contains(types, r.Columns[col]) {
				t.Errorf("column orders.%s has type %q in the metadata, want one of %v (columns: %v)", col, r.Columns[col], types, r.Columns)
			}
		}
	}
	m.checkDP(t, "first DP answer ($1 = 10)", r.DP, 10, wantTypes)
	if r.Refusal != "42501" {
		t.Errorf("SELECT * FROM orders: SQLSTATE %q (%s), want 42501", r.Refusal, r.RefusalMsg)
	}
	m.checkDP(t, "DP answer after the refusal ($1 = 400)", r.DPAfter, 400, wantTypes)
	if r.PublicCount != 50 {
		t.Errorf("count of the public products table = %d, want the exact 50", r.PublicCount)
	}
	m.checkCharge(t, user, 2)
}

func (m *matrix) checkDP(t *testing.T, what string, d dpReport, threshold int, wantTypes []string) {
	t.Helper()
	if got := d.types(); !slices.Equal(got, wantTypes) {
		t.Errorf("%s: column types %v, want %v", what, got, wantTypes)
	}
	if want := []string{"region", "n", "mean"}; len(d.Names) > 0 && !slices.Equal(d.Names, want) {
		t.Errorf("%s: column names %v, want %v", what, d.Names, want)
	}
	var regions []string
	exact := 0
	for _, row := range d.Rows {
		regions = append(regions, row.Region)
		truth := m.truth[threshold][row.Region]
		if row.Count < 0 || row.Count != math.Trunc(row.Count) || math.Abs(row.Count-truth) > countTolerance {
			t.Errorf("%s: %s count = %v, want a whole number ≥ 0 within %d of %v", what, row.Region, row.Count, countTolerance, truth)
		}
		if row.Count == truth {
			exact++
		}
		if row.Mean < 0 || row.Mean > 500 || math.IsNaN(row.Mean) {
			t.Errorf("%s: %s mean = %v, want it within the bounds [0, 500]", what, row.Region, row.Mean)
		}
	}
	if !slices.Equal(regions, dpRegions) {
		t.Errorf("%s: regions %v, want every public value %v", what, regions, dpRegions)
	}
	// Each noisy count equals the truth with probability < 1/128: four
	// at once (< 4e-9) means no noise was added.
	if exact == len(dpRegions) {
		t.Errorf("%s: every count equals the true bounded count %v: not noised", what, m.truth[threshold])
	}
}

// checkCharge verifies the analyst was charged exactly want (ε): two fresh
// questions; refusals, descriptions and cached repeats are free.
func (m *matrix) checkCharge(t *testing.T, user string, want float64) {
	t.Helper()
	conn := m.pgxConn(t, user, pgx.QueryExecModeSimpleProtocol)
	if b := showBudget(t, conn); math.Abs(b.epsSpent-want) > 1e-9 {
		t.Errorf("%s spent ε=%v, want %v (two fresh DP questions at ε=1)", user, b.epsSpent, want)
	}
}

// psql 15 speaks the simple protocol (no \bind before psql 16), so the
// parameter is a literal; \gdesc describes the query with Parse/Describe.
func (m *matrix) psql(t *testing.T) {
	path, err := exec.LookPath("psql")
	if err != nil {
		missing(t, "psql is not installed (Debian: postgresql-client)")
	}
	if v, err := exec.Command(path, "--version").Output(); err == nil {
		t.Logf("%s", bytes.TrimSpace(v))
	}
	out := m.run(t, "matrix_psql", path, "-X", "-A", "-F", "|", "-v", "VERBOSITY=verbose", "-f", "psql_matrix.sql")
	sec := psqlSections(out)
	get := func(name string) []string {
		t.Helper()
		lines, ok := sec[name]
		if !ok {
			t.Fatalf("psql output has no section %q:\n%s", name, out)
		}
		return lines
	}
	hasLine := func(name, prefix string) {
		t.Helper()
		for _, l := range get(name) {
			if strings.HasPrefix(l, prefix) {
				return
			}
		}
		t.Errorf("psql %s: no line starting with %q in\n%s", name, prefix, strings.Join(get(name), "\n"))
	}
	hasLine("version", m.db+"|public|")
	for _, tbl := range []string{"customers", "orders", "products"} {
		hasLine("dt", "public|"+tbl+"|table|")
	}
	hasLine("d orders", `Table "public.orders"`)
	hasLine("d orders", "customer_id|integer||not null|")
	hasLine("d orders", "amount|numeric(10,2)||not null|")
	hasLine("d orders", "Foreign-key constraints:")
	hasLine("l", m.db+"|")
	hasLine("dn", "public|")

	var types []string
	for _, l := range get("gdesc")[1:] {
		if f := strings.Split(l, "|"); len(f) == 2 {
			types = append(types, map[string]string{"bigint": "int8"}[f[1]]+strings.TrimPrefix(f[1], "bigint"))
		}
	}
	r := &clientReport{
		Tables:      []string{"customers", "orders", "products"}, // checked above
		DP:          dpReport{TypeNames: types, Rows: psqlRows(t, get("dp"))},
		DPAfter:     dpReport{TypeNames: types, Rows: psqlRows(t, get("dp_after"))},
		PublicCount: -1,
	}
	if l := get("refusal"); len(l) > 0 {
		r.Refusal = strings.TrimSpace(strings.TrimPrefix(l[len(l)-1], "sqlstate|"))
	}
	if pc := get("public_count"); len(pc) >= 2 {
		r.PublicCount, _ = strconv.ParseInt(pc[1], 10, 64)
	}
	m.check(t, "matrix_psql", r, []string{"text", "int8", "numeric"})
}

// psqlSections splits psql's output at the "## name" lines the script echoes.
func psqlSections(out []byte) map[string][]string {
	sec := map[string][]string{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if name, ok := strings.CutPrefix(l, "## "); ok {
			cur = name
			sec[cur] = []string{}
			continue
		}
		if cur != "" {
			sec[cur] = append(sec[cur], l)
		}
	}
	return sec
}

// psqlRows parses "region|n|mean" rows of unaligned output.
func psqlRows(t *testing.T, lines []string) []dpRow {
	t.Helper()
	var rows []dpRow
	for _, l := range lines {
		f := strings.Split(l, "|")
		if len(f) != 3 || f[0] == "region" {
			continue
		}
		n, err1 := strconv.ParseFloat(f[1], 64)
		mean, err2 := strconv.ParseFloat(f[2], 64)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("psql row %q: %v", l, err)
		}
		rows = append(rows, dpRow{f[0], n, mean})
	}
	return rows
}

// pgx with its default QueryExecModeCacheStatement: named prepared
// statements and binary results. e2e/extended_test.go covers every pgx
// query mode in depth; this runs the matrix's steps for the table.
func (m *matrix) pgx(t *testing.T) {
	conn := m.pgxConn(t, "matrix_pgx", pgx.QueryExecModeCacheStatement)
	r := &clientReport{Columns: map[string]string{}}
	var err error
	rows, _ := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY 1", "public")
	if r.Tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	rows, _ = conn.Query(ctx, "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2", "public", "orders")
	var name, typ string
	if _, err := pgx.ForEachRow(rows, []any{&name, &typ}, func() error { r.Columns[name] = typ; return nil }); err != nil {
		t.Fatal(err)
	}
	dp := func(threshold int) dpReport {
		t.Helper()
		rows, err := conn.Query(ctx, dpQuestion, threshold)
		if err != nil {
			t.Fatal(err)
		}
		var d dpReport
		for _, f := range rows.FieldDescriptions() {
			d.TypeOIDs = append(d.TypeOIDs, f.DataTypeOID)
			d.Names = append(d.Names, f.Name)
		}
		var row dpRow
		var count int64
		if _, err := pgx.ForEachRow(rows, []any{&row.Region, &count, &row.Mean}, func() error {
			row.Count = float64(count)
			d.Rows = append(d.Rows, row)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	r.DP = dp(10)
	_, err = conn.Exec(ctx, "SELECT * FROM orders")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		r.Refusal = pgErr.Code
	}
	r.DPAfter = dp(400)
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM products WHERE price > $1", 0).Scan(&r.PublicCount); err != nil {
		t.Fatal(err)
	}
	m.check(t, "matrix_pgx", r, []string{"text", "int8", "numeric"})
}

// pgxConn connects to the matrix's proxy (the password has a space, which
// a URL cannot hold unescaped).
func (m *matrix) pgxConn(t *testing.T, user string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s@%s/shop?sslmode=disable", user, net.JoinHostPort(m.host, m.port)))
	if err != nil {
		t.Fatal(err)
	}
	cc.Password = matrixPassword
	cc.DefaultQueryExecMode = mode
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// debianPython is Debian's own interpreter: python3-psycopg2 and
// python3-psycopg load only under it, and another python3 (pyenv, a
// virtualenv) may come first on PATH.
const debianPython = "/usr/bin/python3"

func (m *matrix) python(t *testing.T, module string) {
	if err := exec.Command(debianPython, "-c", "import "+module).Run(); err != nil {
		missing(t, "%s cannot import %s: %v (Debian: python3-%s)", debianPython, module, err, module)
	}
	r := m.decode(t, m.run(t, "matrix_"+module, debianPython, "psycopg_client.py", module))
	if r.Schema != "public" {
		t.Errorf("current_schema() = %q, want public", r.Schema)
	}
	m.check(t, "matrix_"+module, r, []string{"text", "int8", "numeric"})
}

// jdbcJar is where Debian's libpostgresql-jdbc-java puts pgJDBC.
const jdbcJar = "/usr/share/java/postgresql.jar"

func (m *matrix) jdbc(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		missing(t, "java is not installed (Debian: openjdk-17-jdk-headless)")
	}
	if _, err := exec.LookPath("javac"); err != nil {
		missing(t, "javac is not installed: java Prog.java needs a JDK (Debian: openjdk-17-jdk-headless)")
	}
	if _, err := os.Stat(jdbcJar); err != nil {
		missing(t, "pgJDBC is not installed: %v (Debian: libpostgresql-jdbc-java)", err)
	}
	r := m.decode(t, m.run(t, "matrix_jdbc", java, "-cp", jdbcJar, "JdbcClient.java"))
	if !slices.Contains(r.PrimaryKey, "order_id") {
		t.Errorf("getPrimaryKeys(orders) = %v, want order_id", r.PrimaryKey)
	}
	for _, fk := range []string{"customer_id->customers", "product_id->products"} {
		if !slices.Contains(r.ForeignKeys, fk) {
			t.Errorf("getImportedKeys(orders) = %v, want %s among them", r.ForeignKeys, fk)
		}
	}
	// After prepareThreshold executions pgJDBC switches to a named
	// statement (and binary results); the repeated question is answered
	// from the proxy's cache, unchanged and free.
	if r.DPNamed == nil {
		t.Errorf("no dp_named in the report")
	} else if !slices.Equal(r.DPNamed.Rows, r.DP.Rows) {
		t.Errorf("repeated question through a named statement = %v, want the cached %v", r.DPNamed.Rows, r.DP.Rows)
	}
	m.check(t, "matrix_jdbc", r, []string{"text", "int8", "numeric"})
}

func (m *matrix) node(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed (Debian: nodejs)")
	}
	if _, err := os.Stat(filepath.Join("clients", "node_modules", "pg", "package.json")); err != nil {
		missing(t, "node-postgres is not installed in e2e/clients/node_modules: %v", err)
	}
	r := m.decode(t, m.run(t, "matrix_node", node, "pg_client.js"))
	if r.Schema != "public" {
		t.Errorf("current_schema() = %q, want public", r.Schema)
	}
	m.check(t, "matrix_node", r, []string{"text", "int8", "numeric"})
}

// biConnectQueries are what BI tools send on connect and while browsing
// the schema, from their drivers' sources and logs: Metabase 0.55
// (pgJDBC), DBeaver (pgJDBC), Superset (SQLAlchemy with psycopg2). They
// must pass through.
var biConnectQueries = []struct{ tool, sql string }{
	{"metabase", "SET extra_float_digits = 2"},
	{"metabase", "SET application_name = 'Metabase v0.55.1 [f8f63fdf]'"},
	{"metabase", "SHOW TRANSACTION ISOLATION LEVEL"},
	{"metabase", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"},
	{"metabase", `SELECT nspname AS "TABLE_SCHEM", current_database() AS "TABLE_CATALOG" FROM pg_catalog.pg_namespace WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_' OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_' OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_')) ORDER BY "TABLE_SCHEM"`},
	{"metabase", `with table_privileges as (
	  select NULL as role, t.schemaname as schema, t.objectname as table,
	    pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'update') as update,
	    pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'select') as select,
	    pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'insert') as insert,
	    pg_catalog.has_table_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'delete') as delete
	  from (
	    select schemaname, tablename as objectname from pg_catalog.pg_tables
	    union select schemaname, viewname as objectname from pg_catalog.pg_views
	    union select schemaname, matviewname as objectname from pg_catalog.pg_matviews
	  ) t
	  where t.schemaname !~ '^pg_' and t.schemaname <> 'information_schema'
	    and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage'))
	select t.* from table_privileges t`},
	{"metabase", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"},
	{"metabase", "show timezone"},
	{"dbeaver", "SELECT current_schema(),session_user"},
	{"dbeaver", "SHOW search_path"},
	{"dbeaver", "SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass ORDER BY nspname"},
	{"dbeaver", "SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname = current_database()"},
	{"dbeaver", "select * from pg_catalog.pg_settings where name='standard_conforming_strings'"},
	{"dbeaver", "SELECT reset_val FROM pg_catalog.pg_settings WHERE name='search_path'"},
	{"dbeaver", "select string_agg(word, ',') from pg_catalog.pg_get_keywords() where word <> ALL ('{a,abs,absolute,action}'::text[])"},
	{"dbeaver", "SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as base_type_name, d.description FROM pg_catalog.pg_type t LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid WHERE t.typname IS NOT NULL AND (c.relkind IS NULL OR c.relkind = 'c') AND (et.typcategory IS NULL OR et.typcategory <> 'C')"},
	{"dbeaver", "SELECT reltype FROM pg_catalog.pg_class WHERE 1<>1 LIMIT 1"},
	{"superset", "select pg_catalog.version()"},
	{"superset", "select current_schema()"},
	{"superset", "show standard_conforming_strings"},
	{"superset", "show transaction isolation level"},
	{"superset", "SELECT CAST('test plain returns' AS VARCHAR(60)) AS anon_1"},
	{"superset", "SELECT t.oid, typarray FROM pg_type t JOIN pg_namespace ns ON typnamespace = ns.oid WHERE typname = 'hstore'"},
	{"superset", "SELECT c.oid FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE (pg_catalog.pg_table_is_visible(c.oid)) AND c.relname = 'orders' AND c.relkind in ('r', 'v', 'm', 'f', 'p')"},
	{"superset", "SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p']) AND pg_catalog.pg_class.relpersistence != 't' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog'"},
	{"superset", "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef) AS DEFAULT, a.attnotnull, a.attrelid as table_oid, pgd.description as comment, a.attgenerated as generated, (SELECT json_build_object('always', a.attidentity = 'a', 'start', s.seqstart, 'increment', s.seqincrement, 'minvalue', s.seqmin, 'maxvalue', s.seqmax, 'cache', s.seqcache, 'cycle', s.seqcycle) FROM pg_catalog.pg_sequence s, pg_catalog.pg_class c WHERE s.seqrelid = c.oid AND c.relkind = 'S' AND a.attidentity != '' AND s.seqrelid = CAST(pg_catalog.pg_get_serial_sequence(CAST(CAST(a.attrelid AS REGCLASS) AS TEXT), a.attname) AS REGCLASS)) as identity_options FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_description pgd ON (pgd.objoid = a.attrelid AND pgd.objsubid = a.attnum) WHERE a.attrelid = 'public.orders'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"},
	{"drivers", "SELECT current_setting('server_version_num')"},
}

// biTableLists are the tools' table lists, which read row estimates:
// Metabase's sync reads n_live_tup from pg_stat_user_tables, DBeaver's
// navigator selects c.* (reltuples, relpages) from pg_class. They are
// answered with those estimates masked (rewrite/mask.go); name is the
// column holding the table's name.
var biTableLists = []struct{ tool, sql, name string }{
	{"metabase", `SELECT "n"."nspname" AS "schema", "c"."relname" AS "name", "d"."description" AS "description", "stat"."n_live_tup" AS "estimated_row_count" FROM "pg_catalog"."pg_class" AS "c" INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "c"."relnamespace" = "n"."oid" LEFT JOIN "pg_catalog"."pg_description" AS "d" ON ("c"."oid" = "d"."objoid") AND ("d"."objsubid" = '0') AND ("d"."classoid" = 'pg_class'::regclass) LEFT JOIN "pg_stat_user_tables" AS "stat" ON ("n"."nspname" = "stat"."schemaname") AND ("c"."relname" = "stat"."relname") WHERE ("n"."nspname" !~ '^pg_') AND c.relkind in ('r', 'p', 'v', 'f', 'm') ORDER BY "schema" ASC, "name" ASC`, "name"},
	{"dbeaver", "SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as partition_expr, pg_catalog.pg_get_partkeydef(c.oid) as partition_key FROM pg_catalog.pg_class c LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_class'::regclass WHERE c.relnamespace = 2200 AND c.relkind not in ('i','I','c')", "relname"},
}

// rowEstimates analyses orders directly on the upstream and returns its
// real estimates once PostgreSQL shows them (all > 0): what the proxy must
// not pass on.
func rowEstimates(t *testing.T) (reltuples float32, relpages int32, liveTup int64) {
	t.Helper()
	up := direct(t)
	if _, err := up.Exec(ctx, "ANALYZE orders"); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		err := up.QueryRow(ctx, `SELECT c.reltuples, c.relpages, coalesce(s.n_live_tup, 0) FROM pg_class c
			LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = 'public.orders'::regclass`).Scan(&reltuples, &relpages, &liveTup)
		if err != nil {
			t.Fatal(err)
		}
		if reltuples > 0 && relpages > 0 && liveTup > 0 {
			return reltuples, relpages, liveTup
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("orders not analysed: reltuples %v, relpages %v, n_live_tup %v", reltuples, relpages, liveTup)
	return
}

// queryMap runs sql and returns its columns ("name:type oid") and its rows
// by column name.
func queryMap(t *testing.T, conn *pgx.Conn, sql string) ([]string, []map[string]any) {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%.60s...: %v", sql, err)
	}
	defer rows.Close()
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, fmt.Sprintf("%s:%d", f.Name, f.DataTypeOID))
	}
	var out []map[string]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		row := map[string]any{}
		for i, f := range rows.FieldDescriptions() {
			row[f.Name] = vals[i]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%.60s...: %v", sql, err)
	}
	return cols, out
}

// TestBIToolConnectQueries sends the BI tools' connect and browse queries
// with the simple protocol and with pgx's named prepared statements; their
// table lists come back with row estimates masked.
func TestBIToolConnectQueries(t *testing.T) {
	cfg := configFor(t, clientsConfig, map[string]string{"PW": matrixPassword})
	_, addr, _ := startProxyWith(t, cfg)
	m := &matrix{}
	m.host, m.port, _ = net.SplitHostPort(addr)
	reltuples, relpages, liveTup := rowEstimates(t)
	up := direct(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			conn := m.pgxConn(t, "matrix_bi", mode)
			for _, q := range biConnectQueries {
				rows, err := conn.Query(ctx, q.sql)
				if err == nil {
					rows.Close()
					err = rows.Err()
				}
				if err != nil {
					t.Errorf("%s: %.80s...: %v", q.tool, q.sql, err)
				}
			}
			// The table lists: the same columns (names, types, order) and
			// tables as directly on the database, with the estimates the
			// database has for orders replaced by PostgreSQL's "unknown"
			// (reltuples -1, relpages 0) or NULL.
			for _, q := range biTableLists {
				wantCols, wantRows := queryMap(t, up, q.sql)
				gotCols, gotRows := queryMap(t, conn, q.sql)
				if !slices.Equal(gotCols, wantCols) {
					t.Errorf("%s: columns through the proxy\n%v\nwant\n%v", q.tool, gotCols, wantCols)
				}
				if len(gotRows) != len(wantRows) {
					t.Errorf("%s: %d tables through the proxy, %d directly", q.tool, len(gotRows), len(wantRows))
				}
				found := 0
				for _, r := range gotRows {
					if r[q.name] != "orders" {
						continue
					}
					found++
					switch q.tool {
					case "metabase":
						if r["estimated_row_count"] != nil {
							t.Errorf("metabase: estimated_row_count of orders = %v, want NULL (n_live_tup is %d)", r["estimated_row_count"], liveTup)
						}
					case "dbeaver":
						if r["reltuples"] != float32(-1) || r["relpages"] != int32(0) || r["relallvisible"] != int32(0) {
							t.Errorf("dbeaver: orders has reltuples %v relpages %v relallvisible %v, want -1 0 0 (really %v %v)",
								r["reltuples"], r["relpages"], r["relallvisible"], reltuples, relpages)
						}
					}
				}
				if found != 1 {
					t.Errorf("%s: orders listed %d times, want once", q.tool, found)
				}
			}
			m.checkCharge(t, "matrix_bi", 0)
		})
	}
}

// TestStartupParametersOnAReusedUpstream connects again and again with
// startup parameters, as psql, psycopg and pgJDBC do: each session gets
// an upstream connection the previous one left (DISCARD ALL), and applying
// the parameters there must not trip over state of the previous session.
func TestStartupParametersOnAReusedUpstream(t *testing.T) {
	cfg := configFor(t, clientsConfig, map[string]string{"PW": matrixPassword})
	_, addr, _ := startProxyWith(t, cfg)
	host, port, _ := net.SplitHostPort(addr)
	for i := range 4 {
		cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://matrix_bi@%s/shop?sslmode=disable", net.JoinHostPort(host, port)))
		if err != nil {
			t.Fatal(err)
		}
		cc.Password = matrixPassword
		cc.RuntimeParams["application_name"] = fmt.Sprintf("reuse-%d", i)
		cc.RuntimeParams["client_encoding"] = "UTF8"
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		var app string
		err = conn.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app)
		conn.Close(ctx)
		if err != nil || app != fmt.Sprintf("reuse-%d", i) {
			t.Fatalf("connection %d: application_name = %q, %v; want reuse-%d", i, app, err, i)
		}
		// The session's upstream goes back to the pool after the client
		// has gone; wait for it so the next connection reuses it.
		time.Sleep(50 * time.Millisecond)
	}
}
