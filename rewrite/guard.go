package rewrite

import (
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The guard before the parser. pg_query parses in C, on the C stack of the
// thread that calls it, and turns the tree into protobuf, deparses it and
// fingerprints it by recursion without any depth check. A text whose tree
// is deep enough overflows that stack, and a stack overflow in C kills the
// whole process, every session with it (a chain "SELECT 1+1+...+1" of
// about 4,500 terms, 9 KB, did so under the default 8 MiB stack; see
// docs/threat-model.md, "Limits", for the measurements). The grammar's own
// stack (10,000 entries) stops deeply nested parentheses, but not the
// left-recursive chains (operators, casts, IS NULL, joins, set operations)
// that build a deep tree while the grammar's stack stays flat.
//
// So every text is scanned first, in Go, without pg_query: the scan counts
// its tokens and estimates the depth of its tree from above, and a text
// over limits.max_query_depth or limits.max_query_tokens is refused before
// pg_query sees it. The scan is a small lexer of PostgreSQL's lexical rules
// (comments, the four kinds of quotes, dollar quotes, operators): a lexer
// that got a quote wrong could only make a text look deeper than it is,
// never shallower, since inside a quote nothing counts.
//
// The estimate of the depth at a point of the text is the sum, over the
// groups enclosing it, of
//
//   - a weight for opening the group: a parenthesis or bracket (a function
//     call, a subquery, an array) weighs depthParen, CASE ... END weighs
//     depthCase;
//   - the operators met in the group since its last separator (a comma, a
//     semicolon, AND, OR, WHEN, THEN, ELSE): each binary or prefix operator,
//     cast (::), NOT, IS, IN, LIKE, BETWEEN, COLLATE, AT ... may add a
//     level, since PostgreSQL's grammar builds chains of them as left-deep
//     trees (AND and OR chains are flat lists);
//   - the joins and set operations (UNION, INTERSECT, EXCEPT) met in the
//     group, which also build left-deep trees and are not undone by a comma.
//
// Measured, one unit of this estimate costs at most about 1.9 KiB of C stack
// in the analysis (its deparse is the deepest user); stackPerUnit keeps a
// margin of four over that.
//
// Time and memory are bounded too. The analysis takes about 5-10 µs and
// 1 KiB per token of a flat text (a long IN list), so the tokens are
// counted; and the analysis of an expression over a private column does
// work at every level for everything below it, quadratic in the depth (a
// sum(a + a + ... + a) of 1,000 terms took 4-9 s), so the scan also sums
// the estimated depth of every token, the size of every subtree added up,
// and bounds that sum by workPerToken times the token limit.

const (
	depthParen = 3
	depthCase  = 2
	// stackPerUnit is the C stack one unit of estimated depth may take,
	// with a margin: the effective depth limit is at most the stack size
	// over this.
	stackPerUnit = 8 << 10
	// defaultStack is assumed when the stack limit is unlimited or
	// unknown (glibc then gives threads 8 MiB).
	defaultStack = 8 << 20
	// workPerToken bounds the sum of the depths of all tokens, as a
	// multiple of limits.max_query_tokens: a flat list in a function call
	// weighs about 7 per token.
	workPerToken = 5
)

// guardLimits are the guard's bounds.
type guardLimits struct {
	maxDepth  int
	maxTokens int
	maxWork   int
}

// newGuardLimits returns the guard's bounds for l, the depth lowered if
// the C stack of this process is too small for it.
func newGuardLimits(l conf.Limits) guardLimits {
	l = l.WithDefaults()
	return guardLimits{maxDepth: min(l.MaxQueryDepth, StackDepthLimit()), maxTokens: l.MaxQueryTokens, maxWork: workPerToken * l.MaxQueryTokens}
}

// StackDepthLimit is the deepest estimate the guard lets through under this
// process's stack limit (RLIMIT_STACK, which sizes the threads cgo runs
// on): the stack over stackPerUnit.
func StackDepthLimit() int {
	s := stackLimit()
	if s == 0 {
		s = defaultStack
	}
	return int(min(s/stackPerUnit, 1<<20))
}

// MaxQueryDepth is the depth limit the analyzer applies:
// limits.max_query_depth, or less when the stack is small (StackDepthLimit).
func (a *Analyzer) MaxQueryDepth() int { return a.guard.maxDepth }

// guardText refuses a text too deep or too long in tokens for the parser
// (see the top of this file). It never calls pg_query.
func guardText(sql string, g guardLimits) error {
	st := scanComplexity(sql, g)
	switch {
	case st.tokens > g.maxTokens:
		return reject(pgerr.ProgramLimitExceeded, -1, "query has more than %d tokens (limits.max_query_tokens)", g.maxTokens).
			WithHint("Split the query, or pass long lists of values as an array parameter.")
	case st.depth > g.maxDepth:
		return reject(pgerr.StatementTooComplex, -1, "query is nested too deeply: estimated depth over %d (limits.max_query_depth)", g.maxDepth).
			WithHint("Long chains of operators (a + b + c ...), joins or UNIONs and deep nesting count; split the query or use a list, IN or an array.")
	case st.work > g.maxWork:
		return reject(pgerr.StatementTooComplex, -1, "query is too complex: its nested expressions would take too long to analyse (limits.max_query_tokens × %d, summed over the depth of every token)", workPerToken).
			WithHint("Split the query, or shorten its chains of operators.")
	}
	return nil
}

// complexity is what the scan found; it stops early once a limit is
// passed, so the numbers are exact only below the limits.
type complexity struct {
	tokens int
	depth  int // the largest estimate
	work   int // the sum of the estimates at every token
}

// group is one level of nesting in the scan.
type group struct {
	base       int  // estimate where the group opened, its weight included
	chain      int  // operators since the last separator
	structural int  // joins and set operations in the group
	kind       byte // '(', '[' or 'c' (CASE)
}

// scanComplexity scans sql as PostgreSQL's lexer would and returns its
// token count, estimated depth and work, stopping once one passes its
// limit in g.
func scanComplexity(sql string, g guardLimits) complexity {
	var c complexity
	stack := []group{{kind: 0}}
	est := func() int {
		g := &stack[len(stack)-1]
		return g.base + g.chain + g.structural
	}
	note := func() {
		if d := est(); d > c.depth {
			c.depth = d
		}
	}
	push := func(kind byte, weight int) {
		stack = append(stack, group{base: est() + weight, kind: kind})
		note()
	}
	pop := func(kind byte) {
		// Pop to the group the closer matches; a stray closer (the text
		// will not parse) pops nothing.
		for i := len(stack) - 1; i > 0; i-- {
			if stack[i].kind == kind {
				stack = stack[:i]
				return
			}
		}
	}
	op := func() {
		stack[len(stack)-1].chain++
		note()
	}
	separate := func() { stack[len(stack)-1].chain = 0 }

	n := len(sql)
	for i := 0; i < n; {
		if c.tokens > g.maxTokens || c.depth > g.maxDepth || c.work > g.maxWork {
			return c
		}
		ch := sql[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v':
			i++
			continue
		case ch == '-' && i+1 < n && sql[i+1] == '-':
			for i < n && sql[i] != '\n' && sql[i] != '\r' {
				i++
			}
			continue
		case ch == '/' && i+1 < n && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
			continue
		}
		c.tokens++
		c.work += est() + 1
		switch {
		case ch == '\'':
			i = skipQuoted(sql, i, '\'', false)
		case ch == '"':
			i = skipQuoted(sql, i, '"', false)
		case ch == '$':
			if j, ok := dollarQuote(sql, i); ok {
				i = j
				break
			}
			// A parameter ($1) or a stray $.
			i++
			for i < n && isDigit(sql[i]) {
				i++
			}
		case isIdentStart(ch):
			j := i + 1
			for j < n && isIdentCont(sql[j]) {
				j++
			}
			word := sql[i:j]
			i = j
			if i < n && sql[i] == '\'' && len(word) == 1 {
				// E'...' (backslash escapes), B'', X'', N'': one token.
				i = skipQuoted(sql, i, '\'', word[0] == 'e' || word[0] == 'E')
				break
			}
			if i+1 < n && sql[i] == '&' && (sql[i+1] == '\'' || sql[i+1] == '"') && len(word) == 1 && (word[0] == 'u' || word[0] == 'U') {
				i = skipQuoted(sql, i+1, sql[i+1], false) // U&'...', U&"..."
				break
			}
			switch keyword(word) {
			case kwOperator:
				op()
			case kwSeparator:
				separate()
			case kwStructural:
				stack[len(stack)-1].structural++
				note()
			case kwCase:
				push('c', depthCase)
			case kwEnd:
				if stack[len(stack)-1].kind == 'c' {
					stack = stack[:len(stack)-1]
				}
			}
		case isDigit(ch) || ch == '.' && i+1 < n && isDigit(sql[i+1]):
			// A number, with its fraction, exponent, base prefix or
			// underscores; trailing junk is PostgreSQL's error to report.
			i++
			for i < n && (isIdentCont(sql[i]) || sql[i] == '.') {
				if (sql[i] == 'e' || sql[i] == 'E') && i+1 < n && (sql[i+1] == '+' || sql[i+1] == '-') {
					i++
				}
				i++
			}
		case ch == '(' || ch == '[':
			push(ch, depthParen)
			i++
		case ch == ')':
			pop('(')
			i++
		case ch == ']':
			pop('[')
			i++
		case ch == ',' || ch == ';':
			separate()
			if ch == ';' && len(stack) == 1 {
				stack[0] = group{}
			}
			i++
		case ch == ':':
			if i+1 < n && sql[i+1] == ':' {
				op() // a cast
				i += 2
			} else if i+1 < n && sql[i+1] == '=' {
				i += 2 // := in a named argument
			} else {
				i++ // an array slice
			}
		case isOpChar(ch):
			i += operatorLen(sql[i:])
			op()
		default:
			i++ // anything else is one token of its own (or an error)
		}
	}
	return c
}

// skipBlockComment returns the index after the (nested) comment at i.
func skipBlockComment(sql string, i int) int {
	depth := 0
	for i < len(sql) {
		switch {
		case sql[i] == '/' && i+1 < len(sql) && sql[i+1] == '*':
			depth++
			i += 2
		case sql[i] == '*' && i+1 < len(sql) && sql[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return i
}

// skipQuoted returns the index after the quoted text opening at i with q; a
// doubled q stands for itself, and with backslashes a backslash escapes
// the next byte (E'...').
func skipQuoted(sql string, i int, q byte, backslashes bool) int {
	i++
	for i < len(sql) {
		switch {
		case backslashes && sql[i] == '\\':
			i += 2
		case sql[i] == q:
			if i+1 < len(sql) && sql[i+1] == q {
				i += 2
				continue
			}
			return i + 1
		default:
			i++
		}
	}
	return len(sql)
}

// dollarQuote returns the index after the dollar-quoted string opening at i
// ($$...$$ or $tag$...$tag$), or false if none opens there.
func dollarQuote(sql string, i int) (int, bool) {
	j := i + 1
	if j < len(sql) && isIdentStart(sql[j]) {
		for j < len(sql) && isIdentStart(sql[j]) || j < len(sql) && isDigit(sql[j]) {
			j++
		}
	}
	if j >= len(sql) || sql[j] != '$' {
		return 0, false
	}
	delim := sql[i : j+1]
	for k := j + 1; k+len(delim) <= len(sql); k++ {
		if sql[k] == '$' && sql[k:k+len(delim)] == delim {
			return k + len(delim), true
		}
	}
	return len(sql), true
}

// operatorLen is the length of the operator at the start of s, as
// PostgreSQL's lexer cuts it: the longest run of operator characters, cut
// before a comment starts, and, unless it holds one of ~!@#%^&|`?, without
// trailing + and - (so that 1+-2 is two operators).
func operatorLen(s string) int {
	n := 0
	for n < len(s) && isOpChar(s[n]) {
		if n > 0 && (s[n-1] == '-' && s[n] == '-' || s[n-1] == '/' && s[n] == '*') {
			n--
			break
		}
		n++
	}
	if n == 0 {
		return 1
	}
	special := false
	for k := 0; k < n; k++ {
		switch s[k] {
		case '~', '!', '@', '#', '%', '^', '&', '|', '`', '?':
			special = true
		}
	}
	if !special {
		for n > 1 && (s[n-1] == '+' || s[n-1] == '-') {
			n--
		}
	}
	return n
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdentCont(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

func isOpChar(c byte) bool {
	switch c {
	case '+', '-', '*', '/', '<', '>', '=', '~', '!', '@', '#', '%', '^', '&', '|', '`', '?':
		return true
	}
	return false
}

// Classes of keywords for the depth estimate.
const (
	kwNone = iota
	kwOperator
	kwSeparator
	kwStructural
	kwCase
	kwEnd
)

// keyword classifies an identifier, ignoring case, without allocating.
func keyword(w string) int {
	if len(w) < 2 || len(w) > 9 {
		return kwNone
	}
	var b [9]byte
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	switch string(b[:len(w)]) {
	case "not", "is", "in", "like", "ilike", "similar", "between", "collate", "at", "isnull", "notnull", "overlaps", "escape", "operator", "any", "all", "some":
		return kwOperator
	case "and", "or", "when", "then", "else":
		return kwSeparator
	case "join", "union", "intersect", "except":
		return kwStructural
	case "case":
		return kwCase
	case "end":
		return kwEnd
	}
	return kwNone
}
