package proxy

import (
	"strconv"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/dpproxy/dpproxy/rewrite"
)

// The comparison-constant cache. Clients that fill parameters in on their
// side (psycopg2, pgbench -M simple, many BI tools) send the same
// statement with a new integer in its WHERE every time, so the text cache
// (parsecache.go) never hits, and a full analysis (pg_query parse,
// checks, deparse and re-parse) costs hundreds of µs of CPU per query,
// ten times what relaying the query costs.
//
// What is sent upstream stays the proxy's deparse (docs/threat-model.md,
// "One text, one meaning"): this cache does not reuse the client's text,
// it reuses the proxy's deparse of an earlier text with the same tokens,
// with the new integers put where the deparse printed the old ones. That
// is the deparse of the new text, for texts narrow enough that nothing
// else can differ (integerShape):
//
//   - a SELECT, with only ASCII letters, digits, white space and punctuation, and no
//     quote of any kind, dollar sign, backslash or comment: so no string,
//     quoted identifier, parameter or escape whose reading a constant could
//     change (the UESCAPE case that ended the old shape cache of verbatim
//     texts);
//   - the constants that may vary are unsigned integers of at most nine
//     digits (always an int4 constant to PostgreSQL and to pg_query, never
//     numeric or int8), standing alone (not touching a letter, digit,
//     underscore or dot), directly after a comparison operator (=, <>,
//     !=, <, >, <=, >=; not := or =>, which pass a named argument): the
//     operand of a comparison, whose value no check
//     of a pass-through statement reads (the checks that read constants,
//     such as the bound of generate_series, read function arguments and
//     LIMIT, which stay part of the shape as written);
//   - the analysis is a single pass-through statement with nothing to do
//     for the session (no settings changed, no prepared statements
//     dropped, no COPY).
//
// When a shape is first seen, its text is analysed as always, and so is a
// probe: the same text with a distinct nine-digit sentinel in place of
// each varying integer. Each sentinel must occur exactly once in the
// probe's deparse (and once in its key), which gives the template; the
// template filled with the first text's integers must reproduce that
// text's own deparse and key byte for byte, and both analyses must agree
// on everything else (kind, fingerprint), or the shape is not cached.
// TestShapeCacheMatchesAnalysis compares the cache's answers with full
// analyses over many shapes and values.

// shapeCacheMaxSlots bounds the varying integers of one shape.
const shapeCacheMaxSlots = 64

// shapeEntry is a cached analysis: the statement of the first text, and
// the templates of its deparse and key.
type shapeEntry struct {
	st       *rewrite.Statement
	sql, key template
}

// template is text with slots: pieces[0], value of slots[0], pieces[1],
// ...; len(pieces) == len(slots)+1.
type template struct {
	pieces []string
	slots  []int
}

func (t template) fill(vals []string) string {
	var b strings.Builder
	b.Grow(t.len(vals))
	t.write(&b, vals)
	return b.String()
}

// len is the length of t filled with vals.
func (t template) len(vals []string) int {
	n := 0
	for _, p := range t.pieces {
		n += len(p)
	}
	for _, s := range t.slots {
		n += len(vals[s])
	}
	return n
}

// write writes t filled with vals to b.
func (t template) write(b *strings.Builder, vals []string) {
	b.WriteString(t.pieces[0])
	for i, s := range t.slots {
		b.WriteString(vals[s])
		b.WriteString(t.pieces[i+1])
	}
}

func newShapeCache() *lru.Cache[string, *shapeEntry] {
	c, err := lru.New[string, *shapeEntry](parseCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return c
}

// statements is the cached analysis for a text of the entry's shape with
// the integers vals (as integerShape returns them): the statement and its
// list in one allocation, its deparse and key in another.
func (e *shapeEntry) statements(vals []string) []*rewrite.Statement {
	c := &struct {
		st   rewrite.Statement
		list [1]*rewrite.Statement
	}{st: *e.st}
	n := e.sql.len(vals)
	var b strings.Builder
	b.Grow(n + e.key.len(vals))
	e.sql.write(&b, vals)
	e.key.write(&b, vals)
	both := b.String()
	c.st.SQL, c.st.Key = both[:n], both[n:]
	c.list[0] = &c.st
	return c.list[:]
}

// shapeable reports whether an analysis may be cached by shape.
func shapeable(stmts []*rewrite.Statement) bool {
	if len(stmts) != 1 {
		return false
	}
	st := stmts[0]
	return st.Kind == rewrite.KindPassThrough && st.Copy == nil && st.Plan == nil && st.Setting == nil &&
		!st.DropsPrepared && !st.ChangesSettings && st.Deallocate == ""
}

// learnShape returns the cache entry for shape, whose first text's
// integers are vals and analysis stmts, or nil if it is not to be cached
// (see the top of this file).
func (s *Server) learnShape(shape string, vals []string, stmts []*rewrite.Statement) *shapeEntry {
	if !shapeable(stmts) {
		return nil
	}
	st := stmts[0]
	sentinels := make([]string, len(vals))
	for i := range vals {
		sentinels[i] = strconv.Itoa(987600001 + i)
	}
	probe, err := s.analyzer.Analyze(fillShape(shape, sentinels))
	if err != nil || !shapeable(probe) {
		return nil
	}
	pst := probe[0]
	if pst.Kind != st.Kind || pst.Fingerprint != st.Fingerprint || pst.Tag != st.Tag {
		return nil
	}
	sqlT, ok1 := makeTemplate(pst.SQL, sentinels)
	keyT, ok2 := makeTemplate(pst.Key, sentinels)
	norm := normalizeInts(vals)
	if !ok1 || !ok2 || sqlT.fill(norm) != st.SQL || keyT.fill(norm) != st.Key {
		return nil
	}
	return &shapeEntry{st: st, sql: sqlT, key: keyT}
}

// makeTemplate cuts text at each sentinel, which must occur exactly once
// as a whole number (not next to another digit).
func makeTemplate(text string, sentinels []string) (template, bool) {
	type at struct{ pos, slot int }
	var found []at
	for i, sv := range sentinels {
		n := 0
		for off := 0; ; {
			j := strings.Index(text[off:], sv)
			if j < 0 {
				break
			}
			p := off + j
			end := p + len(sv)
			if (p == 0 || !isDigit(text[p-1])) && (end == len(text) || !isDigit(text[end])) {
				n++
				found = append(found, at{p, i})
			}
			off = end
		}
		if n != 1 {
			return template{}, false
		}
	}
	// Order the cuts by position (insertion sort: few slots).
	for i := 1; i < len(found); i++ {
		for j := i; j > 0 && found[j].pos < found[j-1].pos; j-- {
			found[j], found[j-1] = found[j-1], found[j]
		}
	}
	t := template{}
	prev := 0
	for _, f := range found {
		t.pieces = append(t.pieces, text[prev:f.pos])
		t.slots = append(t.slots, f.slot)
		prev = f.pos + len(sentinels[f.slot])
	}
	t.pieces = append(t.pieces, text[prev:])
	return t, true
}

// normalizeInts prints each integer as the deparse does (no leading
// zeros).
func normalizeInts(vals []string) []string {
	normal := true
	for _, v := range vals {
		normal = normal && v != "" && len(v) <= 9 && (v[0] != '0' || len(v) == 1)
		for i := 0; normal && i < len(v); i++ {
			normal = isDigit(v[i])
		}
	}
	if normal {
		return vals // as the deparse prints them already
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil // integerShape gives at most nine digits
		}
		out[i] = strconv.Itoa(n)
	}
	return out
}

// fillShape puts vals into the slots (NUL bytes) of shape.
func fillShape(shape string, vals []string) string {
	var b strings.Builder
	i := 0
	for _, part := range strings.Split(shape, "\x00") {
		if i > 0 {
			b.WriteString(vals[i-1])
		}
		b.WriteString(part)
		i++
	}
	return b.String()
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)
}

// isOpByte reports whether c can be part of an operator in PostgreSQL's
// lexer.
func isOpByte(c byte) bool { return strings.IndexByte("+-*/<>=~!@#%^&|`?", c) >= 0 }

// integerShape returns sql with each varying integer (see the top of this
// file) replaced by a NUL byte, and those integers as written; false when
// sql is outside what the cache handles or has no varying integer.
func integerShape(sql string) (string, []string, bool) {
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c >= 0x80, c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r', c == 0x7f:
			return "", nil, false // non-ASCII, NUL and control bytes
		case c == '\'', c == '"', c == '$', c == '\\', c == '`':
			return "", nil, false
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-', c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			return "", nil, false
		}
	}
	if w := strings.TrimLeft(sql, " \t\n\r("); len(w) < 7 || !strings.EqualFold(w[:6], "select") || isIdentByte(w[6]) {
		return "", nil, false // a SELECT only: no SET, whose values are checked
	}
	var b strings.Builder
	b.Grow(len(sql))
	var vals []string
	last := 0
	for i := 0; i < len(sql); {
		if !isDigit(sql[i]) || i > 0 && (isIdentByte(sql[i-1]) || sql[i-1] == '.') {
			i++
			continue
		}
		j := i
		for j < len(sql) && isDigit(sql[j]) {
			j++
		}
		if j-i > 9 || j < len(sql) && (isIdentByte(sql[j]) || sql[j] == '.') || !afterComparison(sql, i) {
			i = j
			continue
		}
		b.WriteString(sql[last:i])
		b.WriteByte(0)
		vals = append(vals, sql[i:j])
		last, i = j, j
	}
	if len(vals) == 0 || len(vals) > shapeCacheMaxSlots {
		return "", nil, false
	}
	b.WriteString(sql[last:])
	return b.String(), vals, true
}

// afterComparison reports whether the token before position i (white
// space skipped) is a comparison operator, the whole operator token.
func afterComparison(sql string, i int) bool {
	p := i - 1
	for p >= 0 && (sql[p] == ' ' || sql[p] == '\t' || sql[p] == '\n' || sql[p] == '\r') {
		p--
	}
	end := p + 1
	for p >= 0 && isOpByte(sql[p]) {
		p--
	}
	if p >= 0 && sql[p] == ':' {
		return false // := is PostgreSQL's COLON_EQUALS, a named argument (f(x := 5)), not a comparison
	}
	switch sql[p+1 : end] {
	case "=", "<>", "!=", "<", ">", "<=", ">=":
		return true
	}
	return false
}
