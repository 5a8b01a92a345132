package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/testconf"
)

// Issue 14's client matrix (item 7; README "Clients"): asyncpg, SQLAlchemy
// 1.4's inspector with pandas read_sql, psqlODBC through unixODBC and
// pyodbc, postgres.js, knex, and pgcli driven under tmux. Each client runs
// once, as one process, through: catalog browsing its own way, a DP GROUP
// BY, a refusal (SELECT * of a private table: 42501) and the connection
// used after it, a syntax error (42601) and the connection used after it,
// and a query with a bound parameter. The programs (e2e/clients/clients14.py
// and clients14.js) record each step's result or error and print JSON; the
// judgement is here. scripts/install-clients.sh installs the clients.
//
// Each process runs under clientTimeout and each step under
// DPPROXY_STEP_TIMEOUT, so a hang fails in seconds instead of blocking CI.

const (
	clientTimeout = 40 * time.Second
	stepTimeout   = "5"
)

// clients14Users are the matrix's analysts, one per client (each has its
// own budget and ledger line).
var clients14Users = []string{"asyncpg", "sqlalchemy", "odbc", "postgresjs", "knex", "pgcli"}

// clients14Config is the matrix's proxy (testconf.Clients) with these
// analysts.
func clients14Config() string {
	var users []string
	for _, u := range clients14Users {
		users = append(users, fmt.Sprintf("{name: matrix_%s, password_env: PW, budget: {epsilon: 100, delta: 1.0e-3}}", u))
	}
	return testconf.Get(testconf.Clients).Set("["+strings.Join(users, ", ")+"]", "auth", "users").String()
}

// stepResult is one step of a client's report: what it got, or its error.
type stepResult struct {
	Error    string            `json:"error"`
	SQLState string            `json:"sqlstate"`
	Message  string            `json:"message"`
	Timeout  bool              `json:"timeout"`
	Value    any               `json:"value"`
	Names    []string          `json:"names"`
	Rows     []dpRow           `json:"rows"`
	Tables   []string          `json:"tables"`
	Columns  map[string]string `json:"columns"`
	Catalog  string            `json:"catalog"`
	PK       []string          `json:"primary_key"`
	FKs      []string          `json:"foreign_keys"`
	HasTable *bool             `json:"has_table"`
}

func (s stepResult) String() string {
	switch {
	case s.Timeout:
		return "no answer within " + stepTimeout + "s (hang)"
	case s.Error != "":
		return fmt.Sprintf("%s SQLSTATE %s: %s", s.Error, s.SQLState, s.Message)
	}
	b, _ := json.Marshal(s)
	return string(b)
}

type stepReport map[string]json.RawMessage

func (r stepReport) step(t *testing.T, name string) (stepResult, bool) {
	t.Helper()
	raw, ok := r[name]
	if !ok {
		t.Errorf("%s: the client did not report this step", name)
		return stepResult{}, false
	}
	var s stepResult
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Errorf("%s: %v in %s", name, err, raw)
		return stepResult{}, false
	}
	return s, true
}

// answered reports whether a step got an answer, and fails the test if not.
func (r stepReport) answered(t *testing.T, name, why string) (stepResult, bool) {
	t.Helper()
	s, ok := r.step(t, name)
	if !ok {
		return s, false
	}
	if s.Timeout || s.Error != "" {
		t.Errorf("%s (%s): %v, want an answer", name, why, s)
		return s, false
	}
	return s, true
}

// refused checks a step failed with the SQLSTATE want.
func (r stepReport) refused(t *testing.T, name, want string) {
	t.Helper()
	s, ok := r.step(t, name)
	if !ok {
		return
	}
	if s.Timeout || s.SQLState != want {
		t.Errorf("%s: %v, want SQLSTATE %s", name, s, want)
	}
}

// runClient14 runs one client program with the proxy's address and an
// analyst's credentials in its environment; it fails fast on a hang.
func (m *matrix) runClient14(t *testing.T, user string, name string, args ...string) stepReport {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Dir = "clients"
	cmd.Env = append(os.Environ(),
		"DPPROXY_HOST="+m.host, "DPPROXY_PORT="+m.port, "DPPROXY_USER="+user,
		"DPPROXY_PASSWORD="+matrixPassword, "DPPROXY_DB=shop", "DPPROXY_STEP_TIMEOUT="+stepTimeout,
		"PYTHONDONTWRITEBYTECODE=1",
	)
	cmd.WaitDelay = 2 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("%s %s ran in %v", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s: %v (timeout %v)\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, clientTimeout, out, stderr.String())
	}
	if testing.Verbose() {
		t.Logf("report: %s", bytes.TrimSpace(out))
		if stderr.Len() > 0 {
			t.Logf("stderr:\n%s", stderr.String())
		}
	}
	var r stepReport
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("client output is not the expected JSON: %v\n%s", err, out)
	}
	return r
}

// checkCommon judges the steps every client runs: catalog, DP GROUP BY,
// refusal and reuse, syntax error and reuse, bound parameter.
func (m *matrix) checkCommon(t *testing.T, r stepReport, columns bool) {
	t.Helper()
	if s, ok := r.answered(t, "catalog", "catalog browsing"); ok {
		for _, tbl := range []string{"customers", "orders", "products"} {
			if !slices.Contains(s.Tables, tbl) {
				t.Errorf("catalog: tables %v, want %s among them", s.Tables, tbl)
			}
		}
		if columns {
			for _, c := range []string{"customer_id", "amount", "ordered_at", "region"} {
				if _, ok := s.Columns[c]; !ok {
					t.Errorf("catalog: columns of orders %v, want %s among them", s.Columns, c)
				}
			}
		}
	}
	if s, ok := r.answered(t, "dp", "DP GROUP BY, amount > 10"); ok {
		m.checkDP(t, "dp", dpReport{Names: s.Names, Rows: s.Rows}, 10, nil)
	}
	r.refused(t, "refusal", "42501")
	r.refused(t, "syntax", "42601")
	for _, after := range []string{"after_refusal", "after_syntax"} {
		if s, ok := r.answered(t, after, "the connection is usable after an error"); ok && fmt.Sprint(s.Value) != "50" {
			t.Errorf("%s: count of products = %v, want the exact 50", after, s.Value)
		}
	}
	if s, ok := r.answered(t, "param", "DP GROUP BY with amount > bound parameter 400"); ok {
		m.checkDP(t, "param", dpReport{Names: s.Names, Rows: s.Rows}, 400, nil)
	}
}

func TestClients14(t *testing.T) {
	cfg := configFor(t, clients14Config(), map[string]string{"PW": matrixPassword})
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
	t.Run("asyncpg", func(t *testing.T) { t.Parallel(); m.asyncpg(t) })
	t.Run("sqlalchemy-pandas", func(t *testing.T) { t.Parallel(); m.sqlalchemy(t) })
	t.Run("psqlodbc", func(t *testing.T) { t.Parallel(); m.odbc(t) })
	t.Run("postgres.js", func(t *testing.T) { t.Parallel(); m.nodeClient(t, "postgres", "matrix_postgresjs") })
	t.Run("knex", func(t *testing.T) { t.Parallel(); m.nodeClient(t, "knex", "matrix_knex") })
	t.Run("pgcli", func(t *testing.T) { t.Parallel(); m.pgcli(t) })
}

func pythonHas(t *testing.T, modules, debian string) {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import "+modules).Run(); err != nil {
		missing(t, "%s cannot import %s: %v (Debian: %s)", debianPython, modules, err, debian)
	}
}

// asyncpg: Parse/Describe/Flush without Sync, binary formats, named
// statements, and its type introspection for products' row type.
func (m *matrix) asyncpg(t *testing.T) {
	pythonHas(t, "asyncpg", "python3-asyncpg")
	r := m.runClient14(t, "matrix_asyncpg", debianPython, "clients14.py", "asyncpg")
	m.checkCommon(t, r, false)
	if s, ok := r.answered(t, "introspection", "asyncpg's type introspection of a composite"); ok {
		if v, _ := s.Value.([]any); len(v) != 4 {
			t.Errorf("introspection: products row = %v, want its 4 fields", s.Value)
		}
	}
}

// SQLAlchemy 1.4: inspect(engine) (Superset's schema discovery) and
// pandas.read_sql of a DP query, over psycopg2.
func (m *matrix) sqlalchemy(t *testing.T) {
	pythonHas(t, "sqlalchemy, pandas, psycopg2", "python3-sqlalchemy python3-pandas python3-psycopg2")
	r := m.runClient14(t, "matrix_sqlalchemy", debianPython, "clients14.py", "sqlalchemy")
	m.checkCommon(t, r, true)
	if s, ok := r.step(t, "catalog"); ok && s.Error == "" {
		if !slices.Contains(s.PK, "order_id") {
			t.Errorf("get_pk_constraint(orders) = %v, want order_id", s.PK)
		}
		for _, fk := range []string{"customer_id->customers", "product_id->products"} {
			if !slices.Contains(s.FKs, fk) {
				t.Errorf("get_foreign_keys(orders) = %v, want %s", s.FKs, fk)
			}
		}
	}
	if s, ok := r.step(t, "dp"); ok && s.Error == "" && !slices.Equal(s.Names, []string{"region", "n", "mean"}) {
		t.Errorf("read_sql columns %v, want [region n mean]", s.Names)
	}
	m.checkCharge(t, "matrix_sqlalchemy", 2)
}

// odbcDriver is Debian's odbc-postgresql (Unicode driver).
const odbcDriver = "/usr/lib/x86_64-linux-gnu/odbc/psqlodbcw.so"

// psqlODBC: SQLTables/SQLColumns (Tableau, Excel, Power BI), ? parameters
// and the three-part names MS Query writes with the catalog SQLTables
// reports.
func (m *matrix) odbc(t *testing.T) {
	if _, err := os.Stat(odbcDriver); err != nil {
		missing(t, "psqlODBC is not installed: %v (Debian: odbc-postgresql unixodbc)", err)
	}
	pythonHas(t, "pyodbc", "python3-pyodbc")
	r := m.runClient14(t, "matrix_odbc", debianPython, "clients14.py", "odbc")
	m.checkCommon(t, r, true)
	// psqlODBC reports as the catalog the dbname it connected with (not
	// current_database()); MS Query writes it into three-part names.
	if s, ok := r.step(t, "catalog"); ok && s.Error == "" && s.Catalog != "shop" {
		t.Errorf("SQLTables reports catalog %q, want the connection's database shop", s.Catalog)
	}
	// Issue 14 item 4: a three-part name naming the session's database is
	// accepted, for public and private tables.
	if s, ok := r.answered(t, "three_part_public", "catalog.public.products (MS Query)"); ok && fmt.Sprint(s.Value) != "50" {
		t.Errorf("three_part_public: count = %v, want 50", s.Value)
	}
	if s, ok := r.answered(t, "three_part", "DP GROUP BY over catalog.public.orders (MS Query)"); ok {
		m.checkDP(t, "three_part", dpReport{Rows: s.Rows}, 10, nil)
	}
}

// postgres.js (named statements, every value bound) and knex on
// node-postgres (whereLike binds the LIKE pattern).
func (m *matrix) nodeClient(t *testing.T, module, user string) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed (Debian: nodejs)")
	}
	if _, err := os.Stat(filepath.Join("clients", "node_modules", module, "package.json")); err != nil {
		missing(t, "%s is not installed in e2e/clients/node_modules: %v", module, err)
	}
	r := m.runClient14(t, user, node, "clients14.js", module)
	m.checkCommon(t, r, true)
	if module != "knex" {
		m.checkCharge(t, user, 2)
		return
	}
	if s, ok := r.step(t, "catalog"); ok && s.HasTable != nil && !*s.HasTable {
		t.Errorf("knex.schema.hasTable(orders) = false")
	}
	// Issue 14 item 3: a LIKE pattern bound as a parameter is checked at
	// Bind and answered.
	var likeSQL string
	_ = json.Unmarshal(r["like_sql"], &likeSQL)
	if !strings.Contains(strings.ToLower(likeSQL), "like $") {
		t.Errorf("knex whereLike wrote %q, want the pattern as a parameter", likeSQL)
	}
	m.checkLike(t, r, "like_literal", "region LIKE 'n%' written in the text")
	m.checkLike(t, r, "like", "whereLike('region', 'n%') bound as "+likeSQL)
}

// checkLike judges region LIKE 'n%' AND amount > 10 GROUP BY region: region
// has declared public values, so every one is a group; north's count is
// near the truth, the others' near 0.
func (m *matrix) checkLike(t *testing.T, r stepReport, name, why string) {
	t.Helper()
	s, ok := r.answered(t, name, why)
	if !ok {
		return
	}
	var regions []string
	for _, row := range s.Rows {
		regions = append(regions, row.Region)
		truth := 0.0
		if row.Region == "north" {
			truth = m.truth[10]["north"]
		}
		if row.Count < 0 || row.Count-truth > countTolerance || truth-row.Count > countTolerance {
			t.Errorf("%s: %s count = %v, want within %d of %v", name, row.Region, row.Count, countTolerance, truth)
		}
	}
	if !slices.Equal(regions, dpRegions) {
		t.Errorf("%s: regions %v, want every public value %v", name, regions, dpRegions)
	}
}

// pgcli 3.5 under tmux: its completion refresher's catalog queries run at
// start (table names complete), then the matrix's questions are typed. It
// shows errors without their SQLSTATE, so the refusal and the syntax error
// are judged by their messages.
func (m *matrix) pgcli(t *testing.T) {
	pgcli, err := exec.LookPath("pgcli")
	if err != nil {
		missing(t, "pgcli is not installed (Debian: pgcli)")
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		missing(t, "tmux is not installed (Debian: tmux)")
	}
	dir := t.TempDir()
	rc := filepath.Join(dir, "pgclirc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf(`[main]
smart_completion = True
multi_line = False
enable_pager = False
keyring = False
log_file = %s
log_level = DEBUG
history_file = %s
less_chatty = True
prompt = 'pgcli> '
`, filepath.Join(dir, "pgcli.log"), filepath.Join(dir, "history"))), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tmux, append([]string{"-S", sock}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "PGPASSWORD="+matrixPassword,
			"PAGER=cat", "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	start := time.Now()
	tm("new-session", "-d", "-s", "pgcli", "-x", "200", "-y", "50",
		pgcli, "--pgclirc", rc, "-h", m.host, "-p", m.port, "-U", "matrix_pgcli", "-d", "shop", "--less-chatty")
	t.Cleanup(func() {
		exec.Command(tmux, "-S", sock, "kill-server").Run()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "pgcli.log")); err == nil {
				t.Logf("pgcli.log:\n%s", b)
			}
		}
	})
	screen := func() string { return tm("capture-pane", "-p", "-J", "-S", "-", "-t", "pgcli") }
	prompt := regexp.MustCompile(`(?m)^pgcli>`)
	// pgcli ends each statement's output with a "Time: " line.
	done := regexp.MustCompile(`(?m)^Time: .*$`)
	// waitFor polls the screen until re matches n times and returns what
	// is between the (n-1)th and the nth match.
	waitFor := func(what string, re *regexp.Regexp, n int) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := screen()
			if p := re.FindAllStringIndex(s, -1); len(p) >= n {
				from := 0
				if n > 1 {
					from = p[n-2][1]
				}
				return s[from:p[n-1][1]]
			}
			if time.Now().After(deadline) {
				t.Errorf("pgcli %s: not finished within 10s; screen:\n%s", what, s)
				return s
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("start", prompt, 1)
	// typed sends a line (and keys before its Enter) and returns it with
	// what pgcli printed for it.
	statements := 0
	typed := func(what, line string, keys ...string) string {
		t.Helper()
		if line != "" {
			tm("send-keys", "-t", "pgcli", "-l", line)
		}
		for _, k := range keys {
			time.Sleep(300 * time.Millisecond)
			tm("send-keys", "-t", "pgcli", k)
		}
		tm("send-keys", "-t", "pgcli", "Enter")
		statements++
		return waitFor(what, done, statements)
	}
	// The completion refresher runs its catalog queries in the background
	// at start: once it has, a table name completes with Tab (no keyword
	// starts with "produ"). Tab is pressed until it does (10 s at most);
	// then the first Enter takes the completion, the second runs the line.
	tm("send-keys", "-t", "pgcli", "-l", "SELECT count(*) AS n FROM produ")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		tm("send-keys", "-t", "pgcli", "Tab")
		time.Sleep(200 * time.Millisecond)
		s := screen()
		p := prompt.FindAllStringIndex(s, -1)
		if line, _, _ := strings.Cut(s[p[len(p)-1][0]:], "\n"); strings.Contains(line, "FROM products") {
			break
		}
	}
	out := typed("completion", "", "Enter")
	if !strings.Contains(out, "FROM products") || !regexp.MustCompile(`\|\s*50\s*\|`).MatchString(out) {
		t.Errorf("pgcli: \"FROM produ\" + Tab did not complete to products and count its 50 rows (the completion refresher's catalog queries):\n%s", out)
	}
	out = typed("refusal", "SELECT * FROM orders")
	if !strings.Contains(out, "SELECT * would return individual rows of private table") {
		t.Errorf("pgcli: SELECT * FROM orders did not show the refusal:\n%s", out)
	}
	out = typed("syntax error", "SELEC 1")
	if !strings.Contains(out, "syntax error") {
		t.Errorf("pgcli: SELEC 1 did not show a syntax error:\n%s", out)
	}
	out = typed("DP GROUP BY", "SELECT region, count(*) AS n, avg(amount) AS mean FROM orders WHERE amount > 10 GROUP BY region ORDER BY region")
	var rows []dpRow
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		if len(f) != 3 {
			continue
		}
		n, err1 := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
		mean, err2 := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err1 == nil && err2 == nil {
			rows = append(rows, dpRow{strings.TrimSpace(f[0]), n, mean})
		}
	}
	m.checkDP(t, "pgcli DP GROUP BY", dpReport{Rows: rows}, 10, nil)
	m.checkCharge(t, "matrix_pgcli", 1)
	t.Logf("pgcli ran in %v", time.Since(start).Round(time.Millisecond))
}
