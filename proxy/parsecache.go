package proxy

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/dpproxy/dpproxy/rewrite"
)

// Parse cache. Clients send the same few query texts over and over (a BI
// dashboard, an ORM's prepared statements re-parsed per connection), and
// analysing one costs a pg_query parse, validation, the rewrite and a
// deparse/re-parse check: tens of microseconds that would dominate a
// pass-through query's overhead. The analysis depends only on the exact
// bytes of the text and on the configuration, which is fixed for a
// Server's life: every session reads text as UTF-8 (client_encoding is
// pinned, session.go) and no setting a client may change alters how
// PostgreSQL parses (rewrite/allowlists.go, settableSettings). So its result is shared by
// every session, keyed by the exact text.
//
// There is deliberately no cache by "shape" (text with constants
// blanked) of the client's texts: two texts that differ only in a constant
// can still mean different things to PostgreSQL (U&"..." UESCAPE '!'
// makes the escape character a constant that changes an identifier), and
// an analysis that is reused for another text would send PostgreSQL
// something nobody checked (docs/threat-model.md, "One text, one
// meaning"). The one exception, shapecache.go, is much narrower: SELECTs
// without quotes, comments or dollar signs whose only varying constants
// are integer operands of comparisons, answered with the proxy's own
// deparse of the earlier text with the new integers in place.
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

func newParseCache() *lru.Cache[string, []*rewrite.Statement] {
	c, err := lru.New[string, []*rewrite.Statement](parseCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return c
}

// analyze is Analyzer.Analyze through the parse cache, keyed by the exact
// text.
func (s *Server) analyze(sql string) ([]*rewrite.Statement, error) {
	if len(sql) > parseCacheMaxText || s.parsed == nil {
		return s.analyzer.Analyze(sql)
	}
	if stmts, ok := s.parsed.Get(sql); ok {
		return stmts, nil
	}
	shape, vals, shaped := integerShape(sql) // shapecache.go
	shaped = shaped && s.shapes != nil
	if shaped {
		if e, ok := s.shapes.Get(shape); ok {
			// Not kept in the text cache: clients that fill in
			// constants send each text once, and would flood it.
			return e.statements(normalizeInts(vals)), nil
		}
	}
	stmts, err := s.analyzer.Analyze(sql)
	if err != nil {
		return nil, err
	}
	s.parsed.Add(sql, stmts)
	if shaped {
		if e := s.learnShape(shape, vals, stmts); e != nil {
			s.shapes.Add(shape, e)
		}
	}
	return stmts, nil
}
