package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Analysis: what the proxy reads from the upstream at start for the
// analyzer (AnalyzerOptions), and the analysis of a query text, cached
// (parsecache.go) or, for long texts, bounded in concurrency (analyze).

// Analyze returns the server's analysis of sql: the statements and plans
// its sessions would run, from the configuration and the upstream's
// catalog as read at start. It reads and runs nothing. The semantic
// differential test (e2e/semantic_test.go) reads a query's plan through
// it to know which released values the design lets differ from
// PostgreSQL's. The statements are shared with the sessions and must not
// be modified. Safe for concurrent use.
func (s *Server) Analyze(sql string) ([]*rewrite.Statement, error) {
	return s.analyze(sql)
}

// AnalyzerOptions reads from the upstream what the analyzer needs to know
// of it, as the proxy does at start; tests that analyse as the proxy does
// (e2e/differential_test.go) use it too.
func AnalyzerOptions(ctx context.Context, q querier, cfg *conf.Config) (rewrite.Options, error) {
	// Pass-through queries read pg_class and the statistics views through
	// masks built from the upstream's own column lists (rewrite/mask.go).
	cols, err := catalogColumns(ctx, q)
	if err != nil {
		return rewrite.Options{}, fmt.Errorf("proxy: reading the upstream's catalog columns: %w", err)
	}
	// Every configured table's column types, for the totality table
	// (rewrite/totality.go); the integer ones are clamped natively.
	types, err := columnTypes(ctx, q, cfg) // consts.go
	if err != nil {
		return rewrite.Options{}, fmt.Errorf("proxy: reading the tables' column types: %w", err)
	}
	rels, err := relations(ctx, q, cfg) // relations.go
	if err != nil {
		return rewrite.Options{}, fmt.Errorf("proxy: reading the tables' columns and unique keys: %w", err)
	}
	// Three-part names naming the current database are accepted
	// (psqlODBC writes every table so).
	db, err := currentDatabase(ctx, q)
	if err != nil {
		return rewrite.Options{}, fmt.Errorf("proxy: reading the upstream's database name: %w", err)
	}
	typmods, err := numericTypmods(ctx, q, cfg)
	if err != nil {
		return rewrite.Options{}, fmt.Errorf("proxy: reading the tables' numeric precisions: %w", err)
	}
	notNull, err := notNullColumns(ctx, q, cfg) // notnull.go
	if err != nil {
		return rewrite.Options{}, fmt.Errorf("proxy: reading the tables' NOT NULL columns: %w", err)
	}
	return rewrite.Options{CatalogColumns: cols, ColumnTypes: types, Relations: rels, Database: db, NumericTypmods: typmods, NotNull: notNull}, nil
}

// numericTypmods reads the declared precision and scale of the configured
// tables' numeric(p,s) columns (rewrite.NumericTypmodsSQL).
func numericTypmods(ctx context.Context, q querier, cfg *conf.Config) (map[string][2]int, error) {
	var names []string
	for _, t := range cfg.Tables {
		names = append(names, t.QualifiedName())
	}
	rows, err := q.Query(ctx, rewrite.NumericTypmodsSQL, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][2]int{}
	for rows.Next() {
		var col string
		var prec, scale int32
		if err := rows.Scan(&col, &prec, &scale); err != nil {
			return nil, err
		}
		out[col] = [2]int{int(prec), int(scale)}
	}
	return out, rows.Err()
}

// catalogColumns reads the columns of the catalog relations the rewrite
// masks, in order, as this upstream's PostgreSQL version has them.
func catalogColumns(ctx context.Context, pool querier) (map[string][]rewrite.Column, error) {
	rows, err := pool.Query(ctx, rewrite.CatalogColumnsSQL, rewrite.MaskedCatalogs())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string][]rewrite.Column{}
	for rows.Next() {
		var rel string
		var c rewrite.Column
		if err := rows.Scan(&rel, &c.Name, &c.Type); err != nil {
			return nil, err
		}
		cols[rel] = append(cols[rel], c)
	}
	return cols, rows.Err()
}

// analyze analyses sql. Texts longer than the parse cache keeps are
// analysed every time, and their analysis takes time and memory in
// proportion to their tokens (up to limits.max_query_tokens): at most
// GOMAXPROCS of them are analysed at once, so that many sessions sending
// long texts cannot take more memory than that many analyses. The wait
// ends with the session's statement (a cancel, the client gone) or after
// limits.statement_timeout.
func (ss *session) analyze(ctx context.Context, sql string) ([]*rewrite.Statement, error) {
	if len(sql) <= parseCacheMaxText {
		return ss.srv.analyze(sql)
	}
	sem := ss.srv.lim.analysis
	select {
	case sem <- struct{}{}:
	default:
		wait := time.NewTimer(ss.srv.lim.cfg.StatementTimeout)
		defer wait.Stop()
		select {
		case sem <- struct{}{}:
		case <-wait.C:
			return nil, fail(pgerr.QueryCanceled, "canceling statement: the proxy was busy analysing other long queries for %v (limits.statement_timeout)", ss.srv.lim.cfg.StatementTimeout)
		case <-ctx.Done():
			return nil, canceledWaiting(ctx, "the analysis of other long queries")
		}
	}
	defer func() { <-sem }()
	return ss.srv.analyze(sql)
}

// refusedText is what the log may fingerprint of a refused text: nothing
// when the guard before the parser refused it (rewrite/guard.go), since
// fingerprinting parses the text with pg_query, which the guard keeps such
// texts from.
func refusedText(sql string, err error) string {
	var re *rewrite.RejectError
	if errors.As(err, &re) && (re.Code == pgerr.StatementTooComplex || re.Code == pgerr.ProgramLimitExceeded) {
		return ""
	}
	return sql
}

// querier is a *pgx.Conn or a *pgxpool.Pool: what the start-up and
// ledger-reach reads need.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// currentDatabase reads the upstream's current database name.
func currentDatabase(ctx context.Context, q querier) (string, error) {
	rows, err := q.Query(ctx, "SELECT pg_catalog.current_database()")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var db string
	for rows.Next() {
		if err := rows.Scan(&db); err != nil {
			return "", err
		}
	}
	return db, rows.Err()
}
