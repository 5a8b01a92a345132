package proxy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// numericTypes are the column types clamping bounds fit.
var numericTypes = map[string]bool{
	"smallint": true, "integer": true, "bigint": true, "numeric": true, "real": true, "double precision": true,
}

// writePrivileges are the table privileges that let a role change a table.
var writePrivileges = []string{"INSERT", "UPDATE", "DELETE", "TRUNCATE"}

// maxListed caps how many writable tables outside the configuration a
// problem names.
const maxListed = 10

// CheckSchema connects to the upstream with the configured credentials and
// checks the configuration against it: every configured table and column
// exists, bounded columns are numeric, the privacy unit exists, and the
// query role (upstream) can read the configured tables but write none of
// them, nor any other table, and can reach nothing in the ledger's schema
// dpproxy; the ledger role (ledger_upstream) can charge the ledger. One DSN
// for both roles (the demo's set-up) is a problem. It returns a readable
// report and an error joining every problem found, each naming the file and
// the key.
func CheckSchema(ctx context.Context, cfg *conf.Config) (report []string, err error) {
	conn, err := pgx.Connect(ctx, cfg.Upstream.Reveal())
	if err != nil {
		// The URL may hold a password: never print it or pgx's error for
		// a URL that does not parse (which can quote it).
		return nil, connectProblem("upstream", err)
	}
	defer conn.Close(ctx)
	c := &checker{cfg: cfg, conn: conn, ledgerConn: conn}
	if !cfg.SharedLedger() {
		lconn, err := pgx.Connect(ctx, cfg.LedgerUpstream.Reveal())
		if err != nil {
			c.ledgerConn = nil
			c.problems = append(c.problems, connectProblem("ledger_upstream", err))
		} else {
			defer lconn.Close(ctx)
			c.ledgerConn = lconn
		}
	}
	c.run(ctx)
	return c.report, errors.Join(c.problems...)
}

// connectProblem names why key's URL could not connect (ConnectFailure),
// or only that it does not parse.
func connectProblem(key string, err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return fmt.Errorf("%s: cannot connect with the configured URL: it is not a valid postgres:// URL or DSN", key)
	}
	return ConnectFailure(key, err)
}

type checker struct {
	cfg      *conf.Config
	conn     *pgx.Conn // the query role's
	report   []string
	problems []error
	role     string // the query role
	db       string
	super    bool

	// ledgerConn is the ledger role's connection: conn itself when the
	// configuration has one DSN, nil when it cannot connect.
	ledgerConn  *pgx.Conn
	ledgerRole  string
	ledgerSuper bool
}

func (c *checker) say(format string, args ...any) {
	c.report = append(c.report, fmt.Sprintf(format, args...))
}

func (c *checker) problem(key, format string, args ...any) {
	c.problems = append(c.problems, fmt.Errorf("%s: %s: %s", c.cfg.Where(key), key, fmt.Sprintf(format, args...)))
}

// fail records a catalog query that failed: the check cannot go on
// trusting what it read.
func (c *checker) fail(what string, err error) {
	c.problems = append(c.problems, fmt.Errorf("upstream: %s: %w", what, err))
}

// ledgerKey is the configuration key that names the ledger role.
func (c *checker) ledgerKey() string {
	if c.cfg.SharedLedger() {
		return "upstream"
	}
	return "ledger_upstream"
}

func (c *checker) run(ctx context.Context) {
	var version string
	err := c.conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_user, current_database(),
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)`).Scan(&version, &c.role, &c.db, &c.super)
	if err != nil {
		c.fail("reading the server version and role", err)
		return
	}
	c.say("upstream: PostgreSQL %s, database %s, role %s", version, c.db, c.role)
	c.connections(ctx)
	if c.super {
		c.problem("upstream", "role %s is a superuser: it can write every table, the ledger's too, and bypass every grant; connect as a role that may only SELECT the configured tables (see docs/operations.md)", c.role)
	}
	if c.cfg.SharedLedger() {
		c.ledgerRole, c.ledgerSuper = c.role, c.super
		c.problem("ledger_upstream", "absent or the same as upstream: role %s both runs analysts' statements and may change budgets, so any statement on a query connection could change them; that is for a demo only: give the ledger a role of its own and set ledger_upstream (see docs/operations.md)", c.role)
	} else if c.ledgerConn != nil {
		var ldb string
		err := c.ledgerConn.QueryRow(ctx, `SELECT current_user, current_database(),
			(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)`).Scan(&c.ledgerRole, &ldb, &c.ledgerSuper)
		if err != nil {
			c.fail("reading the ledger role", err)
			c.ledgerConn = nil
		} else {
			c.say("ledger_upstream: database %s, role %s", ldb, c.ledgerRole)
		}
	}
	names := make([]string, 0, len(c.cfg.Tables))
	for k := range c.cfg.Tables {
		names = append(names, k)
	}
	sort.Strings(names)
	readable := 0
	for _, name := range names {
		if c.table(ctx, name) {
			readable++
		}
	}
	if !c.super {
		c.otherWritable(ctx)
		if !c.cfg.SharedLedger() {
			c.outOfReach(ctx)
		}
	}
	if c.ledgerConn != nil {
		c.ledger(ctx)
	}
	c.replicaChecks(ctx) // replicas.go
	if len(c.problems) == 0 {
		c.say("privileges: %s reads all %d configured tables, can write none of them and cannot reach the ledger", c.role, readable)
	}
}

// connections checks the proxy's upstream connections against the
// server's max_connections, as the proxy does at start (checkLimits): it
// reports what fits, warns when the proxy would lower
// limits.max_connections to fit, and is a problem when no connection is
// left for analysts.
func (c *checker) connections(ctx context.Context) {
	capa, err := readCapacity(ctx, c.conn)
	if err != nil {
		c.fail("reading max_connections", err)
		return
	}
	l := c.cfg.Limits.WithDefaults()
	if l.Pool.Transaction() {
		// Sessions share limits.pool.max_backends connections (pool.go).
		if room, fits := poolFits(l, capa); !fits {
			c.problem("limits.pool.max_backends", "%d exceeds the %d connections the upstream can give next to the ledger's pool: lower it or raise max_connections on the server", l.Pool.MaxBackends, room)
		} else {
			c.say("connections: transaction pooling, %d upstream connections for up to %d sessions, %d for the ledger", l.Pool.MaxBackends, l.MaxConnections, ledgerPoolSize(l))
		}
		if l.MaxConcurrentPrivate > l.Pool.MaxBackends {
			c.say("warning: limits.max_concurrent_private_queries (%d) exceeds limits.pool.max_backends (%d): private queries holding a slot may wait for a connection", l.MaxConcurrentPrivate, l.Pool.MaxBackends)
		}
		return
	}
	fit, fits := fitConnections(l, capa)
	switch {
	case fit < 1:
		c.problem("limits.max_connections", "no upstream connection left for analysts: %s; raise max_connections on the server", capacityReport(l, capa))
	case !fits:
		c.say("warning: limits.max_connections: %s, which leaves %d for analysts: the proxy will serve at most %d sessions (set limits.max_connections to %d, or raise max_connections on the server)",
			capacityReport(l, capa), fit, fit, fit)
	default:
		c.say("connections: %s", capacityReport(l, capa))
	}
	if l.MaxConnectionsPerAnalyst >= min(fit, l.MaxConnections) && len(c.cfg.Auth.Users) > 1 {
		c.say("warning: limits.max_connections_per_analyst (%d) lets one analyst take every connection (%d)", l.MaxConnectionsPerAnalyst, min(fit, l.MaxConnections))
	}
}

// outOfReach checks that the query role can neither reach schema dpproxy
// nor create anything in the database (such as a schema dpproxy of its
// own before the ledger role creates the real one).
func (c *checker) outOfReach(ctx context.Context) {
	found, err := ledgerReach(ctx, c.conn)
	if err != nil {
		c.fail("reading privileges on schema dpproxy", err)
		return
	}
	if msg := reachProblem(c.role, c.ledgerRole, found); msg != "" {
		c.problem("upstream", "%s", msg)
	}
	var create bool
	if err := c.conn.QueryRow(ctx, `SELECT has_database_privilege(current_database(), 'CREATE')`).Scan(&create); err != nil {
		c.fail("reading privileges on the database", err)
		return
	}
	if create {
		c.problem("upstream", "role %s can CREATE schemas in database %s: the query role should create nothing, not even a schema dpproxy before the ledger role makes its own (REVOKE CREATE ON DATABASE %s FROM PUBLIC, %s; a database owner has it)",
			c.role, c.db, quoteIdent(c.db), quoteIdent(c.role))
	}
}

// table checks one configured table and reports whether the role can read it.
func (c *checker) table(ctx context.Context, name string) bool {
	t := c.cfg.Tables[name]
	key := "tables." + name
	rows, err := c.conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, NULL)
		FROM pg_attribute a
		WHERE a.attrelid = to_regclass(quote_ident($1) || '.' || quote_ident($2))
		  AND a.attnum > 0 AND NOT a.attisdropped`, t.Schema, t.Name)
	if err != nil {
		c.fail(key+": reading the catalog", err)
		return false
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var v [2]string
		err := r.Scan(&v[0], &v[1])
		return v, err
	})
	if err != nil {
		c.fail(key+": reading the catalog", err)
		return false
	}
	types := map[string]string{}
	for _, v := range cols {
		types[v[0]] = v[1]
	}
	if len(types) == 0 {
		c.problem(key, "no such table or view %s in the upstream database", t.QualifiedName())
		return false
	}
	canRead := c.privileges(ctx, key, t)

	if t.Public {
		c.say("%s: public, %d columns", t.QualifiedName(), len(types))
		return canRead
	}
	if _, ok := types[t.PrivacyUnit]; !ok {
		c.problem(key+".privacy_unit", "column %q does not exist in %s", t.PrivacyUnit, t.QualifiedName())
	}
	var desc []string
	colNames := make([]string, 0, len(t.Columns))
	for cn := range t.Columns {
		colNames = append(colNames, cn)
	}
	sort.Strings(colNames)
	for _, cn := range colNames {
		col := t.Columns[cn]
		typ, ok := types[cn]
		if !ok {
			c.problem(key+".columns."+cn, "column does not exist in %s", t.QualifiedName())
			continue
		}
		if col.HasBounds() {
			if !numericTypes[typ] {
				c.problem(key+".columns."+cn, "lower/upper bounds need a numeric column, but %s.%s is %s", t.QualifiedName(), cn, typ)
			}
			desc = append(desc, fmt.Sprintf("%s in [%v, %v]", cn, *col.Lower, *col.Upper))
		}
		if col.PublicValues != nil {
			desc = append(desc, fmt.Sprintf("%s public values %s", cn, strings.Join(col.PublicValues, ", ")))
		}
		if f := col.PublicValuesFrom; f != nil {
			// As serve will read them (publicvalues.go).
			vals, err := readColumnValues(ctx, c.conn, f)
			switch {
			case err != nil:
				c.problem(key+".columns."+cn+".public_values", "reading %s.%s: %v", f.Table, f.Column, err)
			case len(vals) == 0 || len(vals) > rewrite.MaxPublicTableKeys:
				c.problem(key+".columns."+cn+".public_values", "%s.%s has %s values; public values need 1 to %d", f.Table, f.Column, countWord(len(vals)), rewrite.MaxPublicTableKeys)
			default:
				desc = append(desc, fmt.Sprintf("%s public values the %d of %s.%s (read when dpproxy starts)", cn, len(vals), f.Table, f.Column))
			}
		}
	}
	line := fmt.Sprintf("%s: private, unit %s, at most %d groups per unit and %d rows per unit per group",
		t.QualifiedName(), t.PrivacyUnit, t.MaxGroupsPerUnit, t.MaxRowsPerUnit)
	if len(desc) > 0 {
		line += "; " + strings.Join(desc, "; ")
	}
	c.say("%s", line)
	return canRead
}

// privileges checks that the role can SELECT t and cannot change it.
func (c *checker) privileges(ctx context.Context, key string, t *conf.Table) bool {
	var canRead bool
	var writes []string
	err := c.conn.QueryRow(ctx, `
		WITH t AS (SELECT to_regclass(quote_ident($1) || '.' || quote_ident($2)) AS oid)
		SELECT has_table_privilege(t.oid, 'SELECT'),
		       array_remove(ARRAY[
		         CASE WHEN has_table_privilege(t.oid, 'INSERT') THEN 'INSERT' END,
		         CASE WHEN has_table_privilege(t.oid, 'UPDATE') THEN 'UPDATE' END,
		         CASE WHEN has_table_privilege(t.oid, 'DELETE') THEN 'DELETE' END,
		         CASE WHEN has_table_privilege(t.oid, 'TRUNCATE') THEN 'TRUNCATE' END], NULL)
		FROM t`, t.Schema, t.Name).Scan(&canRead, &writes)
	if err != nil {
		c.fail(key+": reading privileges", err)
		return false
	}
	if !canRead {
		c.problem(key, "role %s cannot SELECT %s (GRANT SELECT ON %s TO %s)", c.role, t.QualifiedName(), t.QualifiedName(), c.role)
	}
	if len(writes) > 0 && !c.super {
		c.problem(key, "role %s can %s %s: the proxy must only read the tables it protects (REVOKE %s ON %s FROM %s; a table owner has every privilege)",
			c.role, strings.Join(writes, ", "), t.QualifiedName(), strings.Join(writes, ", "), t.QualifiedName(), c.role)
	}
	return canRead
}

// otherWritable reports tables outside the configuration and the ledger
// that the query role could change (outOfReach reports the ledger's).
func (c *checker) otherWritable(ctx context.Context) {
	configured := map[string]bool{}
	for _, t := range c.cfg.Tables {
		configured[t.QualifiedName()] = true
	}
	rows, err := c.conn.Query(ctx, `
		SELECT n.nspname || '.' || c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'dpproxy')
		  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
		  AND (has_table_privilege(c.oid, 'INSERT') OR has_table_privilege(c.oid, 'UPDATE')
		    OR has_table_privilege(c.oid, 'DELETE') OR has_table_privilege(c.oid, 'TRUNCATE'))
		ORDER BY 1`)
	if err != nil {
		c.fail("listing writable tables", err)
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		c.fail("listing writable tables", err)
		return
	}
	var others []string
	for _, n := range names {
		if !configured[n] {
			others = append(others, n)
		}
	}
	if len(others) > 0 {
		more := ""
		if len(others) > maxListed {
			more = fmt.Sprintf(" and %d more", len(others)-maxListed)
			others = others[:maxListed]
		}
		c.problem("upstream", "role %s can write %s%s: the query role should write nothing", c.role, strings.Join(others, ", "), more)
	}
	// CREATE on a schema of a configured table lets the role add objects
	// next to the data it protects.
	schemas := map[string]bool{}
	for _, t := range c.cfg.Tables {
		schemas[t.Schema] = true
	}
	list := make([]string, 0, len(schemas))
	for s := range schemas {
		list = append(list, s)
	}
	sort.Strings(list)
	for _, s := range list {
		var create bool
		err := c.conn.QueryRow(ctx, `SELECT coalesce(has_schema_privilege(to_regnamespace(quote_ident($1))::oid, 'CREATE'), false)`, s).Scan(&create)
		if err != nil {
			c.fail("reading privileges on schema "+s, err)
			continue
		}
		if create {
			c.problem("upstream", "role %s can CREATE in schema %s, which holds configured tables (REVOKE CREATE ON SCHEMA %s FROM %s)", c.role, s, s, c.role)
		}
	}
}

// ledger checks that the ledger role can charge the ledger, or create it
// (the schema, or only its tables in a schema dpproxy it owns).
func (c *checker) ledger(ctx context.Context) {
	key, role := c.ledgerKey(), c.ledgerRole
	var tables, schema, canCreate bool
	err := c.ledgerConn.QueryRow(ctx, `SELECT to_regclass('dpproxy.budgets') IS NOT NULL AND to_regclass('dpproxy.charges') IS NOT NULL,
		to_regnamespace('dpproxy') IS NOT NULL,
		coalesce((SELECT has_schema_privilege(oid, 'CREATE') FROM pg_namespace WHERE nspname = 'dpproxy'),
		         has_database_privilege(current_database(), 'CREATE'))`).Scan(&tables, &schema, &canCreate)
	if err != nil {
		c.fail("reading the ledger schema", err)
		return
	}
	if !tables {
		switch {
		case canCreate || c.ledgerSuper:
			c.say("ledger: no ledger tables in schema dpproxy yet; the proxy creates them on first start")
		case schema:
			c.problem(key, "role %s cannot create the ledger's tables in schema dpproxy (ALTER SCHEMA dpproxy OWNER TO %s)", role, quoteIdent(role))
		default:
			c.problem(key, "schema dpproxy does not exist and role %s cannot create it (CREATE SCHEMA dpproxy AUTHORIZATION %s, as described in docs/operations.md)", role, quoteIdent(role))
		}
		return
	}
	// What a charge needs: read and update budgets (an analyst's and a
	// table's, budget/tables.go), append to every other
	// ledger table (charges, and those later versions add), draw ids.
	var missing []string
	rows, err := c.ledgerConn.Query(ctx, `
		SELECT 'USAGE ON SCHEMA dpproxy' WHERE NOT has_schema_privilege('dpproxy', 'USAGE')
		UNION ALL
		SELECT p || ' ON dpproxy.' || c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
		     unnest(CASE c.relname WHEN 'budgets' THEN ARRAY['SELECT', 'INSERT', 'UPDATE'] WHEN 'table_budgets' THEN ARRAY['SELECT', 'INSERT', 'UPDATE'] WHEN 'answers' THEN ARRAY['SELECT', 'INSERT'] ELSE ARRAY['INSERT'] END) AS p
		WHERE n.nspname = 'dpproxy' AND c.relkind IN ('r', 'p') AND NOT has_table_privilege(c.oid, p)
		UNION ALL
		SELECT 'USAGE ON SEQUENCE dpproxy.' || c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'dpproxy' AND c.relkind = 'S'
		  AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege(c.oid, 'USAGE') END -- CASE: the planner may test other rows first`)
	if err == nil {
		missing, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		c.fail("reading ledger privileges", err)
		return
	}
	if len(missing) > 0 {
		c.problem(key, "role %s cannot charge the ledger: it lacks %s (see docs/operations.md)", role, strings.Join(missing, ", "))
		return
	}
	var analysts int
	if err := c.ledgerConn.QueryRow(ctx, `SELECT count(*) FROM dpproxy.budgets`).Scan(&analysts); err != nil {
		c.fail("reading the ledger", err)
		return
	}
	c.say("ledger: schema dpproxy, %d analysts recorded; role %s can charge it", analysts, role)
	// CREATE on the database let the ledger role make schema dpproxy;
	// with the ledger made, it only widens what that role could do.
	var create bool
	var db string
	if err := c.ledgerConn.QueryRow(ctx, `SELECT has_database_privilege(current_database(), 'CREATE'), current_database()`).Scan(&create, &db); err != nil {
		c.fail("reading the ledger role's privileges on the database", err)
		return
	}
	if create && !c.ledgerSuper && !c.cfg.SharedLedger() {
		c.say("warning: %s: role %s can still CREATE schemas in the database: the ledger exists, so it no longer needs to (REVOKE CREATE ON DATABASE %s FROM %s; a database owner has it)",
			key, role, quoteIdent(db), quoteIdent(role))
	}
}

// listed joins up to maxListed items, saying how many more there are.
func listed(items []string) string {
	if len(items) > maxListed {
		return fmt.Sprintf("%s and %d more", strings.Join(items[:maxListed], ", "), len(items)-maxListed)
	}
	return strings.Join(items, ", ")
}

// quoteIdent quotes name for SQL only when it is not a plain lower-case
// identifier, so that the statements in problems read naturally and run.
func quoteIdent(name string) string {
	for i, r := range name {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')) {
			return pgx.Identifier{name}.Sanitize()
		}
	}
	if name == "" {
		return `""`
	}
	return name
}
