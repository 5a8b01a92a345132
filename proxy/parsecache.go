package proxy

import (
	"strings"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"

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
			// it is allowed too, and sent as written. The text is not kept
			// in the text cache: clients that fill in constants send each
			// text once, and would flood it.
			c := *st
			c.SQL, c.Key = sql, sql
			return []*rewrite.Statement{&c}, nil
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
// keys statements by their text with constants' values blanked.

// queryShape is sql with the values of its plain string and integer
// constants blanked, or false when sql holds anything the shape cache does
// not handle. It is deliberately narrow, so that its idea of where a
// constant starts and ends is PostgreSQL's: it gives up on comments,
// dollar signs (dollar quoting, parameters), backslashes, prefixed strings
// (E'x', B'1', X'1F', U&'x', N'x'), quoted identifiers containing quotes,
// integers next to letters, digits' separators or dots (floats, 1e5,
// 0x1F, 1_000) and integers of ten digits or more (PostgreSQL lexes those
// as numeric). standard_conforming_strings is always on upstream (the
// rewrite refuses to change it), so a doubled quote is the only escape
// in a string. Texts holding a NUL are not handled.
// Two texts with the same shape therefore differ only in the values of
// tokens of the same kinds.
func queryShape(sql string) (string, bool) {
	if !utf8.ValidString(sql) || strings.IndexByte(sql, 0) >= 0 {
		// The analyzer refuses both: invalid UTF-8, and a NUL, which ends
		// the text for PostgreSQL's C parser. A NUL would also collide
		// with the blanked constants written below.
		return "", false
	}
	var b strings.Builder
	b.Grow(len(sql))
	isIdent := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '$' || c == '\\':
			return "", false
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-', c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			return "", false
		case c == '"':
			// A quoted identifier, kept as written.
			j := strings.IndexByte(sql[i+1:], '"')
			if j < 0 {
				return "", false
			}
			b.WriteString(sql[i : i+j+2])
			i += j + 2
			if i < len(sql) && sql[i] == '"' {
				return "", false // "" inside an identifier
			}
		case c == '\'':
			if i > 0 && (isIdent(sql[i-1]) || sql[i-1] == '&') {
				return "", false // E'', B'', X'', N'', U&'' or an identifier touching a string
			}
			j := i + 1
			for {
				k := strings.IndexByte(sql[j:], '\'')
				if k < 0 {
					return "", false
				}
				j += k + 1
				if j < len(sql) && sql[j] == '\'' {
					j++ // '' inside the string
					continue
				}
				break
			}
			b.WriteString("\x00S\x00")
			i = j
		case c >= '0' && c <= '9' && (i == 0 || !isIdent(sql[i-1]) && sql[i-1] != '.'):
			j := i
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			if j-i >= 10 || j < len(sql) && (isIdent(sql[j]) || sql[j] == '.') {
				return "", false
			}
			b.WriteString("\x00I\x00")
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), true
}
