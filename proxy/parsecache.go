package proxy

import (
	"fmt"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/dpproxy/dpproxy/rewrite"
)

// Parse cache. Clients send the same few query texts over and over (a BI
// dashboard, pgbench, an ORM's prepared statements re-parsed per
// connection), and analysing one costs a pg_query parse, validation, the
// rewrite and a deparse/re-parse check: tens of microseconds that would
// dominate a pass-through query's overhead. The analysis depends only on
// the text and the configuration, which is fixed for a Server's life, so
// its result is shared by every session.
//
// Only successful analyses are kept: refusals are rare, and their errors
// carry positions the caller may annotate. Statements in the cache are
// shared between sessions and must be treated as read-only, as they
// already are (nothing in the proxy writes to a Statement or its Plan).

const (
	// parseCacheSize is the number of query texts kept.
	parseCacheSize = 2048
	// parseCacheMaxText is the longest text cached, so that the cache's
	// memory stays bounded (at most about parseCacheSize × this, plus the
	// parse results) whatever clients send.
	parseCacheMaxText = 4096
)

func newShapeCache() *lru.Cache[string, *rewrite.Statement] {
	c, err := lru.New[string, *rewrite.Statement](parseCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return c
}

func newParseCache() *lru.Cache[string, []*rewrite.Statement] {
	c, err := lru.New[string, []*rewrite.Statement](parseCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return c
}

// analyze is Analyzer.Analyze through the parse cache: first by exact
// text, then by shape.
func (s *Server) analyze(sql string) ([]*rewrite.Statement, error) {
	if len(sql) > parseCacheMaxText || s.parsed == nil {
		return s.analyzer.Analyze(sql)
	}
	if stmts, ok := s.parsed.Get(sql); ok {
		return stmts, nil
	}
	shape, shaped := queryShape(sql)
	if shaped && s.shapes != nil {
		if st, ok := s.shapes.Get(shape); ok {
			// Same tokens as an analysed statement but for the values of
			// its constants, which no check of a Verbatim statement reads:
			// it is allowed too, and sent as written.
			c := *st
			c.SQL, c.Key = sql, sql
			stmts := []*rewrite.Statement{&c}
			s.parsed.Add(sql, stmts)
			return stmts, nil
		}
	}
	stmts, err := s.analyzer.Analyze(sql)
	if err != nil {
		return nil, err
	}
	s.parsed.Add(sql, stmts)
	if shaped && s.shapes != nil && len(stmts) == 1 && stmts[0].Verbatim {
		s.shapes.Add(shape, stmts[0])
	}
	return stmts, nil
}

// Shape cache. Tools that fill parameters in on the client (psycopg2,
// pgbench -M simple, many BI tools) send the same statement with new
// constants every time, so the text cache above never hits. A pass-through
// SELECT marked Verbatim was allowed without reading any constant's value
// and is sent upstream as written, so every text with the same tokens but
// other constants gets the same answer from the analyzer: the shape cache
// keys statements by their token stream with constants' values blanked.

// queryShape is sql's token stream with the values of constants left out.
// It reports false when sql does not scan.
func queryShape(sql string) (string, bool) {
	res, err := pg_query.Scan(sql)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(sql))
	for _, t := range res.Tokens {
		switch t.Token {
		case pg_query.Token_SCONST, pg_query.Token_USCONST, pg_query.Token_ICONST, pg_query.Token_FCONST,
			pg_query.Token_BCONST, pg_query.Token_XCONST:
			fmt.Fprintf(&b, "\x00#%d\x00", t.Token)
		default:
			if t.Start < 0 || t.End > int32(len(sql)) || t.Start > t.End {
				return "", false
			}
			b.WriteString(sql[t.Start:t.End])
			b.WriteByte(0)
		}
	}
	return b.String(), true
}
