package e2e

// Differential test of issue 11, "One text, one meaning": what PostgreSQL
// parses must be what the proxy checked. For every text the analyzer
// accepts, the oracle takes exactly the SQL the proxy would send upstream
// for each statement (Statement.SQL of a pass-through statement; for a
// private one Plan.DescribeSQL, Plan.SQL, Plan.OriginalSQL and the
// post-processing query), and compares two readings of those bytes:
//
//   - the proxy's: pg_query's parse tree of them (PostgreSQL 16's parser,
//     which the analyzer checked, or, for Plan.SQL, wrote from what it
//     checked);
//   - PostgreSQL's: the upstream (PostgreSQL 15) parses them on a
//     connection with the proxy's pinned settings (rewrite.PinnedSettings)
//     and debug_print_parse on, with a Parse message only: nothing runs,
//     and the analysed parse tree comes back as a LOG notice
//     (nodeToString), with relation and function OIDs, the columns read
//     and every constant's value as bytes.
//
// docs/threat-model.md, "Differential test: the proxy's reading vs
// PostgreSQL's", says what is compared and what is not. Run longer with
//
//	go test -run '^$' -fuzz FuzzDifferential -fuzztime 10m ./e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/golden"
	"github.com/dpproxy/dpproxy/proxy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestDifferentialCorpus runs the oracle over a fixed corpus: the golden
// inputs of rewrite/testdata, the attack corpus, generated statements and
// mutations of the seeds (diffCorpus). Every accepted statement must be
// read alike by the proxy and by PostgreSQL.
func TestDifferentialCorpus(t *testing.T) {
	o := newDiffOracle(t, nil)
	corpus := diffCorpus(t)
	start := time.Now()
	var failed int
	for _, x := range corpus {
		fails, err := o.check(x)
		if err != nil {
			t.Fatalf("oracle broke on %q: %v", x, err)
		}
		for _, f := range fails {
			failed++
			if failed <= 25 || testing.Verbose() {
				t.Error(f)
			}
		}
	}
	if failed > 25 && !testing.Verbose() {
		t.Errorf("... and %d more differences", failed-25)
	}
	t.Logf("%d texts in %v: %s", len(corpus), time.Since(start).Round(time.Millisecond), o.stats.String())
	if o.stats.compared < len(corpus)/10 {
		t.Errorf("only %d texts sent upstream were compared: the corpus no longer exercises the oracle", o.stats.compared)
	}
}

// TestDifferentialOracleCatchesOldDesign shows that the oracle has teeth:
// the bytes the old design sent upstream for the attacks of issue 11 are
// read differently by PostgreSQL than the text the old design checked, and
// the oracle says so. The new design's bytes for the same texts agree.
func TestDifferentialOracleCatchesOldDesign(t *testing.T) {
	o := newDiffOracle(t, nil)
	sjis := newDiffOracle(t, map[string]string{"client_encoding": "SJIS"})
	cases := []struct {
		name    string
		checked string         // the text the old design analysed
		sent    string         // the bytes it sent upstream verbatim
		pg      *diffOracle    // the upstream session's settings
		want    *regexp.Regexp // what the oracle must report
	}{
		{
			// (a) The shape cache blanked string constants, so both texts
			// had one shape; the escape character is a string constant.
			// Checked: a CTE named orders. Sent: the private table.
			name:    "shape cache and UESCAPE",
			checked: `WITH U&"ord!0065rs" UESCAPE '!' AS (SELECT 1 AS customer_id, 2 AS amount) SELECT customer_id, amount FROM orders`,
			sent:    `WITH U&"ord!0065rs" UESCAPE '#' AS (SELECT 1 AS customer_id, 2 AS amount) SELECT customer_id, amount FROM orders`,
			pg:      o, want: regexp.MustCompile(`relations`),
		},
		{
			// (b) "ŕ" is C5 95 in UTF-8; in SJIS C5 is a character and 95 5C
			// is 表, so PostgreSQL sees no backslash before the quote and
			// ends the string there. The proxy read one string constant.
			name:    "SJIS character ending in a backslash",
			checked: "SELECT E'ŕ\\', customer_id FROM orders --'",
			sent:    "SELECT E'ŕ\\', customer_id FROM orders --'",
			pg:      sjis, want: regexp.MustCompile(`relations`),
		},
		{
			// (c) PostgreSQL 16's lexer (pg_query) reads 0x1F as 31;
			// PostgreSQL 15 does not read it at all.
			name:    "PostgreSQL 16 numeric literal",
			checked: "SELECT 0x1F AS a",
			sent:    "SELECT 0x1F AS a",
			pg:      o, want: regexp.MustCompile(`cannot parse`),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree, err := pg_query.Parse(c.checked)
			if err != nil || len(tree.Stmts) != 1 {
				t.Fatalf("pg_query cannot parse the checked text: %v", err)
			}
			diffs, err := c.pg.compareText(c.sent, nil, tree.Stmts[0].Stmt)
			if err != nil {
				t.Fatal(err)
			}
			if !c.want.MatchString(strings.Join(diffs, "\n")) {
				t.Fatalf("the oracle missed the old design's failure:\n  checked %q\n  sent %q\n  differences: %q", c.checked, c.sent, diffs)
			}
			t.Logf("old design caught: %s", strings.Join(diffs, "; "))
			// The new design: the same texts are refused or agree.
			for _, x := range []string{c.checked, c.sent} {
				fails, err := o.check(x)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range fails {
					t.Error(f)
				}
			}
		})
	}
}

// TestDifferentialOracleSeesChanges measures the oracle's sensitivity on
// the corpus: in the text the proxy would send for each accepted
// pass-through SELECT, one constant, name or operator is changed in the
// proxy's reading only (PostgreSQL reads the original bytes). The oracle
// must notice nearly every change. What it cannot see: a typmod
// (varchar(60)) and an ORDER BY ordinal of a subquery, which PostgreSQL's
// analysis folds away, and a change to a "char" that keeps the first byte.
func TestDifferentialOracleSeesChanges(t *testing.T) {
	o := newDiffOracle(t, nil)
	changes := map[pg_query.Token][2]string{
		pg_query.Token_SCONST: {"string", "'dpproxy_changed'"},
		pg_query.Token_ICONST: {"number", "424242"},
		pg_query.Token_FCONST: {"number", "424242"},
		pg_query.Token_IDENT:  {"name", "dpproxy_other"},
		pg_query.Token_Op:     {"operator", "#"},
		// One-character and two-character comparison operators are tokens
		// of their own; without them too few operators are sampled.
		pg_query.Token_ASCII_60:       {"operator", "#"},
		pg_query.Token_ASCII_61:       {"operator", "#"},
		pg_query.Token_ASCII_62:       {"operator", "#"},
		pg_query.Token_LESS_EQUALS:    {"operator", "#"},
		pg_query.Token_GREATER_EQUALS: {"operator", "#"},
		pg_query.Token_NOT_EQUALS:     {"operator", "#"},
	}
	seen, caught := map[string]int{}, map[string]int{}
	var missed []string
	for i, x := range diffCorpus(t) {
		if i%2 == 1 {
			continue // half the corpus is enough, and twice as fast
		}
		stmts, err := o.an.Analyze(x)
		if err != nil {
			continue
		}
		for _, st := range stmts {
			sc, err := pg_query.Scan(st.SQL)
			if st.Kind != rewrite.KindPassThrough || err != nil {
				continue
			}
			done := map[string]bool{}
			for _, tok := range sc.Tokens {
				c, ok := changes[tok.Token]
				if !ok || done[c[0]] {
					continue
				}
				done[c[0]] = true
				changed := st.SQL[:tok.Start] + c[1] + st.SQL[tok.End:]
				tree, err := pg_query.Parse(changed)
				if err != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetSelectStmt() == nil {
					continue
				}
				diffs, err := o.compareText(st.SQL, nil, tree.Stmts[0].Stmt)
				if err != nil {
					t.Fatal(err)
				}
				if diffs == nil && len(o.trees) == 0 {
					continue // PostgreSQL refused the original: nothing to compare
				}
				seen[c[0]]++
				if len(diffs) > 0 {
					caught[c[0]]++
				} else {
					missed = append(missed, fmt.Sprintf("%s %q in %q", c[0], st.SQL[tok.Start:tok.End], st.SQL))
				}
			}
		}
	}
	if testing.Verbose() {
		for _, m := range missed {
			t.Log("not seen: " + m)
		}
	}
	for kind, n := range seen {
		t.Logf("%s: %d of %d changes seen", kind, caught[kind], n)
		if n < 40 || float64(caught[kind]) < 0.95*float64(n) {
			t.Errorf("the oracle saw only %d of %d changes of a %s; missed, for instance:\n%s", caught[kind], n, kind, strings.Join(missed[:min(10, len(missed))], "\n"))
		}
	}
}

// TestDifferentialSessionSettings: a client may not change how PostgreSQL
// reads the proxy's SQL. Every way of asking for another client encoding,
// standard_conforming_strings, backslash_quote, transform_null_equals or
// search_path is refused by the analyzer; UTF-8 under another name may be
// accepted, and the oracle checks it (its twin, and the pinned settings
// after it). Then the corpus runs again on a session whose settable
// settings (rendering, time zone, ...) all differ from the defaults:
// the readings must still agree.
func TestDifferentialSessionSettings(t *testing.T) {
	o := newDiffOracle(t, nil)
	type want struct {
		sql    string
		refuse bool
	}
	var xs []want
	for _, v := range []string{"'SJIS'", "'sjis'", "'Shift_JIS'", "'GBK'", "'BIG5'", "'GB18030'", "'LATIN1'", "'SQL_ASCII'",
		"'EUC_JP'", "sjis", `U&'\0053JIS'`, `U&'!0053JIS' UESCAPE '!'`, "E'SJIS'", "E'\123JIS'", "$$SJIS$$", "'UTF8', 'SJIS'"} {
		for _, f := range []string{"SET client_encoding = %s", "SET client_encoding TO %s", "SET LOCAL client_encoding = %s",
			"SET SESSION client_encoding = %s", "SET NAMES %s", "SELECT set_config('client_encoding', %s, false)"} {
			xs = append(xs, want{fmt.Sprintf(f, v), true})
		}
	}
	for _, v := range []string{"'UTF8'", "'utf-8'", "'Unicode'", "'UTF_8'", "utf8", "DEFAULT", `U&'!0055TF8' UESCAPE '!'`} {
		xs = append(xs, want{"SET client_encoding = " + v, false}, want{"SET NAMES " + v, false})
	}
	for _, name := range []string{"standard_conforming_strings", "backslash_quote", "transform_null_equals", "search_path",
		"escape_string_warning", `"standard_conforming_strings"`, `U&"backslash!005Fquote" UESCAPE '!'`} {
		for _, v := range []string{"on", "off", "'off'", "safe_encoding", "DEFAULT", "'public'"} {
			xs = append(xs, want{"SET " + name + " = " + v, true}, want{"SET LOCAL " + name + " TO " + v, true})
		}
		xs = append(xs, want{"RESET " + name, true}, want{"SET " + name + " FROM CURRENT", true},
			want{"SELECT set_config('" + strings.Trim(name, `"`) + "', 'off', false)", true})
	}
	xs = append(xs, want{"RESET client_encoding", false}, want{"RESET ALL", false}, want{"DISCARD ALL", false},
		want{"SHOW client_encoding", false}, want{"SHOW standard_conforming_strings", false})
	for _, x := range xs {
		_, aerr := o.an.Analyze(x.sql)
		if x.refuse && aerr == nil {
			t.Errorf("Analyze(%q) accepted it; it must be refused", x.sql)
		}
		fails, err := o.check(x.sql)
		if err != nil {
			t.Fatalf("%q: %v", x.sql, err)
		}
		for _, f := range fails {
			t.Error(f)
		}
	}

	client := newDiffOracle(t, map[string]string{"DateStyle": "SQL, DMY", "IntervalStyle": "sql_standard",
		"TimeZone": "Pacific/Chatham", "extra_float_digits": "-15", "bytea_output": "escape", "lc_time": "C",
		"statement_timeout": "30s", "application_name": "a client's"})
	for i, x := range diffCorpus(t) {
		if i%4 != 0 {
			continue
		}
		fails, err := client.check(x)
		if err != nil {
			t.Fatalf("%q: %v", x, err)
		}
		for _, f := range fails {
			if strings.Contains(f, "PostgreSQL cannot parse it") {
				continue // reported by TestDifferentialCorpus
			}
			t.Error(f)
		}
	}
}

// FuzzDifferential feeds arbitrary texts, and the generator's mutations of
// them, to the oracle: any text the analyzer accepts must be read alike by
// the proxy and by PostgreSQL. Seeded from rewrite/testdata, the attack
// corpus and the generator.
func FuzzDifferential(f *testing.F) {
	for _, x := range diffSeeds(f) {
		f.Add(x, uint16(0))
	}
	g := newDiffGen(1)
	for i := range 300 {
		f.Add(g.statement(), uint16(i))
	}
	f.Fuzz(func(t *testing.T, x string, mut uint16) {
		diffFuzz.once.Do(func() { diffFuzz.o, diffFuzz.err = openDiffOracle(nil) })
		if diffFuzz.err != nil {
			t.Fatal(diffFuzz.err)
		}
		xs := []string{x}
		if mut != 0 {
			xs = append(xs, newDiffGen(uint64(mut)).mutate(x))
		}
		for _, x := range xs {
			fails, err := diffFuzz.o.check(x)
			if err != nil {
				t.Fatalf("oracle broke on %q: %v", x, err)
			}
			if len(fails) > 0 {
				t.Fatal(strings.Join(fails, "\n"))
			}
		}
	})
}

// diffFuzz is FuzzDifferential's oracle, opened once per process.
var diffFuzz struct {
	once sync.Once
	o    *diffOracle
	err  error
}

// ---------------------------------------------------------------------------
// The oracle.

// diffOracle compares the proxy's reading of the SQL it sends upstream with
// PostgreSQL's. It is not safe for concurrent use.
type diffOracle struct {
	an *rewrite.Analyzer
	// parse has debug_print_parse on: each Parse message's analysed tree
	// arrives as a LOG notice, collected in trees.
	parse *pgconn.PgConn
	trees []string
	// exec runs session commands (SET, BEGIN, ...) inside transactions
	// that are rolled back, to compare their effect with the proxy's
	// reading.
	exec *pgconn.PgConn
	cat  *pgx.Conn // catalog lookups

	procs    map[uint32]diffProc
	opers    map[uint32]string
	relByOID map[uint32]string    // "schema.name"
	relByKey map[[2]string]uint32 // schema, name
	atts     map[uint32]map[int]string
	stats    diffStats
}

type diffProc struct{ nsp, name string }

type diffStats struct {
	refused, statements, texts, compared, uncompared int
	pgRefused                                        map[string]int // SQLSTATE of the upstream's refusal
}

func (s diffStats) String() string {
	codes := make([]string, 0, len(s.pgRefused))
	for c, n := range s.pgRefused {
		codes = append(codes, fmt.Sprintf("%s×%d", c, n))
	}
	sort.Strings(codes)
	return fmt.Sprintf("%d refused by the analyzer, %d statements accepted, %d texts sent upstream, %d readings compared, %d session commands only checked for acceptance, refused by PostgreSQL's analysis: %s",
		s.refused, s.statements, s.texts, s.compared, s.uncompared, strings.Join(codes, " "))
}

// newDiffOracle opens an oracle on the test database, with the proxy's
// pinned settings overridden by settings (for the controls).
func newDiffOracle(t testing.TB, settings map[string]string) *diffOracle {
	t.Helper()
	o, err := openDiffOracle(settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.close)
	return o
}

func openDiffOracle(settings map[string]string) (*diffOracle, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := &diffOracle{stats: diffStats{pgRefused: map[string]int{}}}
	connect := func(debug bool) (*pgconn.PgConn, error) {
		cfg, err := pgconn.ParseConfig(env.upstream)
		if err != nil {
			return nil, err
		}
		for k, v := range rewrite.PinnedSettings {
			cfg.RuntimeParams[k] = v
		}
		for k, v := range settings {
			cfg.RuntimeParams[k] = v
		}
		cfg.RuntimeParams["application_name"] = "dpproxy-differential"
		if debug {
			cfg.RuntimeParams["debug_print_parse"] = "on"
			cfg.RuntimeParams["debug_pretty_print"] = "off"
			cfg.RuntimeParams["client_min_messages"] = "log"
			cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
				if n.Severity == "LOG" && n.Message == "parse tree:" {
					o.trees = append(o.trees, n.Detail)
				}
			}
		}
		return pgconn.ConnectConfig(ctx, cfg)
	}
	var err error
	if o.parse, err = connect(true); err != nil {
		return nil, fmt.Errorf("differential: parse connection: %w", err)
	}
	if o.exec, err = connect(false); err != nil {
		o.close()
		return nil, fmt.Errorf("differential: exec connection: %w", err)
	}
	ccfg, err := pgx.ParseConfig(env.upstream)
	if err != nil {
		o.close()
		return nil, err
	}
	for k, v := range rewrite.PinnedSettings {
		if k != "default_transaction_read_only" { // the raw-parse probe creates a function
			ccfg.RuntimeParams[k] = v
		}
	}
	if o.cat, err = pgx.ConnectConfig(ctx, ccfg); err != nil {
		o.close()
		return nil, fmt.Errorf("differential: catalog connection: %w", err)
	}
	if err := o.loadCatalog(ctx); err != nil {
		o.close()
		return nil, err
	}
	if o.an, err = diffAnalyzer(ctx, o.cat); err != nil {
		o.close()
		return nil, err
	}
	return o, nil
}

func (o *diffOracle) close() {
	ctx := context.Background()
	for _, c := range []*pgconn.PgConn{o.parse, o.exec} {
		if c != nil {
			c.Close(ctx)
		}
	}
	if o.cat != nil {
		o.cat.Close(ctx)
	}
}

// diffAnalyzer builds the analyzer as proxy.New does (proxy/server.go):
// the masked catalogs' columns and the private tables' integer columns
// read from the upstream.
func diffAnalyzer(ctx context.Context, cat *pgx.Conn) (*rewrite.Analyzer, error) {
	opts, err := proxy.AnalyzerOptions(ctx, cat, env.cfg)
	if err != nil {
		return nil, err
	}
	return rewrite.New(env.cfg, opts), nil
}

func (o *diffOracle) loadCatalog(ctx context.Context) error {
	o.procs, o.opers, o.atts = map[uint32]diffProc{}, map[uint32]string{}, map[uint32]map[int]string{}
	rows, err := o.cat.Query(ctx, `SELECT p.oid, n.nspname, p.proname FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var oid uint32
		var p diffProc
		if err := rows.Scan(&oid, &p.nsp, &p.name); err != nil {
			return err
		}
		o.procs[oid] = p
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = o.cat.Query(ctx, `SELECT oid, oprname FROM pg_catalog.pg_operator`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var oid uint32
		var name string
		if err := rows.Scan(&oid, &name); err != nil {
			return err
		}
		o.opers[oid] = name
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return o.loadRelations(ctx)
}

// loadRelations (re)reads every relation's name: tests create tables and
// views as they go.
func (o *diffOracle) loadRelations(ctx context.Context) error {
	o.relByOID, o.relByKey = map[uint32]string{}, map[[2]string]uint32{}
	rows, err := o.cat.Query(ctx, `SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var oid uint32
		var nsp, name string
		if err := rows.Scan(&oid, &nsp, &name); err != nil {
			return err
		}
		o.relByOID[oid] = nsp + "." + name
		o.relByKey[[2]string{nsp, name}] = oid
	}
	return rows.Err()
}

// relOID resolves a relation name as PostgreSQL does on the proxy's
// upstream connections (search_path public, pg_catalog implicitly first),
// by exact name: nothing of it is parsed. 0: no such relation.
func (o *diffOracle) relOID(ctx context.Context, schema, name string) (uint32, error) {
	look := func() uint32 {
		if schema != "" {
			return o.relByKey[[2]string{schema, name}]
		}
		if oid := o.relByKey[[2]string{"pg_catalog", name}]; oid != 0 {
			return oid
		}
		return o.relByKey[[2]string{"public", name}]
	}
	if oid := look(); oid != 0 {
		return oid, nil
	}
	if err := o.loadRelations(ctx); err != nil {
		return 0, err
	}
	return look(), nil
}

func (o *diffOracle) relName(ctx context.Context, oid uint32) string {
	if n, ok := o.relByOID[oid]; ok {
		return n
	}
	if o.loadRelations(ctx) == nil {
		if n, ok := o.relByOID[oid]; ok {
			return n
		}
	}
	return fmt.Sprintf("relation %d", oid)
}

func (o *diffOracle) attName(ctx context.Context, rel uint32, attno int) (string, error) {
	m, ok := o.atts[rel]
	if !ok {
		m = map[int]string{}
		rows, err := o.cat.Query(ctx, `SELECT attnum, attname FROM pg_catalog.pg_attribute WHERE attrelid = $1`, rel)
		if err != nil {
			return "", err
		}
		for rows.Next() {
			var n int16
			var name string
			if err := rows.Scan(&n, &name); err != nil {
				return "", err
			}
			m[int(n)] = name
		}
		if err := rows.Err(); err != nil {
			return "", err
		}
		o.atts[rel] = m
	}
	name, ok := m[attno]
	if !ok {
		return fmt.Sprintf("attnum %d", attno), nil
	}
	return name, nil
}

// sentText is one text the proxy sends upstream, with the parameter types
// it declares.
type sentText struct {
	what string
	sql  string
	oids []uint32
}

// check analyses x as the proxy does and, if the analyzer accepts it,
// compares the two readings of every text the proxy would send upstream
// for it. It returns one message per difference; err means the oracle
// itself failed (a broken connection).
func (o *diffOracle) check(x string) ([]string, error) {
	stmts, err := o.an.Analyze(x)
	if err != nil {
		o.stats.refused++
		return nil, nil
	}
	var fails []string
	for _, st := range stmts {
		o.stats.statements++
		var texts []sentText
		p := st.Plan
		switch st.Kind {
		case rewrite.KindPassThrough:
			texts = append(texts, sentText{"Statement.SQL", st.SQL, nil})
		case rewrite.KindExplainDP:
			texts = append(texts, sentText{"Plan.DescribeSQL", p.DescribeSQL, make([]uint32, p.NumParams)})
		case rewrite.KindPrivate:
			texts = append(texts, sentText{"Plan.DescribeSQL", p.DescribeSQL, make([]uint32, p.NumParams)})
			if len(p.Branches) > 0 { // UNION ALL: each branch's texts
				for _, b := range p.Branches {
					texts = append(texts, sentText{"Branch.DescribeSQL", b.DescribeSQL, make([]uint32, b.NumParams)})
					texts = append(texts, sentText{"Branch.SQL", b.SQL, append(make([]uint32, b.NumParams), 20)})
				}
				break
			}
			// The client's parameters, then the seed (bigint).
			texts = append(texts, sentText{"Plan.SQL", p.SQL, append(make([]uint32, p.NumParams), 20)})
			if p.Post != nil {
				texts = append(texts, sentText{"Plan.OriginalSQL", p.OriginalSQL, nil})
			}
		}
		for i := 0; i < len(texts); i++ { // the post-processing query is added on the way
			u := texts[i]
			o.stats.texts++
			tree, perr := pg_query.Parse(u.sql)
			if perr != nil || len(tree.Stmts) != 1 {
				fails = append(fails, diffReport(x, u, []string{fmt.Sprintf("pg_query does not read the proxy's own SQL as one statement (%v)", perr)}))
				continue
			}
			diffs, fields, err := o.compareOne(u, tree.Stmts[0].Stmt)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", u.what, u.sql, err)
			}
			if len(diffs) > 0 {
				fails = append(fails, diffReport(x, u, diffs))
			}
			if u.what == "Plan.DescribeSQL" && fields != nil && st.Kind == rewrite.KindPrivate && p.Post != nil {
				// Its casts are the described result's types.
				sql, oids := diffPostSQL(p, fields)
				texts = append(texts, sentText{"post-processing query", sql, oids})
			}
		}
	}
	return fails, nil
}

func diffReport(x string, u sentText, diffs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "PostgreSQL does not read what the proxy checked:\n  client text: %q\n  sent (%s): %q\n", x, u.what, u.sql)
	for _, d := range diffs {
		fmt.Fprintf(&b, "  - %s\n", d)
	}
	return strings.TrimRight(b.String(), "\n")
}

// compareText is the oracle on a text and a parse tree given by the
// caller: the controls use it to reproduce the old design, which sent
// bytes other than those it checked.
func (o *diffOracle) compareText(sql string, oids []uint32, checked *pg_query.Node) ([]string, error) {
	diffs, _, err := o.compareOne(sentText{"verbatim", sql, oids}, checked)
	return diffs, err
}

// compareOne compares the proxy's reading (the tree) of one text with
// PostgreSQL's. It also returns the result columns PostgreSQL describes.
func (o *diffOracle) compareOne(u sentText, tree *pg_query.Node) ([]string, []pgconn.FieldDescription, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, fields, diffs, err := o.pgParse(ctx, u.sql, u.oids)
	if err != nil || diffs != nil || g == nil {
		return diffs, nil, err
	}
	switch n := tree.Node.(type) {
	case *pg_query.Node_SelectStmt:
		if g.cmd != "1" {
			return []string{fmt.Sprintf("the proxy reads a SELECT, PostgreSQL a statement of command type %s", g.cmd)}, fields, nil
		}
		o.stats.compared++
		p := readProxy(tree)
		diffs, err := o.compareReadings(ctx, p, g, fields)
		if len(diffs) > 0 {
			diffs = append(diffs, "the proxy's reading: "+p.String(), "PostgreSQL's reading: "+o.describe(ctx, g, fields))
		}
		return diffs, fields, err
	case *pg_query.Node_ExplainStmt:
		diffs, err := o.compareExplain(ctx, u.sql, n.ExplainStmt, g, fields)
		return diffs, fields, err
	case *pg_query.Node_VariableSetStmt, *pg_query.Node_VariableShowStmt, *pg_query.Node_TransactionStmt, *pg_query.Node_DiscardStmt:
		if g.cmd != "6" {
			return []string{fmt.Sprintf("the proxy reads a session command, PostgreSQL a statement of command type %s", g.cmd)}, fields, nil
		}
		diffs, err := o.compareSession(ctx, u.sql, tree)
		return diffs, fields, err
	}
	return []string{fmt.Sprintf("the proxy sends a %T, which the oracle does not know", tree.Node)}, fields, nil
}

// pgParse has PostgreSQL parse and analyse sql (a Parse message: nothing
// runs) and returns its reading. A refusal by PostgreSQL's analysis (an
// unknown column, a type error) leaves nothing to compare: g is nil. A
// refusal by its lexer or grammar, where pg_query read a statement, is a
// difference.
func (o *diffOracle) pgParse(ctx context.Context, sql string, oids []uint32) (g *pgReading, fields []pgconn.FieldDescription, diffs []string, err error) {
	o.trees = nil
	sd, err := o.parse.Prepare(ctx, "", sql, oids)
	if err != nil {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			return nil, nil, nil, err
		}
		// A refusal by parse analysis leaves nothing to compare; one by
		// the lexer or grammar is a difference. Their SQLSTATEs overlap
		// (analysis raises 42601 for VALUES lists of different lengths,
		// the lexer 22P06 for \'), so PostgreSQL parses the text again
		// without analysing it.
		raw, err := o.rawParse(ctx, sql)
		if err != nil {
			return nil, nil, nil, err
		}
		if raw != nil || pe.Message == "cannot insert multiple commands into a prepared statement" {
			return nil, nil, []string{fmt.Sprintf("PostgreSQL cannot parse it: %s (SQLSTATE %s, position %d)", pe.Message, pe.Code, pe.Position)}, nil
		}
		o.stats.pgRefused[pe.Code]++
		return nil, nil, nil, nil
	}
	if len(o.trees) != 1 {
		return nil, nil, nil, fmt.Errorf("expected one parse tree notice, got %d (is debug_print_parse allowed?)", len(o.trees))
	}
	dump, err := parseNodeDump(o.trees[0])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading PostgreSQL's parse tree: %w", err)
	}
	g = readPG(dump)
	return g, sd.Fields, nil, nil
}

// rawParse returns PostgreSQL's error, if its lexer or grammar refuses sql
// (nil if they accept it): the validator of an SQL function with a
// polymorphic argument parses the body without analysing it. The body is
// dollar-quoted with a tag that first occurs where the quote ends, so it
// is sql byte for byte.
func (o *diffOracle) rawParse(ctx context.Context, sql string) (*pgconn.PgError, error) {
	tag := "dpproxy_body"
	for strings.Index(sql+"$"+tag+"$", "$"+tag+"$") != len(sql) {
		tag += "_"
	}
	tx, err := o.cat.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL check_function_bodies = on"); err != nil {
		return nil, err
	}
	_, err = tx.Exec(ctx, "CREATE FUNCTION pg_temp.dpproxy_raw_parse(anyelement) RETURNS void LANGUAGE sql AS $"+tag+"$"+sql+"$"+tag+"$")
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &pe):
		return pe, nil
	}
	return nil, fmt.Errorf("raw parse probe: %w", err)
}

// ---------------------------------------------------------------------------
// PostgreSQL's reading: its node dump.

// pgNode is a node of PostgreSQL's nodeToString output. Field values are
// *pgNode, []any (lists), raw tokens (string), pgDatum or nil ("<>").
type pgNode struct {
	typ    string
	fields map[string]any
}

// pgDatum is a Const's value as PostgreSQL dumps it: the datum's bytes
// (for a by-value type, the whole Datum, little-endian on this machine).
type pgDatum []byte

func (n *pgNode) token(field string) string {
	s, _ := n.fields[field].(string)
	return dumpUnescape(s)
}

func (n *pgNode) node(field string) *pgNode {
	c, _ := n.fields[field].(*pgNode)
	return c
}

// dumpTokens splits a dump as PostgreSQL's pg_strtok does: at white space
// (space, newline and tab only: a carriage return is part of a token) and
// around parentheses and braces, a backslash escaping the next character.
// Tokens keep their backslashes (dumpUnescape drops them).
func dumpTokens(s string) []string {
	var toks []string
	isDelim := func(c byte) bool {
		return c == ' ' || c == '\n' || c == '\t' || c == '(' || c == ')' || c == '{' || c == '}'
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t':
			i++
			continue
		case isDelim(c):
			toks = append(toks, s[i:i+1])
			i++
			continue
		}
		j := i
		for j < len(s) && !isDelim(s[j]) {
			if s[j] == '\\' && j+1 < len(s) {
				j++
			}
			j++
		}
		toks = append(toks, s[i:j])
		i = j
	}
	return toks
}

// dumpLine is the line length of elog's node dumps (format_node_dump).
const dumpLine = 78

// unwrapDump undoes elog's line wrapping where it split a token: a line
// with no space to break at is cut at dumpLine characters, and nothing of
// the dump is lost there. (Elsewhere a line break replaced a space.)
func unwrapDump(s string) string {
	lines := strings.Split(s, "\n")
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(l)
		if i < len(lines)-1 && !(len(l) == dumpLine && !strings.Contains(l[1:], " ")) {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// dumpUnescape drops a token's escaping backslashes. elog wraps long
// dumps at spaces, escaped ones too, so an escaped line break was a space.
func dumpUnescape(tok string) string {
	if !strings.Contains(tok, `\`) {
		return tok
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] == '\\' && i+1 < len(tok) {
			i++
			if tok[i] == '\n' {
				b.WriteByte(' ')
				continue
			}
		}
		b.WriteByte(tok[i])
	}
	return b.String()
}

type dumpParser struct {
	toks []string
	i    int
}

func parseNodeDump(s string) (*pgNode, error) {
	p := &dumpParser{toks: dumpTokens(unwrapDump(s))}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	n, ok := v.(*pgNode)
	if !ok || p.i != len(p.toks) {
		return nil, fmt.Errorf("not one node (%d of %d tokens read)", p.i, len(p.toks))
	}
	return n, nil
}

func (p *dumpParser) next() (string, error) {
	if p.i >= len(p.toks) {
		return "", errors.New("unexpected end of the dump")
	}
	p.i++
	return p.toks[p.i-1], nil
}

func (p *dumpParser) value() (any, error) {
	tok, err := p.next()
	if err != nil {
		return nil, err
	}
	switch tok {
	case "<>":
		return nil, nil
	case "(":
		list := []any{}
		for p.i < len(p.toks) && p.toks[p.i] != ")" {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := p.next(); err != nil {
			return nil, err
		}
		return list, nil
	case "{":
		typ, err := p.next()
		if err != nil {
			return nil, err
		}
		n := &pgNode{typ: typ, fields: map[string]any{}}
		for {
			f, err := p.next()
			if err != nil {
				return nil, err
			}
			if f == "}" {
				return n, nil
			}
			if !strings.HasPrefix(f, ":") {
				return nil, fmt.Errorf("node %s: expected a field, got %q", typ, f)
			}
			if f == ":constvalue" {
				d, err := p.datum()
				if err != nil {
					return nil, err
				}
				n.fields["constvalue"] = d
				continue
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			n.fields[f[1:]] = v
		}
	case ")", "}":
		return nil, fmt.Errorf("unexpected %q", tok)
	}
	return tok, nil
}

// datum reads "<>" or "LENGTH [ b1 b2 ... ]" (bytes printed as signed chars).
func (p *dumpParser) datum() (any, error) {
	tok, err := p.next()
	if err != nil || tok == "<>" {
		return nil, err
	}
	if open, err := p.next(); err != nil || open != "[" {
		return nil, fmt.Errorf("datum: expected [ after %q", tok)
	}
	var d pgDatum
	for {
		b, err := p.next()
		if err != nil {
			return nil, err
		}
		if b == "]" {
			return d, nil
		}
		v, err := strconv.Atoi(b)
		if err != nil {
			return nil, fmt.Errorf("datum byte %q", b)
		}
		d = append(d, byte(int8(v)))
	}
}

// pgReading is what PostgreSQL's analysed tree names. Most of it is keyed
// by location (the byte offset in the text of what it came from), as
// pg_query's nodes are: both read the same bytes, so a constant, column,
// function or operator at one offset must be the same in both readings.
type pgReading struct {
	cmd    string // Query.commandType: 1 SELECT, 6 utility
	rels   []pgRel
	vars   []pgVar
	funcs  []pgFunc  // called as written: explicit calls, SQL syntax, aggregates, window functions
	svfs   []pgFunc  // SQLValueFunctions (CURRENT_USER, ...): oid 0, name set
	ops    []pgFunc  // operators
	consts []pgConst // non-null constants
	// orderBy and groupBy are the output columns (resno) the statement's
	// ORDER BY and GROUP BY items refer to.
	orderBy, groupBy []int
}

type pgRel struct {
	oid      uint32
	inh      bool     // false for ONLY
	alias    string   // eref
	colnames []string // eref: the columns' names, or their aliases
	cols     []int    // attnums read (selectedCols); 0 is the whole row
}

// pgVar is a column reference: name is the column's name in its range
// table entry (an alias if renamed, the relation's name for a whole row);
// a system column of a relation has attno < 0 and its name is looked up.
type pgVar struct {
	loc   int
	name  string
	rel   uint32
	attno int
}

type pgFunc struct {
	loc  int
	oid  uint32
	name string
}

type pgConst struct {
	loc  int
	typ  uint32
	data pgDatum
}

// firstLowInvalidAttno is PostgreSQL 15's FirstLowInvalidHeapAttributeNumber,
// the offset of attnums in selectedCols.
const firstLowInvalidAttno = -7

// pg15SVF names PostgreSQL 15's SQLValueFunctionOp values.
var pg15SVF = []string{"current_date", "current_time", "current_time", "current_timestamp", "current_timestamp",
	"localtime", "localtime", "localtimestamp", "localtimestamp", "current_role", "current_user", "user",
	"session_user", "current_catalog", "current_schema"}

func readPG(n *pgNode) *pgReading {
	g := &pgReading{cmd: n.token("commandType")}
	g.walk(n, nil)
	// ORDER BY and GROUP BY of the statement, as the output columns they
	// sort or group by (an ordinal leaves nothing else in the tree).
	refs := map[string]int{}
	tl, _ := n.fields["targetList"].([]any)
	for _, t := range tl {
		if te, ok := t.(*pgNode); ok {
			refs[te.token("ressortgroupref")] = te.int("resno")
		}
	}
	for field, dst := range map[string]*[]int{"sortClause": &g.orderBy, "groupClause": &g.groupBy} {
		l, _ := n.fields[field].([]any)
		for _, c := range l {
			if sg, ok := c.(*pgNode); ok {
				*dst = append(*dst, refs[sg.token("tleSortGroupRef")])
			}
		}
	}
	return g
}

func (n *pgNode) loc() int {
	l, err := strconv.Atoi(n.token("location"))
	if err != nil {
		return -1
	}
	return l
}

func (n *pgNode) int(field string) int {
	v, _ := strconv.Atoi(n.token(field))
	return v
}

// walk collects the reading; queries is the stack of enclosing Query
// nodes, whose range tables Vars refer to.
func (g *pgReading) walk(v any, queries []*pgNode) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			g.walk(e, queries)
		}
	case *pgNode:
		skip := map[string]bool{}
		switch x.typ {
		case "QUERY":
			queries = append(queries, x)
			if x.fields["setOperations"] != nil {
				// A set operation's output columns are Vars PostgreSQL
				// makes, located at the first arm's expressions.
				skip["targetList"] = true
				tl, _ := x.fields["targetList"].([]any)
				for _, t := range tl {
					if te, ok := t.(*pgNode); ok {
						for k, f := range te.fields {
							if e, ok := f.(*pgNode); !(k == "expr" && ok && e.typ == "VAR") {
								g.walk(f, queries)
							}
						}
					}
				}
			}
		case "RANGETBLENTRY":
			switch x.token("rtekind") {
			case "0":
				r := pgRel{oid: parseOID(x.token("relid")), inh: x.token("inh") == "true"}
				r.alias, r.colnames = erefNames(x)
				if bits, ok := x.fields["selectedCols"].([]any); ok {
					for _, b := range bits {
						if s, ok := b.(string); ok && s != "b" {
							if k, err := strconv.Atoi(s); err == nil {
								r.cols = append(r.cols, k+firstLowInvalidAttno)
							}
						}
					}
				}
				g.rels = append(g.rels, r)
			case "2":
				// A join's joinaliasvars list every column of both sides,
				// read or not, without locations.
				skip["joinaliasvars"] = true
			}
		case "VAR":
			g.vars = append(g.vars, g.resolveVar(x, queries))
		case "FUNCEXPR":
			switch x.token("funcformat") {
			case "1", "2":
				// A cast: arguments after the first are the typmod and
				// isExplicit constants the parser adds.
				skip["args"] = true
				if args, ok := x.fields["args"].([]any); ok && len(args) > 0 {
					g.walk(args[0], queries)
					for _, a := range args[1:] {
						if c, ok := a.(*pgNode); !ok || c.typ != "CONST" {
							g.walk(a, queries)
						}
					}
				}
			default:
				g.funcs = append(g.funcs, pgFunc{loc: x.loc(), oid: parseOID(x.token("funcid"))})
			}
		case "AGGREF":
			g.funcs = append(g.funcs, pgFunc{loc: x.loc(), oid: parseOID(x.token("aggfnoid"))})
		case "WINDOWFUNC":
			g.funcs = append(g.funcs, pgFunc{loc: x.loc(), oid: parseOID(x.token("winfnoid"))})
		case "SQLVALUEFUNCTION":
			if k := x.int("op"); k >= 0 && k < len(pg15SVF) {
				g.svfs = append(g.svfs, pgFunc{loc: x.loc(), name: pg15SVF[k]})
			}
		case "OPEXPR", "DISTINCTEXPR", "NULLIFEXPR", "SCALARARRAYOPEXPR":
			g.ops = append(g.ops, pgFunc{loc: x.loc(), oid: parseOID(x.token("opno"))})
		case "CONST":
			if d, ok := x.fields["constvalue"].(pgDatum); ok && x.token("constisnull") != "true" {
				g.consts = append(g.consts, pgConst{loc: x.loc(), typ: parseOID(x.token("consttype")), data: d})
			}
		}
		for k, f := range x.fields {
			if !skip[k] {
				g.walk(f, queries)
			}
		}
	}
}

// erefNames reads a range table entry's eref: its name and its columns'.
func erefNames(rte *pgNode) (string, []string) {
	e := rte.node("eref")
	if e == nil {
		return "", nil
	}
	var cols []string
	names, _ := e.fields["colnames"].([]any)
	for _, n := range names {
		tok, _ := n.(string)
		cols = append(cols, strings.TrimSuffix(strings.TrimPrefix(dumpUnescape(tok), `"`), `"`))
	}
	return e.token("aliasname"), cols
}

// resolveVar names the column a Var reads, from the range table entry it
// points to (varlevelsup queries up, entry varno).
func (g *pgReading) resolveVar(x *pgNode, queries []*pgNode) pgVar {
	v := pgVar{loc: x.loc(), attno: x.int("varattno"), name: "?"}
	up := x.int("varlevelsup")
	if up >= len(queries) {
		return v
	}
	rtable, _ := queries[len(queries)-1-up].fields["rtable"].([]any)
	k := x.int("varno")
	if k < 1 || k > len(rtable) {
		return v
	}
	rte, ok := rtable[k-1].(*pgNode)
	if !ok {
		return v
	}
	alias, cols := erefNames(rte)
	if rte.token("rtekind") == "0" {
		v.rel = parseOID(rte.token("relid"))
	}
	switch {
	case v.attno == 0:
		v.name = alias
	case v.attno > 0 && v.attno <= len(cols):
		v.name = cols[v.attno-1]
	case v.attno < 0:
		v.name = "" // a system column: looked up by attno
	}
	return v
}

func parseOID(s string) uint32 {
	v, _ := strconv.ParseUint(s, 10, 32)
	return uint32(v)
}

// ---------------------------------------------------------------------------
// The proxy's reading: pg_query's tree of the text it sends.

type proxyReading struct {
	rels     []proxyRel
	names    map[string]bool // every name a column reference, indirection or USING list holds
	wildcard bool            // * or NATURAL: any column may be read
	cols     map[int32]string
	funcs    map[int32]proxyFunc
	allFuncs []proxyFunc
	ops      map[int32]map[string]bool
	allOps   map[string]bool
	consts   map[int32][]proxyConst
	required []requiredConst
	targets  int            // output columns, -1 if unknown (a *)
	aliases  map[int]string // output column names given with AS
	// orderBy and groupBy hold the statement's ORDER BY and GROUP BY
	// items: an ordinal, or 0 for an expression.
	orderBy, groupBy []int
}

type proxyRel struct {
	schema, name string
	only         bool
}

type proxyFunc struct {
	schema, name string
	svf          bool // an SQLValueFunction
}

// proxyConst is a constant as pg_query read it, with every value
// PostgreSQL's input functions could make of it (a string constant takes
// the type its context gives it).
type proxyConst struct {
	str   *string
	num   *big.Rat
	bool_ *bool
	bits  *string
	text  string // for reports
}

// requiredConst is a constant of the proxy's tree that PostgreSQL's must
// hold too, at one of locs (its own, or an enclosing cast's: PostgreSQL
// gives a folded cast the leftmost location).
type requiredConst struct {
	locs []int32
	text string
}

func readProxy(n *pg_query.Node) *proxyReading {
	p := &proxyReading{names: map[string]bool{}, cols: map[int32]string{}, funcs: map[int32]proxyFunc{},
		ops: map[int32]map[string]bool{}, allOps: map[string]bool{}, consts: map[int32][]proxyConst{},
		targets: -1, aliases: map[int]string{}}
	p.walk(n.ProtoReflect(), proxyScope{})
	p.outputs(n)
	return p
}

// outputs reads the statement's output columns: the first SELECT of a set
// operation, the first row of VALUES.
func (p *proxyReading) outputs(n *pg_query.Node) {
	s := n.GetSelectStmt()
	ordinal := func(e *pg_query.Node) int {
		if sb := e.GetSortBy(); sb != nil {
			e = sb.Node
		}
		if c := e.GetAConst(); c != nil && c.GetIval() != nil {
			return int(c.GetIval().Ival)
		}
		return 0
	}
	for _, e := range s.GetSortClause() {
		p.orderBy = append(p.orderBy, ordinal(e))
	}
	for _, e := range s.GetGroupClause() {
		p.groupBy = append(p.groupBy, ordinal(e))
	}
	for s != nil && s.Op != pg_query.SetOperation_SETOP_NONE {
		s = s.Larg
	}
	if s == nil {
		return
	}
	if len(s.ValuesLists) > 0 {
		p.targets = len(s.ValuesLists[0].GetList().GetItems())
		return
	}
	for i, t := range s.TargetList {
		rt := t.GetResTarget()
		if rt == nil {
			return
		}
		if cr := rt.Val.GetColumnRef(); cr != nil && len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			p.aliases = map[int]string{}
			return
		}
		if rt.Name != "" {
			p.aliases[i] = rt.Name
		}
	}
	p.targets = len(s.TargetList)
}

// proxyScope is what the walk knows of a node's context.
type proxyScope struct {
	ctes  map[string]bool // common table expressions in scope
	casts []int32         // locations of the casts enclosing a constant
	// optional: PostgreSQL may fold a constant here into an output
	// column or drop it (ORDER BY 1, GROUP BY, PARTITION BY, typmods).
	optional bool
}

func (s proxyScope) with(f func(*proxyScope)) proxyScope {
	f(&s)
	return s
}

// walk collects what the tree names.
func (p *proxyReading) walk(m protoreflect.Message, sc proxyScope) {
	skip := map[protoreflect.Name]bool{}
	switch x := m.Interface().(type) {
	case *pg_query.SelectStmt:
		if w := x.GetWithClause(); w != nil {
			var names []string
			for _, c := range w.Ctes {
				names = append(names, c.GetCommonTableExpr().GetCtename())
			}
			with := func(k int) proxyScope {
				ctes := map[string]bool{}
				for n := range sc.ctes {
					ctes[n] = true
				}
				for _, n := range names[:k] {
					ctes[n] = true
				}
				return sc.with(func(s *proxyScope) { s.ctes = ctes })
			}
			for i, c := range w.Ctes {
				// A recursive WITH sees all its names, a plain one the
				// earlier ones (PostgreSQL's scoping).
				scope := with(i)
				if w.Recursive {
					scope = with(len(names))
				}
				if q := c.GetCommonTableExpr().GetCtequery(); q != nil {
					p.walk(q.ProtoReflect(), scope)
				}
			}
			sc = with(len(names))
			skip["with_clause"] = true
		}
		// ORDER BY and GROUP BY items may be output columns' positions,
		// or expressions PostgreSQL matches to an output column.
		opt := sc.with(func(s *proxyScope) { s.optional = true })
		for _, l := range [][]*pg_query.Node{x.SortClause, x.GroupClause, x.DistinctClause} {
			for _, e := range l {
				p.walk(e.ProtoReflect(), opt)
			}
		}
		skip["sort_clause"], skip["group_clause"], skip["distinct_clause"] = true, true, true
	case *pg_query.WindowDef:
		opt := sc.with(func(s *proxyScope) { s.optional = true })
		for _, l := range [][]*pg_query.Node{x.PartitionClause, x.OrderClause} {
			for _, e := range l {
				p.walk(e.ProtoReflect(), opt)
			}
		}
		skip["partition_clause"], skip["order_clause"] = true, true
	case *pg_query.FuncCall:
		// Ordered-set aggregates and ORDER BY inside an aggregate.
		opt := sc.with(func(s *proxyScope) { s.optional = true })
		for _, e := range x.AggOrder {
			p.walk(e.ProtoReflect(), opt)
		}
		skip["agg_order"] = true
		var parts []string
		for _, f := range x.Funcname {
			parts = append(parts, f.GetString_().GetSval())
		}
		if len(parts) > 0 {
			f := proxyFunc{schema: strings.Join(parts[:len(parts)-1], "."), name: parts[len(parts)-1]}
			p.funcs[x.Location] = f
			p.allFuncs = append(p.allFuncs, f)
		}
	case *pg_query.TypeName:
		sc = sc.with(func(s *proxyScope) { s.optional = true }) // typmods
	case *pg_query.TypeCast:
		sc = sc.with(func(s *proxyScope) { s.casts = append(append([]int32(nil), s.casts...), x.Location) })
	case *pg_query.RangeVar:
		if !(x.Schemaname == "" && x.Catalogname == "" && sc.ctes[x.Relname]) {
			p.rels = append(p.rels, proxyRel{schema: x.Schemaname, name: x.Relname, only: !x.Inh})
		}
	case *pg_query.ColumnRef:
		p.nameList(x.Fields)
		if len(x.Fields) > 0 {
			last := x.Fields[len(x.Fields)-1]
			if last.GetAStar() != nil {
				p.cols[x.Location] = "*"
			} else {
				p.cols[x.Location] = last.GetString_().GetSval()
			}
		}
	case *pg_query.A_Indirection:
		p.nameList(x.Indirection)
	case *pg_query.A_Star:
		p.wildcard = true
	case *pg_query.JoinExpr:
		if x.IsNatural {
			p.wildcard = true
			p.allOps["="] = true
		}
		if len(x.UsingClause) > 0 {
			p.nameList(x.UsingClause)
			p.allOps["="] = true
		}
	case *pg_query.SQLValueFunction:
		name := strings.TrimSuffix(strings.ToLower(strings.TrimPrefix(x.Op.String(), "SVFOP_")), "_n")
		f := proxyFunc{name: name, svf: true}
		p.funcs[x.Location] = f
		p.allFuncs = append(p.allFuncs, f)
	case *pg_query.A_Expr:
		p.exprOps(x)
	case *pg_query.SubLink:
		if len(x.OperName) > 0 {
			p.addOp(x.Location, x.OperName[len(x.OperName)-1].GetString_().GetSval())
		} else if x.SubLinkType == pg_query.SubLinkType_ANY_SUBLINK {
			p.addOp(x.Location, "=")
		}
	case *pg_query.CaseExpr:
		if x.Arg != nil {
			for _, w := range x.Args {
				p.addOp(w.GetCaseWhen().GetLocation(), "=")
			}
		}
	case *pg_query.A_Const:
		p.constant(x, sc)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if skip[fd.Name()] {
			return true
		}
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				p.walk(l.Get(i).Message(), sc)
			}
		case fd.Message() != nil:
			p.walk(v.Message(), sc)
		}
		return true
	})
}

func (p *proxyReading) nameList(ns []*pg_query.Node) {
	for _, f := range ns {
		if s := f.GetString_(); s != nil {
			p.names[s.Sval] = true
		}
		if f.GetAStar() != nil {
			p.wildcard = true
		}
	}
}

func (p *proxyReading) addOp(loc int32, name string) {
	if p.ops[loc] == nil {
		p.ops[loc] = map[string]bool{}
	}
	p.ops[loc][name] = true
	p.allOps[name] = true
}

// exprOps records the operators PostgreSQL makes of an expression, at the
// expression's location.
func (p *proxyReading) exprOps(x *pg_query.A_Expr) {
	switch x.Kind {
	case pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM:
		p.addOp(x.Location, ">=")
		p.addOp(x.Location, "<=")
	case pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		p.addOp(x.Location, "<")
		p.addOp(x.Location, ">")
	default:
		if len(x.Name) > 0 {
			p.addOp(x.Location, x.Name[len(x.Name)-1].GetString_().GetSval())
		}
	}
}

func (p *proxyReading) constant(c *pg_query.A_Const, sc proxyScope) {
	if c.Isnull {
		return
	}
	var k proxyConst
	switch v := c.Val.(type) {
	case *pg_query.A_Const_Ival:
		k.num = big.NewRat(int64(v.Ival.GetIval()), 1)
		k.text = strconv.Itoa(int(v.Ival.GetIval()))
	case *pg_query.A_Const_Fval:
		k.text = v.Fval.GetFval()
		if r, ok := diffNumber(k.text); ok {
			k.num = r
		}
	case *pg_query.A_Const_Boolval:
		b := v.Boolval.GetBoolval()
		k.bool_, k.text = &b, strconv.FormatBool(b)
	case *pg_query.A_Const_Bsval:
		k.text = v.Bsval.GetBsval()
		if b, ok := diffBits(k.text); ok {
			k.bits = &b
		}
	case *pg_query.A_Const_Sval:
		s := v.Sval.GetSval()
		k.str, k.text = &s, strconv.Quote(s)
		if r, ok := diffNumber(s); ok {
			k.num = r
		}
		if b, ok := diffBool(s); ok {
			k.bool_ = &b
		}
		if b, ok := diffBits(s); ok {
			k.bits = &b
		}
	}
	locs := append([]int32{c.Location}, sc.casts...)
	for _, l := range locs {
		p.consts[l] = append(p.consts[l], k)
	}
	if !sc.optional && c.Location >= 0 {
		p.required = append(p.required, requiredConst{locs: locs, text: k.text})
	}
}

var decimalRE = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,5})?$`)

// diffNumber reads a number as PostgreSQL 16 does (pg_query's lexer, and
// the numeric input functions): decimal with an optional exponent, or an
// integer in hexadecimal, octal or binary, with _ between digits.
func diffNumber(s string) (*big.Rat, bool) {
	s = strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	neg := false
	if t, ok := strings.CutPrefix(s, "-"); ok {
		s, neg = t, true
	} else {
		s = strings.TrimPrefix(s, "+")
	}
	var r *big.Rat
	lower := strings.ToLower(s)
	base := map[string]int{"0x": 16, "0o": 8, "0b": 2}[lower[:min(2, len(lower))]]
	switch {
	case base != 0 && len(s) > 2 && len(s) < 200:
		i, ok := new(big.Int).SetString(lower[2:], base)
		if !ok {
			return nil, false
		}
		r = new(big.Rat).SetInt(i)
	case len(s) < 200 && decimalRE.MatchString(s):
		var ok bool
		if r, ok = new(big.Rat).SetString(s); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	if neg {
		r.Neg(r)
	}
	return r, true
}

// diffBool reads a boolean as PostgreSQL's boolin does.
func diffBool(s string) (bool, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case s == "":
		return false, false
	case strings.HasPrefix("true", s), strings.HasPrefix("yes", s), s == "on", s == "1":
		return true, true
	case strings.HasPrefix("false", s), strings.HasPrefix("no", s), s == "of", s == "off", s == "0":
		return false, true
	}
	return false, false
}

// diffBits reads a bit string (pg_query's "b0101" / "x1F", or a string
// for bit's input function) as binary digits.
func diffBits(s string) (string, bool) {
	if len(s) > 4096 {
		return "", false
	}
	hex := false
	switch {
	case strings.HasPrefix(s, "b") || strings.HasPrefix(s, "B"):
		s = s[1:]
	case strings.HasPrefix(s, "x") || strings.HasPrefix(s, "X"):
		s, hex = s[1:], true
	}
	var b strings.Builder
	for _, c := range s {
		switch {
		case !hex && (c == '0' || c == '1'):
			b.WriteRune(c)
		case hex && strings.ContainsRune("0123456789abcdefABCDEF", c):
			v, _ := strconv.ParseUint(string(c), 16, 8)
			fmt.Fprintf(&b, "%04b", v)
		default:
			return "", false
		}
	}
	return b.String(), true
}

// ---------------------------------------------------------------------------
// The comparison.

// compareReadings lists where PostgreSQL's reading of a SELECT departs
// from the proxy's: the relations read (as OIDs, with ONLY); at each
// location, the column, function, operator and constant (its value); the
// columns read; the result's columns.
func (o *diffOracle) compareReadings(ctx context.Context, p *proxyReading, g *pgReading, fields []pgconn.FieldDescription) ([]string, error) {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	// Relations: equal multisets.
	var mine, theirs []string
	for _, r := range p.rels {
		oid, err := o.relOID(ctx, r.schema, r.name)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%s.%s", r.schema, r.name)
		if oid != 0 {
			name = o.relName(ctx, oid)
		}
		if r.only {
			name = "ONLY " + name
		}
		mine = append(mine, name)
	}
	for _, r := range g.rels {
		name := o.relName(ctx, r.oid)
		if !r.inh {
			name = "ONLY " + name
		}
		theirs = append(theirs, name)
	}
	sort.Strings(mine)
	sort.Strings(theirs)
	if strings.Join(mine, "\x00") != strings.Join(theirs, "\x00") {
		add("relations: the proxy reads %q, PostgreSQL %q", mine, theirs)
	}
	// Columns: at each location, the same column; and each column read is
	// named in the proxy's tree (USING and NATURAL joins read columns from
	// no location).
	for _, v := range g.vars {
		name := v.name
		if v.attno < 0 && v.rel != 0 {
			var err error
			if name, err = o.attName(ctx, v.rel, v.attno); err != nil {
				return nil, err
			}
		}
		if v.loc < 0 {
			continue
		}
		got, ok := p.cols[int32(v.loc)]
		switch {
		case !ok:
			add("columns: PostgreSQL reads column %q at byte %d, where the proxy's tree has no column reference", name, v.loc)
		case got != "*" && got != name:
			add("columns: at byte %d PostgreSQL reads column %q, the proxy's tree %q", v.loc, name, got)
		}
	}
	if !p.wildcard {
		for _, r := range g.rels {
			for _, a := range r.cols {
				name, alias := r.alias, "" // a whole-row reference names the relation
				if a != 0 {
					var err error
					if name, err = o.attName(ctx, r.oid, a); err != nil {
						return nil, err
					}
				}
				if a > 0 && a <= len(r.colnames) {
					alias = r.colnames[a-1] // AS t(x, y) renames columns
				}
				if !p.names[name] && !p.names[alias] {
					add("columns: PostgreSQL reads %s of %s, which no column reference of the proxy's tree names", name, o.relName(ctx, r.oid))
				}
			}
		}
	}
	// Functions: at each location, the same function, in pg_catalog
	// unless the proxy's tree names another schema.
	sameFunc := func(c proxyFunc, pr diffProc) bool {
		return !c.svf && c.name == pr.name && (c.schema == pr.nsp || c.schema == "" && pr.nsp == "pg_catalog")
	}
	for _, f := range g.funcs {
		pr, ok := o.procs[f.oid]
		if !ok {
			add("functions: PostgreSQL calls function %d, not in pg_proc at start", f.oid)
			continue
		}
		c, ok := p.funcs[int32(f.loc)]
		switch {
		case f.loc < 0:
			found := false
			for _, c := range p.allFuncs {
				found = found || sameFunc(c, pr)
			}
			if !found {
				add("functions: PostgreSQL calls %s.%s, which the proxy's tree does not", pr.nsp, pr.name)
			}
		case !ok:
			add("functions: PostgreSQL calls %s.%s at byte %d, where the proxy's tree calls nothing", pr.nsp, pr.name, f.loc)
		case !sameFunc(c, pr):
			add("functions: at byte %d PostgreSQL calls %s.%s, the proxy's tree %s", f.loc, pr.nsp, pr.name, strings.TrimPrefix(c.schema+"."+c.name, "."))
		}
	}
	for _, f := range g.svfs {
		c, ok := p.funcs[int32(f.loc)]
		if !ok || c.name != f.name || c.schema != "" && c.schema != "pg_catalog" {
			add("functions: at byte %d PostgreSQL evaluates %s, the proxy's tree %v", f.loc, strings.ToUpper(f.name), c)
		}
	}
	// Operators: at each location, the same operator's name.
	for _, op := range g.ops {
		name := o.opers[op.oid]
		if op.loc < 0 {
			if !p.allOps[name] {
				add("operators: PostgreSQL applies %q, which the proxy's tree does not", name)
			}
		} else if !p.ops[int32(op.loc)][name] {
			add("operators: at byte %d PostgreSQL applies %q, the proxy's tree %v", op.loc, name, sortedKeys(p.ops[int32(op.loc)]))
		}
	}
	// Constants: at each location, the same value; and every constant of
	// the proxy's tree is one of PostgreSQL's.
	at := map[int32]bool{}
	for _, c := range g.consts {
		at[int32(c.loc)] = true
		if c.loc < 0 {
			continue // made by the parser (a LIMIT's type, ...)
		}
		cands, ok := p.consts[int32(c.loc)]
		if !ok {
			add("constants: PostgreSQL holds %s at byte %d, where the proxy's tree has no constant", decodeConst(c), c.loc)
			continue
		}
		if d := o.matchConst(ctx, c, cands); d != "" {
			add("constants: at byte %d %s", c.loc, d)
		}
	}
	for _, r := range p.required {
		found := false
		for _, l := range r.locs {
			found = found || at[l]
		}
		if !found {
			add("constants: the proxy's tree holds %s at byte %d, PostgreSQL no constant there", r.text, r.locs[0])
		}
	}
	// ORDER BY and GROUP BY ordinals. PostgreSQL drops repeated items.
	for _, c := range []struct {
		what      string
		mine, pgs []int
	}{{"ORDER BY", p.orderBy, g.orderBy}, {"GROUP BY", p.groupBy, g.groupBy}} {
		if len(c.mine) != len(c.pgs) {
			continue
		}
		for i, k := range c.mine {
			if k != 0 && c.pgs[i] != k {
				add("%s item %d: the proxy's tree names output column %d, PostgreSQL column %d", c.what, i+1, k, c.pgs[i])
			}
		}
	}
	// The result's columns.
	if p.targets >= 0 && p.targets != len(fields) {
		add("output: the proxy's tree has %d columns, PostgreSQL describes %d", p.targets, len(fields))
	}
	for i, name := range p.aliases {
		if i < len(fields) && fields[i].Name != truncateIdent(name) {
			add("output: column %d is %q to the proxy, %q to PostgreSQL", i+1, name, fields[i].Name)
		}
	}
	sort.Strings(diffs)
	return diffs, nil
}

func sortedKeys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return sorted(ks)
}

// truncateIdent is PostgreSQL's truncation of names to NAMEDATALEN-1
// bytes, at a character boundary.
func truncateIdent(s string) string {
	if len(s) <= 63 {
		return s
	}
	n := 63
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// constVal is a decoded constant of PostgreSQL's tree.
type constVal struct {
	kind string // "string", "number", "float", "bool", "bits", "special"; "" if not decoded
	s    string // string, bits, special (NaN, +Inf, -Inf)
	num  *big.Rat
	f    float64
	b    bool
}

func (v constVal) String() string {
	switch v.kind {
	case "string", "bits", "special", "char":
		return v.kind + " " + strconv.Quote(v.s)
	case "regclass":
		return "regclass " + v.num.RatString()
	case "number":
		return "number " + v.num.RatString()
	case "float":
		return "float " + strconv.FormatFloat(v.f, 'g', -1, 64)
	case "bool":
		return "boolean " + strconv.FormatBool(v.b)
	}
	return "a constant"
}

// decodeConst decodes the types whose values the oracle compares: the
// string types, integers, numeric, floats, booleans and bit strings.
// Others (dates, intervals, arrays, reg* ...) are compared by location only.
func decodeConst(c pgConst) constVal {
	switch c.typ {
	case 25, 1043, 1042, 705, 2275, 19: // text, varchar, bpchar, unknown, cstring, name
		var b []byte
		if c.typ == 705 || c.typ == 2275 || c.typ == 19 { // C strings; name is NUL-padded
			b = c.data
			if i := strings.IndexByte(string(b), 0); i >= 0 {
				b = b[:i]
			}
		} else {
			var ok bool
			if b, ok = varlenaPayload(c.data); !ok {
				return constVal{}
			}
		}
		return constVal{kind: "string", s: string(b)}
	case 21:
		return constVal{kind: "number", num: big.NewRat(int64(int16(binary.LittleEndian.Uint16(pad8(c.data)))), 1)}
	case 23:
		return constVal{kind: "number", num: big.NewRat(int64(int32(binary.LittleEndian.Uint32(pad8(c.data)))), 1)}
	case 26:
		return constVal{kind: "number", num: big.NewRat(int64(binary.LittleEndian.Uint32(pad8(c.data))), 1)}
	case 20:
		return constVal{kind: "number", num: big.NewRat(int64(binary.LittleEndian.Uint64(pad8(c.data))), 1)}
	case 1700:
		b, ok := varlenaPayload(c.data)
		if !ok {
			return constVal{}
		}
		v, special, ok := decodeNumeric(b)
		switch {
		case !ok:
			return constVal{}
		case special != "":
			return constVal{kind: "special", s: special}
		}
		return constVal{kind: "number", num: v}
	case 700, 701:
		d := pad8(c.data)
		f := math.Float64frombits(binary.LittleEndian.Uint64(d))
		if c.typ == 700 {
			f = float64(math.Float32frombits(binary.LittleEndian.Uint32(d)))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return constVal{kind: "special", s: strconv.FormatFloat(f, 'g', -1, 64)}
		}
		return constVal{kind: "float", f: f}
	case 16:
		return constVal{kind: "bool", b: len(c.data) > 0 && c.data[0] != 0}
	case 18: // "char": one byte
		return constVal{kind: "char", s: string(c.data[:min(1, len(c.data))])}
	case 2205: // regclass: a relation's OID
		return constVal{kind: "regclass", num: big.NewRat(int64(binary.LittleEndian.Uint32(pad8(c.data))), 1)}
	case 1560, 1562: // bit, varbit: int32 bit length, then the bits
		b, ok := varlenaPayload(c.data)
		if !ok || len(b) < 4 {
			return constVal{}
		}
		n := int(int32(binary.LittleEndian.Uint32(b)))
		var s strings.Builder
		for i := 0; i < n && 4+i/8 < len(b); i++ {
			s.WriteByte('0' + (b[4+i/8]>>(7-i%8))&1)
		}
		return constVal{kind: "bits", s: s.String()}
	}
	return constVal{}
}

// matchConst returns "" if PostgreSQL's constant c is the value of one of
// the proxy's constants at its location, else what is wrong.
func (o *diffOracle) matchConst(ctx context.Context, c pgConst, cands []proxyConst) string {
	v := decodeConst(c)
	if v.kind == "" {
		return ""
	}
	var texts []string
	for _, k := range cands {
		texts = append(texts, k.text)
		switch v.kind {
		case "string":
			// bpchar pads, varchar(n) drops trailing spaces, name truncates.
			if k.str != nil && (*k.str == v.s ||
				(c.typ == 1042 || c.typ == 1043) && strings.TrimRight(*k.str, " ") == strings.TrimRight(v.s, " ") ||
				c.typ == 19 && len(*k.str) > 63 && strings.HasPrefix(*k.str, v.s)) {
				return ""
			}
		case "number":
			if k.num != nil && k.num.Cmp(v.num) == 0 {
				return ""
			}
		case "float":
			if k.num != nil {
				nf, _ := k.num.Float64()
				if c.typ == 700 && float32(nf) == float32(v.f) || nf == v.f {
					return ""
				}
			}
		case "special":
			want, _ := strconv.ParseFloat(v.s, 64)
			if k.str != nil {
				f, err := strconv.ParseFloat(strings.TrimSpace(*k.str), 64)
				if err == nil && (math.IsNaN(f) && math.IsNaN(want) || f == want) {
					return ""
				}
			}
		case "bool":
			if k.bool_ != nil && *k.bool_ == v.b {
				return ""
			}
		case "bits":
			if k.bits != nil && *k.bits == v.s {
				return ""
			}
		case "char":
			// charin: the first byte, or a \ooo escape.
			if k.str != nil && (*k.str == "" && v.s == "\x00" ||
				len(*k.str) > 0 && (*k.str)[:1] == v.s || len(*k.str) == 4 && (*k.str)[0] == '\\') {
				return ""
			}
		case "regclass":
			if k.str != nil {
				if schema, name, ok := regclassName(*k.str); ok {
					if oid, err := o.relOID(ctx, schema, name); err == nil && big.NewRat(int64(oid), 1).Cmp(v.num) == 0 {
						return ""
					}
				}
			}
			if k.num != nil && k.num.Cmp(v.num) == 0 {
				return "" // '16430'::regclass
			}
		}
	}
	return fmt.Sprintf("PostgreSQL holds the %s (type %d), the proxy's tree %s", v, c.typ, strings.Join(texts, " or "))
}

// regclassName reads a relation name as regclass's input function does:
// an optional schema, unquoted parts folded to lower case, quoted parts
// with "" for a quote.
func regclassName(s string) (schema, name string, ok bool) {
	var parts []string
	for s = strings.TrimSpace(s); ; {
		var part string
		if strings.HasPrefix(s, `"`) {
			end := 1
			for {
				i := strings.IndexByte(s[end:], '"')
				if i < 0 {
					return "", "", false
				}
				end += i + 1
				if end < len(s) && s[end] == '"' {
					end++
					continue
				}
				break
			}
			part, s = strings.ReplaceAll(s[1:end-1], `""`, `"`), s[end:]
		} else {
			i := strings.IndexByte(s, '.')
			if i < 0 {
				i = len(s)
			}
			part, s = strings.TrimSpace(s[:i]), s[i:]
			part = strings.Map(func(r rune) rune {
				if r >= 'A' && r <= 'Z' {
					return r + 'a' - 'A'
				}
				return r
			}, part)
		}
		parts = append(parts, truncateIdent(part))
		s = strings.TrimSpace(s)
		if s == "" {
			break
		}
		if s[0] != '.' {
			return "", "", false
		}
		s = strings.TrimSpace(s[1:])
	}
	switch len(parts) {
	case 1:
		return "", parts[0], true
	case 2:
		return parts[0], parts[1], true
	}
	return "", "", false
}

// String summarises the proxy's reading for a failure report.
func (p *proxyReading) String() string {
	var rels, funcs, ops, consts []string
	for _, r := range p.rels {
		rels = append(rels, map[bool]string{true: "ONLY "}[r.only]+strings.TrimPrefix(r.schema+"."+r.name, "."))
	}
	for _, f := range p.allFuncs {
		funcs = append(funcs, strings.TrimPrefix(f.schema+"."+f.name, "."))
	}
	for s := range p.allOps {
		ops = append(ops, s)
	}
	for _, r := range p.required {
		consts = append(consts, fmt.Sprintf("%d:%s", r.locs[0], r.text))
	}
	return fmt.Sprintf("relations %v, functions %v, operators %v, constants %v, output columns %d %v",
		sorted(rels), sorted(funcs), sorted(ops), sorted(consts), p.targets, p.aliases)
}

// describe summarises PostgreSQL's reading for a failure report.
func (o *diffOracle) describe(ctx context.Context, g *pgReading, fields []pgconn.FieldDescription) string {
	var rels, funcs, ops, consts, cols []string
	for _, r := range g.rels {
		rels = append(rels, map[bool]string{false: "ONLY "}[r.inh]+o.relName(ctx, r.oid))
	}
	for _, f := range g.funcs {
		funcs = append(funcs, o.procs[f.oid].nsp+"."+o.procs[f.oid].name)
	}
	for _, f := range g.svfs {
		funcs = append(funcs, f.name)
	}
	for _, op := range g.ops {
		ops = append(ops, o.opers[op.oid])
	}
	for _, c := range g.consts {
		consts = append(consts, fmt.Sprintf("%d:%s", c.loc, decodeConst(c)))
	}
	for _, f := range fields {
		cols = append(cols, f.Name)
	}
	return fmt.Sprintf("relations %v, functions %v, operators %v, constants %v, output columns %q",
		sorted(rels), sorted(funcs), sorted(ops), sorted(consts), cols)
}

func sorted(xs []string) []string {
	sort.Strings(xs)
	return xs
}

func pad8(d pgDatum) []byte {
	b := make([]byte, 8)
	copy(b, d)
	return b
}

// varlenaPayload strips a varlena's header (little-endian layout).
func varlenaPayload(d pgDatum) ([]byte, bool) {
	if len(d) == 0 {
		return nil, false
	}
	if d[0]&1 == 1 { // 1-byte header; 0x01 is a TOAST pointer
		n := int(d[0] >> 1)
		if d[0] == 1 || n > len(d) || n < 1 {
			return nil, false
		}
		return d[1:n], true
	}
	if len(d) < 4 {
		return nil, false
	}
	h := binary.LittleEndian.Uint32(d)
	n := int(h >> 2)
	if h&3 != 0 || n > len(d) || n < 4 { // compressed, or not a varlena
		return nil, false
	}
	return d[4:n], true
}

// decodeNumeric reads PostgreSQL's numeric format (utils/adt/numeric.c):
// a header (short or long form) and base-10000 digits.
func decodeNumeric(b []byte) (v *big.Rat, special string, ok bool) {
	if len(b) < 2 {
		return nil, "", false
	}
	h := binary.LittleEndian.Uint16(b)
	var neg bool
	var weight int
	var digits []byte
	switch h & 0xC000 {
	case 0xC000:
		switch h {
		case 0xC000:
			return nil, "NaN", true
		case 0xD000:
			return nil, "+Inf", true
		case 0xF000:
			return nil, "-Inf", true
		}
		return nil, "", false
	case 0x8000: // short
		neg = h&0x2000 != 0
		weight = int(h & 0x003F)
		if h&0x0040 != 0 {
			weight |= ^0x3F
		}
		digits = b[2:]
	default: // long
		if len(b) < 4 {
			return nil, "", false
		}
		neg = h&0xC000 == 0x4000
		weight = int(int16(binary.LittleEndian.Uint16(b[2:])))
		digits = b[4:]
	}
	if len(digits)%2 != 0 || weight > 4096 || weight < -4096 {
		return nil, "", false
	}
	v = new(big.Rat)
	base := big.NewRat(10000, 1)
	for i := 0; i < len(digits); i += 2 {
		d := big.NewRat(int64(binary.LittleEndian.Uint16(digits[i:])), 1)
		e := weight - i/2
		p := new(big.Rat).SetInt64(1)
		for range max(e, -e) {
			p.Mul(p, base)
		}
		if e < 0 {
			p.Inv(p)
		}
		v.Add(v, d.Mul(d, p))
	}
	if neg {
		v.Neg(v)
	}
	return v, "", true
}

// ---------------------------------------------------------------------------
// EXPLAIN and session commands: PostgreSQL's parse tree of a utility
// statement is not dumped (PostgreSQL 15 prints "?"), so these are
// compared by their effect.

// compareExplain compares the query inside EXPLAIN (the rest of the text
// after EXPLAIN and its options, which hold no constant but the FORMAT
// name) and the format, seen in the type PostgreSQL describes.
func (o *diffOracle) compareExplain(ctx context.Context, sql string, n *pg_query.ExplainStmt, g *pgReading, fields []pgconn.FieldDescription) ([]string, error) {
	if g.cmd != "6" {
		return []string{fmt.Sprintf("the proxy reads EXPLAIN, PostgreSQL a statement of command type %s", g.cmd)}, nil
	}
	var diffs []string
	want := uint32(25)
	for _, opt := range n.Options {
		if d := opt.GetDefElem(); d != nil && strings.EqualFold(d.Defname, "format") {
			switch strings.ToLower(d.Arg.GetString_().GetSval()) {
			case "json":
				want = 114
			case "xml":
				want = 142
			}
		}
	}
	if len(fields) != 1 || fields[0].DataTypeOID != want {
		diffs = append(diffs, fmt.Sprintf("EXPLAIN: PostgreSQL describes %d columns (first of type %v), the proxy's format gives one of type %d", len(fields), fieldTypes(fields), want))
	}
	start, ok := explainBody(sql)
	if !ok {
		return append(diffs, "EXPLAIN: the oracle cannot find the query in the proxy's text"), nil
	}
	tree, err := pg_query.Parse(sql[start:])
	if err != nil || len(tree.Stmts) != 1 {
		return append(diffs, fmt.Sprintf("EXPLAIN: pg_query does not read the query %q after the options", sql[start:])), nil
	}
	d, _, err := o.compareOne(sentText{"EXPLAIN's query", sql[start:], nil}, tree.Stmts[0].Stmt)
	return append(diffs, d...), err
}

func fieldTypes(fs []pgconn.FieldDescription) []uint32 {
	var ts []uint32
	for _, f := range fs {
		ts = append(ts, f.DataTypeOID)
	}
	return ts
}

// explainBody is the offset of the query in an EXPLAIN statement.
func explainBody(sql string) (int, bool) {
	sc, err := pg_query.Scan(sql)
	if err != nil {
		return 0, false
	}
	toks := sc.Tokens
	i := 0
	if i >= len(toks) || toks[i].Token != pg_query.Token_EXPLAIN {
		return 0, false
	}
	i++
	if i < len(toks) && toks[i].Token == pg_query.Token_ASCII_40 {
		for depth := 0; i < len(toks); i++ {
			switch toks[i].Token {
			case pg_query.Token_ASCII_40:
				depth++
			case pg_query.Token_ASCII_41:
				depth--
			}
			if depth == 0 {
				i++
				break
			}
		}
	}
	for i < len(toks) && (toks[i].Token == pg_query.Token_ANALYZE || toks[i].Token == pg_query.Token_ANALYSE || toks[i].Token == pg_query.Token_VERBOSE) {
		i++
	}
	if i >= len(toks) {
		return 0, false
	}
	return int(toks[i].Start), true
}

// compareSession runs a session command on the exec connection and
// compares what it did with what the proxy's reading says it does. The
// "twin" of a command is built from the proxy's reading without putting
// any of its constants into SQL text: values go as bound parameters,
// names as quoted identifiers, options as fixed keywords.
func (o *diffOracle) compareSession(ctx context.Context, sql string, tree *pg_query.Node) ([]string, error) {
	defer o.idle(ctx)
	switch n := tree.Node.(type) {
	case *pg_query.Node_VariableSetStmt:
		return o.compareSet(ctx, sql, n.VariableSetStmt)
	case *pg_query.Node_VariableShowStmt:
		return o.compareShow(ctx, sql, n.VariableShowStmt)
	case *pg_query.Node_TransactionStmt:
		return o.compareTransaction(ctx, sql, n.TransactionStmt)
	case *pg_query.Node_DiscardStmt:
		o.stats.uncompared++
		if err := o.run(ctx, sql); err != nil {
			return []string{fmt.Sprintf("PostgreSQL refuses the proxy's DISCARD: %v", err)}, nil
		}
		return o.pinned(ctx, "after "+sql)
	}
	return nil, nil
}

func (o *diffOracle) run(ctx context.Context, sql string) error {
	_, err := o.exec.Exec(ctx, sql).ReadAll()
	return err
}

// idle ends whatever transaction a comparison left open.
func (o *diffOracle) idle(ctx context.Context) {
	if o.exec.TxStatus() != 'I' {
		o.run(ctx, "ROLLBACK")
	}
}

// settings reads every setting of the exec connection's session.
func (o *diffOracle) settings(ctx context.Context) (map[string]string, error) {
	res := o.exec.ExecParams(ctx, "SELECT name, setting FROM pg_catalog.pg_settings", nil, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	m := map[string]string{}
	for _, r := range res.Rows {
		m[string(r[0])] = string(r[1])
	}
	return m, nil
}

// pinned checks that the session still has the proxy's pinned settings.
func (o *diffOracle) pinned(ctx context.Context, when string) ([]string, error) {
	s, err := o.settings(ctx)
	if err != nil {
		return nil, err
	}
	return pinnedDiffs(s, when), nil
}

func pinnedDiffs(s map[string]string, when string) []string {
	var diffs []string
	for k, v := range rewrite.PinnedSettings {
		if !strings.EqualFold(s[k], v) {
			diffs = append(diffs, fmt.Sprintf("pinned setting %s is %q %s, not %q", k, s[k], when, v))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// batchStmt is one statement of a batch on the exec connection.
type batchStmt struct {
	sql    string
	params [][]byte
}

const settingsSQL = "SELECT name, setting FROM pg_catalog.pg_settings"

// inTx runs stmts in a transaction, reads the settings and rolls back, in
// one batch: no wait between the statements, so an idle or lock timeout
// the statements set cannot fire. (A statement_timeout they set can still
// cancel the read of the settings: errCanceled.)
func (o *diffOracle) inTx(ctx context.Context, stmts ...batchStmt) (map[string]string, error) {
	defer o.idle(ctx)
	b := &pgconn.Batch{}
	b.ExecParams("BEGIN", nil, nil, nil, nil)
	for _, s := range stmts {
		b.ExecParams(s.sql, s.params, nil, nil, nil)
	}
	b.ExecParams(settingsSQL, nil, nil, nil, nil)
	b.ExecParams("ROLLBACK", nil, nil, nil, nil)
	res, err := o.exec.ExecBatch(ctx, b).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(res) != len(stmts)+3 {
		return nil, fmt.Errorf("batch: %d results for %d statements", len(res), len(stmts)+3)
	}
	m := map[string]string{}
	for _, r := range res[len(res)-2].Rows {
		m[string(r[0])] = string(r[1])
	}
	return m, nil
}

var errNoTwin = errors.New("no twin")

// compareSet compares the settings after the proxy's SET (or RESET) with
// those after the twin the proxy's reading gives, both inside a
// transaction that is rolled back; and checks the pinned settings.
func (o *diffOracle) compareSet(ctx context.Context, sql string, n *pg_query.VariableSetStmt) ([]string, error) {
	got, gotErr := o.inTx(ctx, batchStmt{sql: sql})
	twin, err := twinSet(n)
	if err != nil {
		o.stats.uncompared++
		if gotErr != nil {
			return o.refusedSession(gotErr)
		}
		return pinnedDiffs(got, "after it"), nil
	}
	want, wantErr := o.inTx(ctx, twin...)
	if e := pgErrorOf(gotErr, wantErr); e != nil {
		return nil, e // the connection, not PostgreSQL
	}
	if pgCode(gotErr) == "57014" || pgCode(wantErr) == "57014" {
		// The statement_timeout it sets cancelled the oracle's own read.
		o.stats.uncompared++
		return nil, nil
	}
	o.stats.compared++
	switch {
	case gotErr != nil && wantErr != nil:
		return nil, nil // both refused
	case gotErr != nil:
		return []string{fmt.Sprintf("PostgreSQL refuses it (%v) but accepts the proxy's reading", gotErr)}, nil
	case wantErr != nil:
		return []string{fmt.Sprintf("PostgreSQL accepts it but refuses the proxy's reading (%v)", wantErr)}, nil
	}
	var diffs []string
	for k, v := range got {
		if want[k] != v {
			diffs = append(diffs, fmt.Sprintf("setting %s: PostgreSQL's reading sets %q, the proxy's %q", k, v, want[k]))
		}
	}
	sort.Strings(diffs)
	return append(diffs, pinnedDiffs(got, "after it")...), nil
}

// refusedSession reports PostgreSQL's refusal of a session command the
// oracle cannot compare: a syntax error is a difference, any other refusal
// (an invalid value) is PostgreSQL's to make.
func (o *diffOracle) refusedSession(err error) ([]string, error) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil, err
	}
	if pe.Code == "42601" {
		return []string{fmt.Sprintf("PostgreSQL cannot parse it: %s", pe.Message)}, nil
	}
	o.stats.pgRefused[pe.Code]++
	return nil, nil
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// pgErrorOf returns the first of errs that did not come from PostgreSQL.
func pgErrorOf(errs ...error) error {
	for _, err := range errs {
		var pe *pgconn.PgError
		if err != nil && !errors.As(err, &pe) {
			return err
		}
	}
	return nil
}

// twinSet is what the proxy's reading of a SET says to do, without SQL
// text made from its constants: values are bound parameters of set_config.
func twinSet(n *pg_query.VariableSetStmt) ([]batchStmt, error) {
	local := []byte(strconv.FormatBool(n.IsLocal))
	name := []byte(n.Name)
	switch n.Kind {
	case pg_query.VariableSetKind_VAR_SET_VALUE:
		var vals []string
		for _, a := range n.Args {
			c := a.GetAConst()
			if c == nil || c.Isnull {
				return nil, errNoTwin // SET TIME ZONE INTERVAL '...' HOUR TO MINUTE
			}
			switch v := c.Val.(type) {
			case *pg_query.A_Const_Ival:
				vals = append(vals, strconv.Itoa(int(v.Ival.GetIval())))
			case *pg_query.A_Const_Fval:
				vals = append(vals, v.Fval.GetFval())
			case *pg_query.A_Const_Sval:
				vals = append(vals, v.Sval.GetSval())
			case *pg_query.A_Const_Boolval:
				vals = append(vals, strconv.FormatBool(v.Boolval.GetBoolval()))
			default:
				return nil, errNoTwin
			}
		}
		if len(vals) > 1 {
			// flatten_set_variable_args joins the values of list settings
			// and refuses several for the others; set_config would not.
			return nil, errNoTwin
		}
		return []batchStmt{{sql: "SELECT pg_catalog.set_config($1, $2, $3::bool)", params: [][]byte{name, []byte(strings.Join(vals, ", ")), local}}}, nil
	case pg_query.VariableSetKind_VAR_SET_DEFAULT, pg_query.VariableSetKind_VAR_RESET:
		// current_setting fails as SET does on an unknown setting.
		return []batchStmt{
			{sql: "SELECT pg_catalog.current_setting($1)", params: [][]byte{name}},
			{sql: "SELECT pg_catalog.set_config(name, reset_val, $2::bool) FROM pg_catalog.pg_settings WHERE lower(name) = lower($1)", params: [][]byte{name, local}},
		}, nil
	case pg_query.VariableSetKind_VAR_SET_CURRENT, pg_query.VariableSetKind_VAR_RESET_ALL:
		return nil, nil // no change from a fresh transaction
	case pg_query.VariableSetKind_VAR_SET_MULTI:
		kw, err := transactionKeywords(n.Args)
		if err != nil {
			return nil, err
		}
		switch strings.ToLower(n.Name) {
		case "transaction":
			return []batchStmt{{sql: "SET TRANSACTION " + kw}}, nil
		case "session characteristics":
			return []batchStmt{{sql: "SET SESSION CHARACTERISTICS AS TRANSACTION " + kw}}, nil
		}
	}
	return nil, errNoTwin
}

// transactionKeywords renders transaction options from fixed keywords.
func transactionKeywords(opts []*pg_query.Node) (string, error) {
	var kws []string
	for _, o := range opts {
		d := o.GetDefElem()
		if d == nil {
			return "", errNoTwin
		}
		c := d.Arg.GetAConst()
		switch d.Defname {
		case "transaction_isolation":
			kw, ok := map[string]string{"serializable": "SERIALIZABLE", "repeatable read": "REPEATABLE READ",
				"read committed": "READ COMMITTED", "read uncommitted": "READ UNCOMMITTED"}[c.GetSval().GetSval()]
			if !ok {
				return "", errNoTwin
			}
			kws = append(kws, "ISOLATION LEVEL "+kw)
		case "transaction_read_only":
			kws = append(kws, map[bool]string{true: "READ ONLY", false: "READ WRITE"}[c.GetIval().GetIval() == 1])
		case "transaction_deferrable":
			kws = append(kws, map[bool]string{true: "DEFERRABLE", false: "NOT DEFERRABLE"}[c.GetIval().GetIval() == 1])
		default:
			return "", errNoTwin
		}
	}
	return strings.Join(kws, ", "), nil
}

var unknownSettingRE = regexp.MustCompile(`unrecognized configuration parameter "(.*)"`)

// compareShow compares the setting PostgreSQL shows (its column's name)
// with the proxy's reading.
func (o *diffOracle) compareShow(ctx context.Context, sql string, n *pg_query.VariableShowStmt) ([]string, error) {
	res, err := o.exec.Exec(ctx, sql).ReadAll()
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		if m := unknownSettingRE.FindStringSubmatch(pe.Message); m != nil && strings.EqualFold(m[1], n.Name) {
			return nil, nil
		}
		return []string{fmt.Sprintf("PostgreSQL refuses SHOW %s: %s", n.Name, pe.Message)}, nil
	case err != nil:
		return nil, err
	}
	o.stats.compared++
	if len(res) != 1 || len(res[0].FieldDescriptions) == 0 {
		return []string{"SHOW: PostgreSQL returns no column"}, nil
	}
	got := strings.ToLower(res[0].FieldDescriptions[0].Name)
	want := strings.ToLower(n.Name)
	if want == "all" && got == "name" || got == want {
		return nil, nil
	}
	return []string{fmt.Sprintf("SHOW: PostgreSQL shows %q, the proxy's reading %q", got, want)}, nil
}

// compareTransaction compares the effect of BEGIN (its options), COMMIT
// and ROLLBACK (whether the transaction's work is kept, and chaining) and
// savepoint commands (the savepoint's name).
func (o *diffOracle) compareTransaction(ctx context.Context, sql string, n *pg_query.TransactionStmt) ([]string, error) {
	const probe = "dpproxy-differential-probe"
	var diffs []string
	fail := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	o.stats.compared++
	switch n.Kind {
	case pg_query.TransactionStmtKind_TRANS_STMT_BEGIN, pg_query.TransactionStmtKind_TRANS_STMT_START:
		read := func(begin ...string) (string, error) {
			defer o.idle(ctx)
			for _, s := range begin {
				if err := o.run(ctx, s); err != nil {
					return "", err
				}
			}
			if o.exec.TxStatus() != 'T' {
				return "not in a transaction", nil
			}
			res := o.exec.ExecParams(ctx, "SELECT concat_ws(', ', current_setting('transaction_isolation'), current_setting('transaction_read_only'), current_setting('transaction_deferrable'))", nil, nil, nil, nil).Read()
			if res.Err != nil {
				return "", res.Err
			}
			return string(res.Rows[0][0]), nil
		}
		got, err := read(sql)
		if err != nil {
			return []string{fmt.Sprintf("PostgreSQL refuses it: %v", err)}, nil
		}
		twin := []string{"BEGIN"}
		kw, err := transactionKeywords(n.Options)
		if err != nil {
			o.stats.uncompared++
			return nil, nil
		}
		if kw != "" {
			twin = append(twin, "SET TRANSACTION "+kw)
		}
		want, err := read(twin...)
		if err != nil {
			return nil, err
		}
		if got != want {
			fail("BEGIN: PostgreSQL's transaction is (%s), the proxy's reading (%s)", got, want)
		}
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT, pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		defer o.run(ctx, "RESET application_name")
		defer o.idle(ctx)
		for _, s := range []string{"BEGIN", "SET application_name = '" + probe + "'", sql} {
			if err := o.run(ctx, s); err != nil {
				return []string{fmt.Sprintf("PostgreSQL refuses it: %v", err)}, nil
			}
		}
		inTx := o.exec.TxStatus() == 'T'
		res := o.exec.ExecParams(ctx, "SELECT pg_catalog.current_setting('application_name')", nil, nil, nil, nil).Read()
		if res.Err != nil {
			return nil, res.Err
		}
		kept := string(res.Rows[0][0]) == probe
		if inTx != n.Chain {
			fail("PostgreSQL is in a transaction afterwards: %v; the proxy's reading (AND CHAIN): %v", inTx, n.Chain)
		}
		if commit := n.Kind == pg_query.TransactionStmtKind_TRANS_STMT_COMMIT; kept != commit {
			fail("PostgreSQL kept the transaction's work: %v; the proxy reads COMMIT: %v", kept, commit)
		}
	case pg_query.TransactionStmtKind_TRANS_STMT_SAVEPOINT:
		defer o.idle(ctx)
		name := pgx.Identifier{n.SavepointName}.Sanitize()
		if err := o.run(ctx, "BEGIN"); err != nil {
			return nil, err
		}
		if err := o.run(ctx, sql); err != nil {
			return []string{fmt.Sprintf("PostgreSQL refuses it: %v", err)}, nil
		}
		if err := o.run(ctx, "RELEASE SAVEPOINT "+name); err != nil {
			fail("PostgreSQL made a savepoint other than %q: %v", n.SavepointName, err)
		}
	case pg_query.TransactionStmtKind_TRANS_STMT_RELEASE, pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
		defer o.idle(ctx)
		name := pgx.Identifier{n.SavepointName}.Sanitize()
		for _, s := range []string{"BEGIN", "SAVEPOINT " + name} {
			if err := o.run(ctx, s); err != nil {
				return nil, err
			}
		}
		if err := o.run(ctx, sql); err != nil {
			fail("PostgreSQL names a savepoint other than %q: %v", n.SavepointName, err)
		}
	default:
		o.stats.compared--
		o.stats.uncompared++
		if err := o.run(ctx, sql); err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				return nil, err
			}
		}
	}
	return diffs, nil
}

// diffPostSQL is the post-processing query of proxy/postprocess.go's postSQL
// (kept in step by hand) for the result columns the upstream described:
// its values are bound as text arrays, so only the text matters here.
func diffPostSQL(plan *rewrite.Plan, fields []pgconn.FieldDescription) (string, []uint32) {
	types := pgtype.NewMap()
	var casts, us, ps []string
	oids := make([]uint32, len(fields))
	for i, f := range fields {
		name := "text"
		if t, ok := types.TypeForOID(f.DataTypeOID); ok {
			name = t.Name
		}
		casts = append(casts, fmt.Sprintf("u.c%d::%s AS dp_c%d", i, name, i))
		us = append(us, fmt.Sprintf("c%d", i))
		ps = append(ps, fmt.Sprintf("$%d::text[]", i+1))
		oids[i] = 1009
	}
	sql := "SELECT " + plan.Post.Targets + " FROM (SELECT " + strings.Join(casts, ", ") +
		" FROM unnest(" + strings.Join(ps, ", ") + ") AS u(" + strings.Join(us, ", ") + ")) AS dp"
	if plan.Post.Where != "" {
		sql += " WHERE " + plan.Post.Where
	}
	if plan.Post.OrderBy != "" {
		sql += " ORDER BY " + plan.Post.OrderBy
	}
	if plan.Limit >= 0 {
		sql += " LIMIT " + strconv.FormatInt(plan.Limit, 10)
	}
	if plan.Offset > 0 {
		sql += " OFFSET " + strconv.FormatInt(plan.Offset, 10)
	}
	return sql, oids
}

// ---------------------------------------------------------------------------
// The corpus and the generator.

// diffCorpusSize is the number of generated and mutated texts in the
// corpus, on top of the seeds.
const diffCorpusSize = 4000

// diffSeeds are the golden inputs of rewrite/testdata and the attack corpus.
func diffSeeds(t testing.TB) []string {
	cases, err := golden.Cases("../rewrite/testdata")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no seeds in ../rewrite/testdata: %v", err)
	}
	var seeds []string
	for _, c := range cases {
		seeds = append(seeds, c.SQL)
	}
	for _, a := range attacks {
		seeds = append(seeds, a.sql)
	}
	return seeds
}

// diffCorpus is the seeds, then generated statements and mutations of the
// seeds, from a fixed seed: the same texts on every run.
func diffCorpus(t testing.TB) []string {
	seeds := diffSeeds(t)
	corpus := append([]string(nil), seeds...)
	g := newDiffGen(11)
	for i := range diffCorpusSize {
		switch {
		case i%4 == 3:
			corpus = append(corpus, g.mutate(seeds[g.n(len(seeds))]))
		case i%4 == 2:
			corpus = append(corpus, g.mutate(g.statement()))
		default:
			corpus = append(corpus, g.statement())
		}
	}
	return corpus
}

// diffGen generates SQL texts over the test configuration's tables and
// catalogs, with every lexical form in which two readings could part:
// string prefixes, escapes, dollar quoting, Unicode escapes with their
// escape characters, comments, numeric literal forms, multibyte and
// combining characters, characters whose SJIS/GBK/BIG5 encodings end in a
// backslash, typed literals and casts.
type diffGen struct{ r *rand.Rand }

func newDiffGen(seed uint64) *diffGen { return &diffGen{r: rand.New(rand.NewPCG(seed, 0x0d1ff))} }

func (g *diffGen) n(k int) int             { return g.r.IntN(k) }
func (g *diffGen) chance(p float64) bool   { return g.r.Float64() < p }
func (g *diffGen) one(xs ...string) string { return xs[g.n(len(xs))] }
func (g *diffGen) list(k int, f func() string) string {
	var xs []string
	for range k {
		xs = append(xs, f())
	}
	return strings.Join(xs, ","+g.sp())
}

// diffPieces are the fragments string contents are made of.
var diffPieces = []string{"abc", "north", "web", "O'Reilly", `back\slash`, `\'`, `\`, "'", `"`, "''", "--", "-- x", "/*", "*/",
	"/* c */", ";", "$", "$$", "$a$", "%", "_", "\t", "\n", "\r", "表", "ソ", "十", "能", "功", "予", "é", "e\u0301", "𝄞",
	"\u00a0", "\u2028", "\ufeff", "\u200d", "ŕ\\", "ŕ", "Ÿ", "\x7f", " ", "FROM orders", ", customer_id FROM orders --",
	"0x1F", "1_000", `\x41`, `\u0041`, "U&", "UESCAPE", "\x01", "Ω"}

func (g *diffGen) text() string {
	var b strings.Builder
	for k := g.n(4); k > 0; k-- {
		b.WriteString(diffPieces[g.n(len(diffPieces))])
	}
	return b.String()
}

// sp is the space between tokens: mostly a blank, sometimes comments,
// nested comments, line breaks.
func (g *diffGen) sp() string {
	if g.chance(0.85) {
		return " "
	}
	return g.one("\n", "\t", "  ", " /* c */ ", " -- c\n", " /* a /* nested */ b */ ", "\r\n", "\f", "/**/", " --'\n",
		" /* ' */ ", " -- \u00e9\n", " /* $$ */ ")
}

// strLit renders s as one of PostgreSQL's string literal forms.
func (g *diffGen) strLit(s string) string {
	plain := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch g.n(10) {
	case 0, 1:
		return plain(s)
	case 2, 3:
		return g.escapeString(s)
	case 4:
		return g.unicodeString(s)
	case 5:
		tag := g.one("", "a", "tag", "_x1", "Ω", "A")
		if strings.Contains(s, "$"+tag+"$") || strings.HasSuffix(s, "$") {
			return plain(s)
		}
		return "$" + tag + "$" + s + "$" + tag + "$"
	case 6:
		return g.one("N", "n") + plain(s)
	case 7:
		// Adjacent literals separated by a line break are one.
		k := g.n(len(s) + 1)
		for k > 0 && k < len(s) && !utf8.RuneStart(s[k]) {
			k--
		}
		return plain(s[:k]) + g.one("\n", " \n ", "\r\n", "\n-- c\n", "\n/* c */\n") + plain(s[k:])
	case 8:
		bits := ""
		for k := g.n(9); k > 0; k-- {
			bits += g.one("0", "1")
		}
		return g.one("B", "b") + "'" + bits + "'"
	default:
		hex := ""
		for k := g.n(5); k > 0; k-- {
			hex += g.one("0", "1", "a", "F", "9")
		}
		return g.one("X", "x") + "'" + hex + "'"
	}
}

// escapeString renders s as E'...' with backslash escapes.
func (g *diffGen) escapeString(s string) string {
	var b strings.Builder
	b.WriteString(g.one("E'", "e'"))
	for _, r := range s {
		switch {
		case r == '\'':
			b.WriteString(g.one(`\'`, "''"))
		case r == '\\':
			b.WriteString(`\\`)
		case r == 0 || r >= 0xD800 && r <= 0xDFFF:
		case g.chance(0.25):
			switch {
			case r < 0x80 && g.chance(0.5):
				fmt.Fprintf(&b, `\x%02x`, r)
			case r < 0x80:
				fmt.Fprintf(&b, `\%03o`, r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04X`, r)
			default:
				fmt.Fprintf(&b, `\U%08X`, r)
			}
		case r == '\n' && g.chance(0.5):
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("'")
	return b.String()
}

// uescapes are escape characters for U&” and U&"", with some PostgreSQL
// refuses.
var uescapes = []string{`\`, "!", "#", "~", "*", "=", "%", "^", "|", ":", ";", "?", "@", "`", "&", "+", "a", "é", "ab"}

// unicodeString renders s as U&'...' with Unicode escapes.
func (g *diffGen) unicodeString(s string) string {
	esc := uescapes[g.n(len(uescapes))]
	return "U&'" + g.unicodeBody(s, esc, '\'') + "'" + g.uescape(esc)
}

func (g *diffGen) uescape(esc string) string {
	if esc == `\` && g.chance(0.8) {
		return ""
	}
	return g.sp() + g.one("UESCAPE", "uescape") + g.sp() + "'" + strings.ReplaceAll(esc, "'", "''") + "'"
}

func (g *diffGen) unicodeBody(s, esc string, quote rune) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == quote:
			b.WriteRune(r)
			b.WriteRune(r)
		case string(r) == esc:
			b.WriteString(esc + esc)
		case r == 0 || r >= 0xD800 && r <= 0xDFFF:
		case g.chance(0.3) && r < 0x10000:
			fmt.Fprintf(&b, "%s%04X", esc, r)
		case g.chance(0.3):
			fmt.Fprintf(&b, "%s+%06X", esc, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var simpleIdentRE = regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`)

// ident renders a name as a bare, quoted or Unicode-escaped identifier.
func (g *diffGen) ident(name string) string {
	simple := simpleIdentRE.MatchString(name)
	switch g.n(7) {
	case 0, 1, 2:
		if simple {
			return name
		}
	case 3:
		if simple {
			return strings.ToUpper(name)
		}
	case 4, 5:
		esc := uescapes[g.n(len(uescapes))]
		body := g.unicodeBody(name, esc, '"')
		if g.chance(0.1) {
			esc = uescapes[g.n(len(uescapes))] // another name, or an error
		}
		return g.one("U&", "u&") + `"` + body + `"` + g.uescape(esc)
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func (g *diffGen) table(name string) string {
	t := g.ident(name)
	switch g.n(6) {
	case 0:
		t = g.ident("public") + "." + t
	case 1:
		t = "public" + g.sp() + "." + g.sp() + t
	}
	return t
}

var diffNumbers = []string{"0", "1", "-1", "42", "007", "1.5", ".5", "5.", "1e5", "1E-3", "2.5e+2", "0x1F", "0X1f", "0o17",
	"0b101", "1_000", "1_000.5", "0x1_F", "2147483647", "2147483648", "-2147483648", "9223372036854775807",
	"9223372036854775808", "99999999999999999999999999", "0x7FFFFFFFFFFFFFFF", "0x8000000000000000", "1e", "0x",
	"1__0", "1_", "123abc", "0.0", "00.5e1", "1e400", "-0", "3", "100", "0.25", "1e-400"}

func (g *diffGen) number() string { return diffNumbers[g.n(len(diffNumbers))] }

var diffTypes = []string{"int", "integer", "int8", "bigint", "smallint", "numeric", "numeric(10,2)", "real", "float8",
	"double precision", "text", "varchar", "varchar(5)", "char(3)", "character varying(2)", "name", "bool", "boolean",
	"date", "timestamp", "timestamptz", "interval", "bit(3)", "varbit", "bytea", `"char"`, "pg_catalog.text", "oid"}

// literal is a constant in one of its forms.
func (g *diffGen) literal() string {
	switch g.n(12) {
	case 0, 1, 2, 3:
		return g.strLit(g.text())
	case 4, 5:
		return g.number()
	case 6:
		ty := g.one("date", "timestamp", "timestamptz", "interval", "time", "int4", "bool", "numeric", "text",
			"varchar(3)", "char", "bpchar", "float8", "bit(2)", "int8", "name")
		val := g.one("2024-01-01", "2024-1-1", "epoch", "infinity", "1 day", "10:00", "5", " 5 ", "t", "yes", "1.5",
			"abcd", "ab ", "x", "0x1F", "1_000", "NaN", "-Infinity", "01", "1e3")
		if g.chance(0.3) {
			val = g.text()
		}
		return ty + g.sp() + g.strLit(val)
	case 7:
		return g.literal() + g.sp() + "::" + g.sp() + diffTypes[g.n(len(diffTypes))]
	case 8:
		return "CAST(" + g.literal() + " AS " + diffTypes[g.n(len(diffTypes))] + ")"
	case 9:
		return g.one("true", "false", "NULL", "TRUE", "null")
	case 10:
		return "ARRAY[" + g.list(1+g.n(3), g.literal) + "]"
	default:
		return "(" + g.sp() + g.literal() + g.sp() + ")"
	}
}

var diffOps = []string{"+", "-", "*", "/", "%", "^", "||", "=", "<>", "!=", "<", ">", "<=", ">=", "LIKE", "NOT LIKE",
	"ILIKE", "~", "!~", "~*", "IS DISTINCT FROM", "IS NOT DISTINCT FROM", "*-", "+-", "-/**/-", "|/", "@", "&", "#", "<<", "~~", "!~~"}

// expr is an expression over cols (which may be empty).
func (g *diffGen) expr(cols []string, depth int) string {
	k := g.n(10)
	if depth > 2 {
		k = g.n(3)
	}
	switch k {
	case 0, 1:
		return g.literal()
	case 2:
		if len(cols) > 0 {
			return g.ident(cols[g.n(len(cols))])
		}
		return g.literal()
	case 3:
		return g.expr(cols, depth+1) + g.sp() + diffOps[g.n(len(diffOps))] + g.sp() + g.expr(cols, depth+1)
	case 4:
		f := g.one("lower", "upper", "length", "btrim", "quote_ident", "char_length", "md5", "pg_catalog.lower", "LOWER", `"lower"`, "abs")
		return f + "(" + g.expr(cols, depth+1) + ")"
	case 5:
		return g.one("concat", "coalesce", "greatest", "least", "nullif", "replace", "split_part", "concat") +
			"(" + g.list(2+g.n(2), func() string { return g.expr(cols, depth+1) }) + ")"
	case 6:
		return g.one("substring(", "substring(", "position(", "trim(both ", "overlay(") + g.expr(cols, depth+1) +
			g.one(" FROM 1 FOR 2)", " FROM 2)", " IN 'abc')", " FROM 'x')", " PLACING 'y' FROM 2)")
	case 7:
		return "CASE WHEN " + g.cond(cols, depth+1) + " THEN " + g.expr(cols, depth+1) + " ELSE " + g.expr(cols, depth+1) + " END"
	case 8:
		return g.one("current_user", "current_date", "CURRENT_TIMESTAMP", "localtime(2)", "session_user", "current_schema",
			"version()", "current_database()", "now()", "current_setting('DateStyle')", "current_setting("+g.strLit("TimeZone")+")",
			"user", "current_catalog", "current_role", "SYSTEM_USER")
	default:
		return "(" + g.expr(cols, depth+1) + ")" + g.one("", "::text", "::int", " COLLATE \"C\"", "::numeric(5,1)", "::varchar(2)")
	}
}

func (g *diffGen) cond(cols []string, depth int) string {
	k := g.n(9)
	if depth > 2 {
		k = g.n(4)
	}
	switch k {
	case 0, 1, 2:
		return g.expr(cols, depth+1) + g.sp() + g.one("=", "<>", "<", ">=", "LIKE", "ILIKE", "!=", "~~", "IS DISTINCT FROM") + g.sp() + g.expr(cols, depth+1)
	case 3:
		return g.expr(cols, depth+1) + " IN (" + g.list(1+g.n(3), g.literal) + ")"
	case 4:
		return g.expr(cols, depth+1) + g.one(" BETWEEN ", " NOT BETWEEN ", " BETWEEN SYMMETRIC ") + g.literal() + " AND " + g.literal()
	case 5:
		return g.cond(cols, depth+1) + g.sp() + g.one("AND", "OR", "and") + g.sp() + g.cond(cols, depth+1)
	case 6:
		return "NOT (" + g.cond(cols, depth+1) + ")"
	case 7:
		return g.expr(cols, depth+1) + g.one(" IS NULL", " IS NOT NULL", " IS TRUE", " NOTNULL")
	default:
		return g.expr(cols, depth+1) + " SIMILAR TO " + g.strLit(g.text())
	}
}

func (g *diffGen) alias() string {
	return g.ident(g.one("x", "dp", "Total", "sel ect", "ǆ", "a$b", "_1", "select", "from", "x\u0301", "表",
		strings.Repeat("long", 17), "a\"b", "customer_id", "amount"))
}

var (
	ordersCols    = []string{"customer_id", "product_id", "region", "channel", "quantity", "amount", "ordered_at", "order_id"}
	customersCols = []string{"customer_id", "name", "region", "signup_date", "age"}
	productsCols  = []string{"product_id", "name", "category", "price"}
)

func (g *diffGen) where(cols []string) string {
	if g.chance(0.3) {
		return ""
	}
	return g.sp() + g.one("WHERE", "where") + g.sp() + g.cond(cols, 0)
}

// statement is one generated text.
func (g *diffGen) statement() string {
	switch g.n(24) {
	case 0, 1, 2:
		return "SELECT " + g.list(1+g.n(3), func() string {
			e := g.expr(nil, 0)
			if g.chance(0.4) {
				e += g.sp() + "AS" + g.sp() + g.alias()
			}
			return e
		})
	case 3, 4, 5:
		s := "SELECT " + g.list(1+g.n(3), func() string { return g.expr(productsCols, 0) }) + g.sp() + "FROM" + g.sp() + g.table("products") +
			g.one("", " p", " AS q") + g.where(productsCols)
		if g.chance(0.3) {
			s += " ORDER BY 1"
		}
		if g.chance(0.3) {
			s += " LIMIT " + g.number()
		}
		return s
	case 6, 7:
		return g.one(
			"SELECT relname FROM "+g.table("pg_class")+" WHERE relname = "+g.strLit(g.one("orders", "pg_class", g.text())),
			"SELECT count(*) FROM pg_catalog."+g.ident("pg_namespace")+" WHERE nspname <> "+g.strLit(g.text()),
			"SELECT table_name FROM information_schema.tables WHERE table_schema = "+g.strLit(g.one("public", g.text())),
			"SELECT attname FROM pg_attribute WHERE attrelid = "+g.strLit(g.one("orders", "products", "pg_class"))+"::regclass AND attnum > "+g.number(),
			"SELECT pg_catalog.format_type("+g.number()+", NULL)",
			"SELECT current_setting("+g.strLit(g.one("DateStyle", "server_version", "search_path", "client_encoding", "standard_conforming_strings", g.text()))+")",
			"SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname LIKE "+g.strLit(g.text()),
			"SELECT * FROM "+g.table("products")+" JOIN "+g.table("products")+" AS p2 USING (product_id) WHERE "+g.cond(nil, 1),
			"SELECT typname FROM pg_type NATURAL JOIN pg_namespace WHERE typname = "+g.literal(),
		)
	case 8, 9, 10, 11, 12:
		return g.private()
	case 13:
		// Attempts to read private rows behind a constant's end.
		return "SELECT " + g.strLit(g.text()+g.one("', customer_id FROM orders --", `\', amount FROM orders --`, "$$, amount FROM orders --", "")) +
			g.one("", ", customer_id FROM orders", " --'", " -- '\n, amount FROM orders", " FROM orders")
	case 14:
		name := g.one("orders", "ord!0065rs", "t", "pg_class", "x")
		return "WITH " + g.ident(name) + " AS (SELECT " + g.literal() + " AS customer_id, " + g.literal() + " AS amount) SELECT customer_id, amount FROM " + g.table("orders")
	case 15:
		return "EXPLAIN " + g.one("", "(COSTS OFF) ", "(FORMAT JSON) ", "VERBOSE ", "(FORMAT xml, COSTS false) ") +
			"SELECT " + g.expr(productsCols, 1) + " FROM " + g.table("products") + g.where(productsCols)
	case 16, 17:
		return g.set()
	case 18:
		return g.one("SHOW ", "show ") + g.one("DateStyle", "TimeZone", "TIME ZONE", "client_encoding", "application_name",
			"extra_float_digits", "standard_conforming_strings", "server_version", "search_path", "transaction isolation level",
			`"DateStyle"`, "all", "backslash_quote", "integer_datetimes", "lc_time", "IntervalStyle")
	case 19:
		return g.transaction()
	case 20:
		return "VALUES (" + g.list(1+g.n(3), g.literal) + ")" + g.one("", ", ("+g.literal()+")")
	case 21:
		// Constructs of PostgreSQL 16's grammar (pg_query) that 15 lacks.
		return g.one("SELECT "+g.expr(customersCols, 0)+" FROM "+g.table("customers")+g.where(customersCols),
			"SELECT * FROM (SELECT "+g.expr(productsCols, 1)+" AS x FROM "+g.table("products")+")",
			"SELECT count(*) FROM (SELECT * FROM "+g.table("orders")+g.where(ordersCols)+")",
			"SELECT JSON_OBJECT('a': "+g.literal()+")", "SELECT "+g.literal()+" IS JSON", "SELECT SYSTEM_USER")
	default:
		return g.statement() + g.one(";", "; ", ";\n", " ;") + g.sp() + g.statement()
	}
}

// private is an aggregate over a private table, which the proxy rewrites.
func (g *diffGen) private() string {
	w := g.where(ordersCols)
	switch g.n(9) {
	case 0:
		return "SELECT count(*) FROM " + g.table("orders") + w
	case 1:
		return "SELECT region, count(*) FROM " + g.table("orders") + w + " GROUP BY region"
	case 2:
		return "SELECT sum(amount)" + g.one("", " AS "+g.alias()) + " FROM " + g.table("orders") + w
	case 3:
		return "SELECT avg(quantity) FROM " + g.table("orders") + w
	case 4:
		return "SELECT channel, count(*) FROM orders" + w + " GROUP BY channel HAVING count(*) > " + g.number() +
			" ORDER BY 2 DESC LIMIT " + g.one("1", "5", "0x2", "1_0", "ALL")
	case 5:
		return "SELECT count(DISTINCT customer_id) FROM orders" + w
	case 6:
		return "SELECT avg(age) FROM " + g.table("customers") + g.where(customersCols)
	case 7:
		return "SELECT region, sum(amount) FROM orders o JOIN products p USING (product_id) WHERE p.category = " + g.literal() + " GROUP BY region"
	default:
		return "SELECT percentile_cont(" + g.one("0.5", ".5", "5e-1", "0.9") + ") WITHIN GROUP (ORDER BY amount) FROM orders" + w
	}
}

// set is a SET or RESET, of settings a client may change and of pinned
// ones, including every way of asking for another client encoding.
func (g *diffGen) set() string {
	name := g.one("application_name", "DateStyle", "TimeZone", "extra_float_digits", "statement_timeout", "lock_timeout",
		"IntervalStyle", "bytea_output", "client_min_messages", "lc_time", "lc_numeric", "lc_monetary", "client_encoding",
		"client_encoding", "standard_conforming_strings", "backslash_quote", "search_path", "transform_null_equals", "work_mem",
		"escape_string_warning", `"DateStyle"`, "application_name")
	var val string
	switch g.n(6) {
	case 0, 1:
		val = g.strLit(g.one("ISO, DMY", "SQL", "UTC", "Europe/Paris", "+01:00", "hex", "escape", "warning", "C", "5s", "100",
			"UTF8", "utf-8", "Unicode", "SJIS", "Shift_JIS", "GBK", "BIG5", "LATIN1", "SQL_ASCII", "off", "on", "safe_encoding",
			"postgres", "iso_8601", g.text()))
	case 2:
		val = g.number()
	case 3:
		val = g.one("DEFAULT", "on", "off", "true", "LOCAL", "utf8", "sjis", "iso", "UTC", `"UTF8"`, "safe_encoding")
	case 4:
		val = g.strLit(g.text()) + ", " + g.strLit(g.text())
	default:
		val = g.literal()
	}
	switch g.n(10) {
	case 0:
		return "RESET " + name
	case 1:
		return g.one("RESET ALL", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
			"SET TIME ZONE LOCAL", "SET TIME ZONE INTERVAL '+01:00' HOUR TO MINUTE", "SET NAMES "+val, "SET TIME ZONE "+val,
			"SET "+name+" FROM CURRENT", "SET TRANSACTION READ ONLY, DEFERRABLE")
	}
	return "SET " + g.one("", "", "LOCAL ", "SESSION ") + name + g.sp() + g.one("=", "TO", "to") + g.sp() + val
}

func (g *diffGen) transaction() string {
	sp := g.ident(g.one("sp", "a b", "Sp", "表", `q"`, "savepoint"))
	return g.one(
		"BEGIN", "BEGIN ISOLATION LEVEL SERIALIZABLE", "BEGIN READ ONLY", "BEGIN READ WRITE", "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY, DEFERRABLE",
		"BEGIN TRANSACTION ISOLATION LEVEL READ COMMITTED NOT DEFERRABLE", "COMMIT", "ROLLBACK", "END", "ABORT", "COMMIT AND CHAIN", "ROLLBACK AND NO CHAIN",
		"SAVEPOINT "+sp, "RELEASE SAVEPOINT "+sp, "RELEASE "+sp, "ROLLBACK TO SAVEPOINT "+sp, "ROLLBACK TO "+sp,
		"DISCARD ALL", "DISCARD PLANS", "DISCARD TEMP", "DISCARD SEQUENCES", "PREPARE TRANSACTION 'x'",
	)
}

// mutate changes one to three tokens of x (or bytes, where x does not
// scan): a constant becomes another form, a name another spelling, and
// comments, line breaks and stray characters appear between tokens.
func (g *diffGen) mutate(x string) string {
	sc, err := pg_query.Scan(x)
	toks := sc.GetTokens()
	type edit struct {
		start, end int
		text       string
	}
	var edits []edit
	for k := 1 + g.n(3); k > 0; k-- {
		if err != nil || len(toks) == 0 || g.chance(0.15) {
			i := g.n(len(x) + 1)
			for i > 0 && i < len(x) && !utf8.RuneStart(x[i]) {
				i--
			}
			edits = append(edits, edit{i, i, diffPieces[g.n(len(diffPieces))]})
			continue
		}
		t := toks[g.n(len(toks))]
		s, e := int(t.Start), int(t.End)
		switch t.Token {
		case pg_query.Token_SCONST, pg_query.Token_USCONST, pg_query.Token_BCONST, pg_query.Token_XCONST:
			edits = append(edits, edit{s, e, g.strLit(g.text())})
		case pg_query.Token_ICONST, pg_query.Token_FCONST:
			edits = append(edits, edit{s, e, g.number()})
		case pg_query.Token_IDENT:
			edits = append(edits, edit{s, e, g.ident(strings.ToLower(x[s:e]))})
		default:
			edits = append(edits, edit{e, e, g.sp()})
		}
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	last := len(x) + 1
	for _, ed := range edits {
		if ed.end > last { // overlapping: keep the later edit only
			continue
		}
		x = x[:ed.start] + ed.text + x[ed.end:]
		last = ed.start
	}
	return x
}
