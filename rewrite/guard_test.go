package rewrite

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// deepShape builds texts of growing depth or length:
// open + unit×n + middle + close×n + suffix.
type deepShape struct {
	name                              string
	open, unit, middle, close, suffix string
	// flat shapes are long rather than deep: the token limit bounds them.
	flat bool
}

func (s deepShape) text(n int) string {
	return s.open + strings.Repeat(s.unit, n) + s.middle + strings.Repeat(s.close, n) + s.suffix
}

// deepShapes are the constructs that build deep trees (left-deep chains,
// nesting) or long flat lists, in pass-through and private queries. Before
// the guard, several of them crashed the process: the chains at about
// 4,500 units, nested subqueries at about 1,500 (8 MiB stack).
var deepShapes = []deepShape{
	{name: "plus", open: "SELECT 1", unit: "+1"},
	{name: "minus-plus", open: "SELECT 1", unit: "+-1"},
	{name: "cast", open: "SELECT 1", unit: "::int"},
	{name: "concat", open: "SELECT 'a'", unit: "||'a'"},
	{name: "is null", open: "SELECT 1", unit: " IS NULL"},
	{name: "not", open: "SELECT ", unit: "NOT ", middle: "true"},
	{name: "negation", open: "SELECT ", unit: "- ", middle: "1"},
	{name: "union", open: "SELECT 1, 2", unit: " UNION ALL SELECT 1, 2"},
	{name: "join", open: "SELECT 1 FROM public.products", unit: " JOIN public.products ON true"},
	{name: "parentheses", open: "SELECT ", unit: "(", middle: "1", close: ")"},
	{name: "subquery", open: "SELECT ", unit: "(SELECT ", middle: "1", close: ")"},
	{name: "function", open: "SELECT ", unit: "coalesce(1, ", middle: "1", close: ")"},
	{name: "case", open: "SELECT ", unit: "CASE WHEN true THEN ", middle: "1", close: " END"},
	{name: "array", open: "SELECT ", unit: "ARRAY[", middle: "1", close: "]"},
	{name: "any", open: "SELECT ", unit: "1 = ANY(ARRAY[", middle: "true", close: "])"},
	{name: "chain in parentheses", open: "SELECT ", unit: "(1+1+1+1+", middle: "1", close: ")"},
	{name: "derived table", open: "SELECT 1 FROM ", unit: "(SELECT 1 FROM ", middle: "public.products", close: ") s"},
	{name: "cte", open: "WITH ", unit: "c AS (WITH ", middle: "d AS (SELECT 1) SELECT 1", close: ") SELECT 1", suffix: " FROM c"},
	{name: "private plus", open: "SELECT count(*) FROM orders WHERE amount > 1", unit: "+1"},
	{name: "private parentheses", open: "SELECT count(*) FROM orders WHERE amount > ", unit: "(", middle: "1", close: ")"},
	{name: "private case", open: "SELECT count(*) FROM orders WHERE amount > ", unit: "CASE WHEN amount > 1 THEN ", middle: "1", close: " END"},
	{name: "private not", open: "SELECT count(*) FROM orders WHERE ", unit: "NOT ", middle: "amount > 1"},
	{name: "private sum", open: "SELECT sum(amount", unit: " + amount", suffix: ") FROM orders"},
	// Long and flat: bounded by the token count.
	{name: "in list", flat: true, open: "SELECT 1 IN (1", unit: ", 1", suffix: ")"},
	{name: "columns", flat: true, open: "SELECT 1", unit: ", 1"},
	{name: "flat case", flat: true, open: "SELECT CASE", unit: " WHEN 1 = 1 THEN 1", suffix: " END"},
	{name: "statements", flat: true, unit: "SELECT 1;"},
	{name: "private in list", flat: true, open: "SELECT count(*) FROM orders WHERE amount IN (1", unit: ", 1", suffix: ")"},
	{name: "private and", flat: true, open: "SELECT count(*) FROM orders WHERE amount > 1", unit: " AND amount > 1"},
	{name: "private or", flat: true, open: "SELECT count(*) FROM orders WHERE amount > 1", unit: " OR amount > 1"},
	{name: "private flat case", flat: true, open: "SELECT count(*) FROM orders WHERE amount > CASE", unit: " WHEN amount = 1 THEN 1", suffix: " END"},
	{name: "private columns", flat: true, open: "SELECT count(*)", unit: ", count(*)", suffix: " FROM orders"},
}

var unlimited = guardLimits{maxDepth: 1 << 30, maxTokens: 1 << 30, maxWork: 1 << 62}

// guardAnalyzer is an analyzer with the given guard limits (0: default).
func guardAnalyzer(t testing.TB, depth, tokens int) *Analyzer {
	t.Helper()
	a := newTestAnalyzer(t)
	if depth > 0 {
		a.guard.maxDepth = depth
	}
	if tokens > 0 {
		a.guard.maxTokens = tokens
		a.guard.maxWork = workPerToken * tokens
	}
	return a
}

// largestAccepted is the largest n whose text passes the guard (0: none),
// found without calling pg_query.
func largestAccepted(s deepShape, g guardLimits, limit int) int {
	lo, hi := 0, limit
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if guardText(s.text(mid), g) == nil {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func TestGuardScan(t *testing.T) {
	cases := []struct {
		sql           string
		tokens, depth int
	}{
		{"SELECT 1", 2, 0},
		{"SELECT 1+1+1", 6, 2},
		{"SELECT 1+-1", 5, 2},         // + and - are two operators
		{"SELECT 1 ||- 1", 4, 1},      // ||- is one (it holds |)
		{"SELECT a::int::text", 6, 2}, // casts
		{"SELECT (1)", 4, depthParen},
		{"SELECT f(1, 2+3)", 9, depthParen + 1},
		{"SELECT CASE WHEN a+b THEN 1 ELSE c+d END", 13, depthCase + 1},
		{"SELECT a FROM t JOIN u ON a = b JOIN v ON true", 14, 3},
		{"SELECT 1 UNION SELECT 2 UNION SELECT 3", 8, 2},
		{"SELECT a AND b AND c OR d", 8, 0}, // flat
		{"SELECT 1, 2+2, 3", 8, 1},
		// Nothing inside quotes or comments counts.
		{"SELECT '(((+++' -- (((+++\n", 2, 0},
		{"SELECT 'it''s (' /* ((( /* nested ((( */ +++ */", 2, 0},
		{`SELECT E'\'(((' , "a""((("`, 4, 0},
		{"SELECT $$((( $ $$, $tag$ $$ ((( $tag$, $1+$2", 8, 1},
		{"SELECT U&'d\\0061t' UESCAPE '!'", 4, 0},
		{"SELECT 1.5e-3+.5+0x1F", 6, 2},
		{"SELECT a$b+1", 4, 1},
		{"SELECT x[1:2]", 7, depthParen},
		{"SELECT 1; SELECT 1+1+1", 9, 2},
	}
	for _, c := range cases {
		got := scanComplexity(c.sql, unlimited)
		if got.tokens != c.tokens || got.depth != c.depth {
			t.Errorf("scanComplexity(%q) = %d tokens, depth %d; want %d, %d", c.sql, got.tokens, got.depth, c.tokens, c.depth)
		}
	}
}

// TestGuardGolden: every text of the golden corpus (real clients' SQL
// among it) passes the guard with a wide margin: the deepest estimate is
// 30 (psqlODBC's catalog query), against a limit of 500.
func TestGuardGolden(t *testing.T) {
	g := newGuardLimits(conf.Limits{})
	for _, gc := range goldenCases(t) {
		file := gc.Path
		c := scanComplexity(gc.SQL, unlimited)
		// The longest text (ok_client_jdbc_metadata_all.sql) is all of
		// pgJDBC's metadata queries in one string: 9,555 tokens.
		if c.depth > g.maxDepth/10 || c.tokens > g.maxTokens/3 || c.work > g.maxWork/3 {
			t.Errorf("%s: depth %d, %d tokens, work %d: within a tenth (depth) or a third of the limits %+v?", file, c.depth, c.tokens, c.work, g)
		}
	}
}

// TestGuardRefuses: past the limits every shape is refused with 54001
// (depth) or 54000 (tokens), as a RejectError, before pg_query runs.
func TestGuardRefuses(t *testing.T) {
	a := guardAnalyzer(t, 0, 20_000)
	for _, s := range deepShapes {
		t.Run(s.name, func(t *testing.T) {
			n := largestAccepted(s, a.guard, 1<<17)
			if n == 0 || n >= 1<<17-1 {
				t.Fatalf("largest accepted n = %d", n)
			}
			for _, m := range []int{n + 1, 2 * n, 25_000} {
				_, err := a.Analyze(s.text(m))
				var re *RejectError
				if !errors.As(err, &re) || (re.Code != pgerr.StatementTooComplex && re.Code != pgerr.ProgramLimitExceeded) {
					t.Errorf("Analyze(%s ×%d) = %v, want 54001 or 54000", s.name, m, err)
				}
			}
		})
	}
}

// TestGuardStackMargin: every shape at the largest size the guard lets
// through is analysed without crashing, in a child process whose stack is
// half what the guard assumes (stackPerUnit), i.e. still twice what was
// measured (at the default depth of 500: 2000 KiB; the analysis survived
// 1000 KiB and crashed at 800 KiB). A crash of the child means the margin
// is gone: the cost of a unit of depth grew (a new recursion in pg_query
// or the rewrite), and the default depth or stackPerUnit must follow.
func TestGuardStackMargin(t *testing.T) {
	if os.Getenv("DPPROXY_GUARD_CHILD") != "" {
		guardChild(t)
		return
	}
	if runtime.GOOS != "linux" || testing.Short() {
		// No ulimit -s to set: the shapes at the limit, on this
		// process's stack.
		guardChild(t)
		return
	}
	depth := conf.DefaultMaxQueryDepth
	kib := depth * stackPerUnit / 2 / 1024
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -s %d && exec "$0" -test.run='^TestGuardStackMargin$' -test.count=1`, kib), os.Args[0])
	cmd.Env = append(os.Environ(), "DPPROXY_GUARD_CHILD="+fmt.Sprint(depth))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with a %d KiB stack, depth limit %d: %v\n%s", kib, depth, err, tail(out, 2000))
	}
}

// guardChild analyses every shape at the largest size the guard lets
// through (a crash ends the process), on as many threads as the process
// may use: each cgo call runs on its thread's C stack. The token limit is
// lowered for flat shapes, to keep this fast: they only take time and
// memory, which grow with the tokens.
func guardChild(t *testing.T) {
	depth := conf.DefaultMaxQueryDepth
	fmt.Sscan(os.Getenv("DPPROXY_GUARD_CHILD"), &depth)
	deep, flat := guardAnalyzer(t, depth, 0), guardAnalyzer(t, depth, 2000)
	// The work bound stops chains before the depth limit; here the depth
	// alone must bind.
	deep.guard.maxWork = 1 << 40
	shapes := make(chan deepShape)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for s := range shapes {
				a := deep
				if s.flat {
					a = flat
				}
				n := largestAccepted(s, a.guard, 1<<17)
				_, err := a.Analyze(s.text(n))
				var re *RejectError
				if err != nil && !errors.As(err, &re) {
					t.Errorf("Analyze(%s ×%d) = %v, not a RejectError", s.name, n, err)
				}
			}
		})
	}
	for _, s := range deepShapes {
		shapes <- s
	}
	close(shapes)
	wg.Wait()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// FuzzDeepExpressions: deep and long texts, built from a shape and a
// repeat count, with a unit the fuzzer may replace, never crash the
// analysis; those over the guard's limits are refused with 54001 or 54000.
func FuzzDeepExpressions(f *testing.F) {
	for i := range deepShapes {
		f.Add(uint8(i), uint16(10), "")
		f.Add(uint8(i), uint16(900), "")
		f.Add(uint8(i), uint16(5000), "")
	}
	f.Add(uint8(0), uint16(3000), " OR NOT 1 <@ ")
	f.Add(uint8(9), uint16(2000), "((SELECT ")
	a := guardAnalyzer(f, 0, 20_000)
	f.Fuzz(func(t *testing.T, shape uint8, n uint16, unit string) {
		s := deepShapes[int(shape)%len(deepShapes)]
		if unit != "" {
			s.unit = unit
		}
		sql := s.text(int(n))
		if len(sql) > 1<<20 {
			return
		}
		over := scanComplexity(sql, a.guard)
		_, err := a.Analyze(sql)
		if err == nil {
			return
		}
		var re *RejectError
		if !errors.As(err, &re) || len(re.Code) != 5 {
			t.Fatalf("Analyze(%.200q…) = %v: not a RejectError with a SQLSTATE", sql, err)
		}
		if (over.depth > a.guard.maxDepth || over.tokens > a.guard.maxTokens || over.work > a.guard.maxWork) && re.Code != pgerr.StatementTooComplex && re.Code != pgerr.ProgramLimitExceeded {
			t.Fatalf("Analyze(%.200q…) over the guard's limits = %s %s, want 54001 or 54000", sql, re.Code, re.Message)
		}
	})
}
