package rewrite

import (
	"errors"
	"strings"
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/pganalyze/pg_query_go/v5/parser"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Options tunes an Analyzer.
type Options struct {
	// CatalogColumns holds the upstream's columns, in order, of the
	// catalog relations that pass-through queries read masked (keyed by
	// the names MaskedCatalogs returns; CatalogColumnsSQL reads them).
	// A relation missing here is assumed to have PostgreSQL 15's columns.
	CatalogColumns map[string][]Column
	// IntegerColumns names the private tables' integer columns
	// ("schema.table.column", lower case), read from the upstream at start.
	// Their values are clamped and summed natively (integer sums are
	// exact); every other argument is clamped as numeric, so a float
	// column's rounding cannot break the bound. Missing: all numeric.
	IntegerColumns map[string]bool
	// Relations describes the configured tables ("schema.table", lower
	// case) as the upstream has them: columns and unique keys, read at
	// start (RelationColumnsSQL, UniqueKeysSQL). A private table is joined
	// only with public tables on one of their unique keys (joins.go), so
	// without an entry for a public table every join with it is refused.
	Relations map[string]*Relation
	// ColumnTypes holds the type of every column of the configured tables
	// ("schema.table.column" -> type name as ColumnTypesSQL reads it),
	// read from the upstream at start: the totality table (totality.go)
	// decides by type what a private query may compute on a column. The
	// integer columns among them are IntegerColumns when that is nil.
	// Without it (tests of the rewrite's shape) type-dependent checks fall
	// back to what holds for the demo's types; a proxy always sets it.
	ColumnTypes map[string]string
	// Database is the upstream's current database (current_database(),
	// read at start). A three-part name naming it (clinic.public.visits,
	// as psqlODBC writes every table) is the two-part name, as in
	// PostgreSQL; so does a name of conf.Databases, the further names
	// clients may connect with for that same database (psqlODBC writes the
	// name the client connected with). Any other database is refused as
	// PostgreSQL refuses it. Empty, and no conf.Databases: every
	// three-part name is refused.
	Database string
	// NumericTypmods holds the declared precision and scale of the
	// numeric(p,s) columns of the configured tables ("schema.table.column"
	// -> {p, s}), read at start (NumericTypmodsSQL): such a column's
	// magnitude is bounded by its type, which makes arithmetic on it in a
	// condition total when it cannot overflow (condarith.go).
	NumericTypmods map[string][2]int
	// AutoBounds are the clamping bounds chosen at query time for columns
	// with bounds: auto ("schema.table.column" -> {lower, upper});
	// WithAutoBounds sets them (autobounds.go).
	AutoBounds map[string][2]float64
	// NotNull names the configured tables' columns declared NOT NULL
	// ("schema.table.column"), read at start (NotNullSQL): COUNT(*) of a
	// private table's rows then counts the same rows as COUNT(col), and an
	// AVG(col) may be derived from it (derive.go).
	NotNull map[string]bool
}

// Analyzer classifies and rewrites SQL against one configuration. It holds
// no mutable state and is safe for concurrent use by many goroutines.
type Analyzer struct {
	cfg   *conf.Config
	opts  Options
	masks map[string]*catalogMask // mask.go; read-only
	// typedTables are the tables ColumnTypes has columns of; read-only.
	typedTables map[string]bool
	// guard bounds a text before pg_query sees it (guard.go); read-only.
	guard guardLimits
}

// New returns an Analyzer for cfg, which must not be modified afterwards.
func New(cfg *conf.Config, opts Options) *Analyzer {
	typed := map[string]bool{}
	ints := map[string]bool{}
	for col, t := range opts.ColumnTypes {
		if i := strings.LastIndexByte(col, '.'); i > 0 {
			typed[col[:i]] = true
		}
		if t == "int2" || t == "int4" || t == "int8" {
			ints[col] = true
		}
	}
	if opts.IntegerColumns == nil && opts.ColumnTypes != nil {
		opts.IntegerColumns = ints
	}
	return &Analyzer{cfg: cfg, opts: opts, masks: buildMasks(opts.CatalogColumns), typedTables: typed, guard: newGuardLimits(cfg.Limits)}
}

// source is the text a statement was parsed from and where that text lies in
// the query string the client sent, to report positions in the latter.
type source struct {
	orig string // the whole query string
	text string // the text given to the parser
	base int    // byte offset of text in orig
}

// position turns a node location (a byte offset in text, -1 if unknown) into
// a 1-based character position in orig, or 0.
func (s source) position(loc int32) int32 {
	if loc < 0 || s.base+int(loc) > len(s.orig) {
		return 0
	}
	return int32(utf8.RuneCountInString(s.orig[:s.base+int(loc)])) + 1
}

// fix turns the node location held in a RejectError's Position into a
// position in the query string.
func (s source) fix(err error) error {
	var re *RejectError
	if errors.As(err, &re) {
		re.Position = s.position(re.Position)
	}
	return err
}

// stmtText is the original text of one parsed statement.
func (s source) stmtText(raw *pg_query.RawStmt) string {
	start := int(raw.StmtLocation)
	end := len(s.text)
	if raw.StmtLen > 0 && start+int(raw.StmtLen) <= end {
		end = start + int(raw.StmtLen)
	}
	if start < 0 || start > end {
		return strings.TrimSpace(s.text)
	}
	return strings.TrimSpace(s.text[start:end])
}

// Analyze parses sql and returns one Statement per statement in it. If any
// statement is refused, the whole string is refused: the error is a
// *RejectError. An empty string (or one of only comments and semicolons)
// yields a single KindEmpty statement.
func (a *Analyzer) Analyze(sql string) ([]*Statement, error) {
	// No input may crash the parser: too deep or too long, it never
	// reaches pg_query (guard.go).
	if err := guardText(sql, a.guard); err != nil {
		return nil, err
	}
	tree, perr := pg_query.Parse(sql)
	if perr == nil {
		src := source{orig: sql, text: sql}
		var out []*Statement
		for _, raw := range tree.Stmts {
			st, err := a.statement(src, raw, false)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
		if len(out) == 0 {
			return []*Statement{{Kind: KindEmpty}}, nil
		}
		return out, nil
	}
	// EXPLAIN DP is not PostgreSQL syntax, so a string that holds it fails
	// to parse as a whole: split it and parse the pieces one by one.
	pieces, ok := splitExplainDP(sql)
	if !ok {
		return nil, syntaxError(perr, source{orig: sql, text: sql})
	}
	var out []*Statement
	for _, p := range pieces {
		src := source{orig: sql, text: sql[p.body:p.end], base: p.body}
		tree, err := pg_query.Parse(src.text)
		if err != nil {
			return nil, syntaxError(err, src)
		}
		if !p.explain {
			for _, raw := range tree.Stmts {
				st, err := a.statement(src, raw, false)
				if err != nil {
					return nil, err
				}
				out = append(out, st)
			}
			continue
		}
		if len(tree.Stmts) != 1 {
			return nil, &RejectError{Code: pgerr.SyntaxError, Refusal: true, Message: "EXPLAIN DP needs a query", Position: source{orig: sql}.position(int32(p.start))}
		}
		st, err := a.statement(src, tree.Stmts[0], true)
		if err != nil {
			return nil, err
		}
		st.SQL = strings.TrimSpace(sql[p.start:p.end])
		out = append(out, st)
	}
	if len(out) == 0 {
		return []*Statement{{Kind: KindEmpty}}, nil
	}
	return out, nil
}

func syntaxError(err error, src source) error {
	re := &RejectError{Code: pgerr.SyntaxError, Refusal: true, Message: err.Error()}
	var pe *parser.Error
	if errors.As(err, &pe) && pe.Cursorpos > 0 {
		re.Position = int32(utf8.RuneCountInString(src.orig[:src.base])) + int32(pe.Cursorpos)
	}
	return re
}

// piece is one ;-separated part of a query string.
type piece struct {
	start, end int  // byte range in the query string, without the ;
	body       int  // where the statement starts (after EXPLAIN DP)
	explain    bool // the piece begins with EXPLAIN DP
}

// splitExplainDP splits sql at top-level semicolons with PostgreSQL's
// scanner (so quotes, dollar quotes and comments are respected) and reports
// whether any piece starts with the words EXPLAIN DP.
func splitExplainDP(sql string) ([]piece, bool) {
	sc, err := pg_query.Scan(sql)
	if err != nil {
		return nil, false
	}
	var pieces []piece
	found := false
	start := 0
	var words []*pg_query.ScanToken // first two non-comment tokens of the piece
	flush := func(end int) {
		p := piece{start: start, end: end, body: start}
		if len(words) == 2 && words[0].Token == pg_query.Token_EXPLAIN &&
			words[1].Token == pg_query.Token_IDENT && strings.EqualFold(sql[words[1].Start:words[1].End], "dp") {
			p.explain, p.body = true, int(words[1].End)
			found = true
		}
		pieces = append(pieces, p)
		words = nil
	}
	for _, t := range sc.Tokens {
		switch {
		case t.Token == pg_query.Token_ASCII_59:
			flush(int(t.Start))
			start = int(t.End)
		case t.Token == pg_query.Token_SQL_COMMENT || t.Token == pg_query.Token_C_COMMENT:
		case len(words) < 2:
			words = append(words, t)
		}
	}
	flush(len(sql))
	return pieces, found
}

// statement analyses one parsed statement; explainDP is set for the body of
// EXPLAIN DP.
func (a *Analyzer) statement(src source, raw *pg_query.RawStmt, explainDP bool) (*Statement, error) {
	if err := portable(raw.Stmt); err != nil {
		return nil, src.fix(err)
	}
	st, err := a.classify(src, raw)
	if err != nil {
		return nil, src.fix(err)
	}
	if explainDP {
		if st.Kind != KindPrivate {
			return nil, &RejectError{Code: pgerr.FeatureNotSupported, Refusal: true, Message: "EXPLAIN DP applies to queries over private tables",
				Position: src.position(raw.StmtLocation)}
		}
		st.Kind = KindExplainDP
		st.Tag = "EXPLAIN"
	}
	key, err := deparseStmt(raw.Stmt)
	if err != nil {
		return nil, src.fix(err)
	}
	fp, err := pg_query.Fingerprint(key)
	if err != nil {
		return nil, src.fix(reject(pgerr.FeatureNotSupported, -1, "statement cannot be fingerprinted: %v", err))
	}
	st.Fingerprint = fp
	st.Key = key
	if st.Kind == KindPassThrough && st.SQL == "" {
		// A session command (SET, SHOW, BEGIN, ...) is sent as the
		// proxy's deparse of what was checked, never as the client's
		// bytes: one text, one meaning.
		if err := faithful(raw.Stmt, key); err != nil {
			return nil, src.fix(err)
		}
		st.SQL = key
	}
	if explainDP {
		st.Key = "EXPLAIN DP " + key
	}
	return st, nil
}

// portable refuses syntax that pg_query (PostgreSQL 16's parser) accepts
// but an older upstream does not, where the deparse would carry it over
// as written: hexadecimal, octal, binary and underscore-separated numbers
// too large for an integer (kept as text in the tree), and a subquery in
// FROM without an alias. PostgreSQL 15 would refuse either with a syntax
// error; refusing them here gives the client a clear reason and keeps the
// differential test (e2e/differential_test.go) exact.
func portable(n *pg_query.Node) error {
	var err error
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg_query.Float:
			if strings.ContainsAny(x.Fval, "xXoObB_") {
				err = reject(pgerr.FeatureNotSupported, -1, "the number %s is PostgreSQL 16 syntax: write it in plain decimal", x.Fval)
			}
		case *pg_query.RangeSubselect:
			if x.Alias == nil {
				err = reject(pgerr.SyntaxError, -1, "subquery in FROM must have an alias").
					WithHint("For example, FROM (SELECT ...) [AS] foo.")
			}
		}
		return err == nil
	})
	return err
}

// classify dispatches on the statement type. It never modifies raw.
func (a *Analyzer) classify(src source, raw *pg_query.RawStmt) (*Statement, error) {
	text := src.stmtText(raw)
	st, err := a.classifyStmt(raw, text)
	if err != nil {
		return nil, err
	}
	if st.SQL == "" && st.Kind != KindPassThrough {
		st.SQL = text // for logs and EXPLAIN DP; never sent upstream
	}
	return st, nil
}

func (a *Analyzer) classifyStmt(raw *pg_query.RawStmt, text string) (*Statement, error) {
	switch n := raw.Stmt.Node.(type) {
	case *pg_query.Node_SelectStmt:
		return a.selectStmt(raw.Stmt, text)
	case *pg_query.Node_ExplainStmt:
		return a.explainStmt(n.ExplainStmt)
	case *pg_query.Node_VariableSetStmt:
		if err := a.checkTimeoutSet(n.VariableSetStmt); err != nil { // timeout.go
			return nil, err
		}
		return setStmt(n.VariableSetStmt, text)
	case *pg_query.Node_VariableShowStmt:
		return showStmt(n.VariableShowStmt, text)
	case *pg_query.Node_TransactionStmt:
		return transactionStmt(n.TransactionStmt, text)
	case *pg_query.Node_DiscardStmt:
		return &Statement{Kind: KindPassThrough, Tag: "DISCARD", ChangesSettings: true,
			DropsPrepared: n.DiscardStmt.Target == pg_query.DiscardMode_DISCARD_ALL}, nil
	case *pg_query.Node_DeallocateStmt:
		return &Statement{Kind: KindDeallocate, SQL: text, Tag: "DEALLOCATE", Deallocate: n.DeallocateStmt.Name}, nil
	case *pg_query.Node_CopyStmt:
		return a.copyStmt(n.CopyStmt, text) // copy.go
	}
	return nil, reject(pgerr.InsufficientPrivilege, raw.StmtLocation, "writes and DDL are refused: %s is not a query", stmtName(raw.Stmt))
}

// stmtName names a statement type for messages ("InsertStmt" -> "INSERT").
func stmtName(n *pg_query.Node) string {
	switch n.Node.(type) {
	case *pg_query.Node_InsertStmt:
		return "INSERT"
	case *pg_query.Node_UpdateStmt:
		return "UPDATE"
	case *pg_query.Node_DeleteStmt:
		return "DELETE"
	case *pg_query.Node_MergeStmt:
		return "MERGE"
	case *pg_query.Node_CopyStmt:
		return "COPY"
	case *pg_query.Node_CreateStmt:
		return "CREATE TABLE"
	case *pg_query.Node_CreateTableAsStmt:
		return "CREATE TABLE AS"
	case *pg_query.Node_PrepareStmt:
		return "PREPARE"
	case *pg_query.Node_ExecuteStmt:
		return "EXECUTE"
	case *pg_query.Node_DoStmt:
		return "DO"
	case *pg_query.Node_CallStmt:
		return "CALL"
	case *pg_query.Node_LockStmt:
		return "LOCK"
	case *pg_query.Node_TruncateStmt:
		return "TRUNCATE"
	}
	m := n.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().Get(0))
	if fd == nil {
		return "an empty statement"
	}
	// CreateFunctionStmt -> CREATE FUNCTION
	name := strings.TrimSuffix(string(fd.Message().Name()), "Stmt")
	var words []string
	start := 0
	for i := 1; i <= len(name); i++ {
		if i == len(name) || (name[i] >= 'A' && name[i] <= 'Z') {
			words = append(words, strings.ToUpper(name[start:i]))
			start = i
		}
	}
	return strings.Join(words, " ")
}
