package e2e

// Semantic differential test (issue 12, item 6: "rewrites mean what the
// SQL means"). Every query of a corpus of accepted private queries is run
//
//   - through a proxy whose contribution bounds never bind (max_rows_per_unit
//     and max_groups_per_unit at least the data's maxima, clamping bounds
//     wider than the data, all computed from the data) and whose noise and
//     partition selection are switched off by the test-only hook
//     proxy.Options.TestNoise with noisetest.Exact, and
//   - directly on PostgreSQL, as written;
//
// and the answers must agree: same columns and types, same rows, same keys,
// same values up to float rounding. Where they may differ by design is
// listed in semanticExpect: a released SUM, AVG or VARIANCE is never NULL
// (an empty aggregate is released as 0, the middle of the bounds, ...), and
// keys with public values are released for every public value, with zeros
// where the database has no row. Any other difference is a bug in the
// rewrite. docs/threat-model.md, "Semantic differential test", says what it
// covers and what not.

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/noise/noisetest"
	"github.com/dpproxy/dpproxy/proxy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// semanticMinCorpus is the fewest accepted queries the test compares.
const semanticMinCorpus = 300

// semanticConfig is the configuration of the exact proxy (testconf.Semantic)
// with the data's maxima (semanticLimits): rows is the bound on one unit's
// rows and groups, the others the bounded columns' ranges.
func semanticConfig(rows, amLo, amHi, qLo, qHi, ageLo, ageHi int64) string {
	bounds := func(lo, hi int64) string { return fmt.Sprintf("{lower: %d, upper: %d}", lo, hi) }
	return testconf.Get(testconf.Semantic).
		Set(fmt.Sprint(rows), "tables", "public.orders", "max_groups_per_unit").
		Set(fmt.Sprint(rows), "tables", "public.orders", "max_rows_per_unit").
		Set(bounds(amLo, amHi), "tables", "public.orders", "columns", "amount").
		Set(bounds(qLo, qHi), "tables", "public.orders", "columns", "quantity").
		Set(bounds(ageLo, ageHi), "tables", "public.customers", "columns", "age").String()
}

// semanticLimits reads the data's maxima: the most rows one customer has
// (a bound on the rows and on the groups of one unit in any query whose
// joins match each order with at most one public row) and the ranges of
// the bounded columns, widened by one on each side.
func semanticLimits(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var rows, amLo, amHi, qLo, qHi, ageLo, ageHi int64
	err := conn.QueryRow(ctx, `SELECT (SELECT max(n) FROM (SELECT count(*) AS n FROM public.orders GROUP BY customer_id) AS x),
	  floor(min(amount))::int8 - 1, ceil(max(amount))::int8 + 1, min(quantity) - 1, max(quantity) + 1,
	  (SELECT min(age) - 1 FROM public.customers), (SELECT max(age) + 1 FROM public.customers)
	  FROM public.orders`).Scan(&rows, &amLo, &amHi, &qLo, &qHi, &ageLo, &ageHi)
	if err != nil {
		t.Fatalf("reading the data's maxima: %v", err)
	}
	var custRows int64
	if err := conn.QueryRow(ctx, `SELECT max(n) FROM (SELECT count(*) AS n FROM public.customers GROUP BY customer_id) AS x`).Scan(&custRows); err != nil || custRows != 1 {
		t.Fatalf("customers must have one row per unit (max %d): %v", custRows, err)
	}
	return semanticConfig(rows, amLo, amHi, qLo, qHi, ageLo, ageHi)
}

// TestSemantic is the semantic differential test: see the top of the file.
func TestSemantic(t *testing.T) {
	start := time.Now()
	truth := semanticDirect(t, pgx.QueryExecModeSimpleProtocol)
	const pw = "semantic-secret"
	cfg := configFor(t, semanticLimits(t, truth), map[string]string{"E2E_PW_SEMANTIC": pw})
	srv, addr := startExactProxy(t, cfg)

	corpus, refused := semanticCorpus(srv)
	if len(corpus) < semanticMinCorpus {
		t.Fatalf("only %d accepted queries in the corpus (want %d; %d refused)", len(corpus), semanticMinCorpus, len(refused))
	}
	for _, r := range refused {
		t.Logf("not in the corpus: %s", r)
	}

	// Eight workers, each with a connection to the proxy and one to the
	// database: a private answer waits for the end of its time slot, so
	// the run is bound by waiting, not work.
	const workers = 8
	jobs := make(chan semanticQuery)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for range workers {
		// Both protocols: the simple one (text), and pgx's named
		// prepared statements (Parse, Describe, Bind with binary results).
		px := connectAt(t, addr, "semantic", pw, pgx.QueryExecModeSimpleProtocol)
		pxExt := connectAt(t, addr, "semantic", pw, pgx.QueryExecModeCacheStatement)
		db := semanticDirect(t, pgx.QueryExecModeSimpleProtocol)
		dbExt := semanticDirect(t, pgx.QueryExecModeCacheStatement)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range jobs {
				msg := semanticCheck(px, db, q, false)
				if msg == "" {
					msg = semanticCheck(pxExt, dbExt, q, true)
				}
				if msg != "" {
					mu.Lock()
					failures = append(failures, msg)
					mu.Unlock()
				}
			}
		}()
	}
	for _, q := range corpus {
		jobs <- q
	}
	close(jobs)
	wg.Wait()
	sort.Strings(failures)
	for i, f := range failures {
		if i == 40 && !testing.Verbose() {
			t.Errorf("... and %d more differences", len(failures)-i)
			break
		}
		t.Error(f)
	}
	t.Logf("%d queries compared (%d refused, not compared) in %v; %d differences",
		len(corpus), len(refused), time.Since(start).Round(time.Millisecond), len(failures))
}

// startExactProxy runs a proxy on cfg whose releases add no noise and
// select every partition (noisetest.Exact through the test-only hook).
func startExactProxy(t *testing.T, cfg *conf.Config) (*proxy.Server, string) {
	t.Helper()
	srv, err := proxy.New(ctx, cfg, proxy.Options{TestNoise: noisetest.Exact})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return srv, ln.Addr().String()
}

// semanticDirect connects to the test database (as its owner) in mode.
func semanticDirect(t *testing.T, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cc, err := pgx.ParseConfig(env.upstream)
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = mode
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// semanticQuery is one accepted query and what the comparison needs to
// know about it.
type semanticQuery struct {
	sql     string
	plan    *rewrite.Plan
	ordered bool // the query has ORDER BY: row order must agree
	limited bool // LIMIT or OFFSET
	// aggs are the plan's aggregates of the output columns that are
	// bare aggregates (nil for keys and expressions); overAggs marks the
	// other expressions over aggregates (post-processing).
	aggs     []*rewrite.Aggregate
	overAggs []bool
}

// semanticResult is an answer as text.
type semanticResult struct {
	names []string
	oids  []uint32
	rows  [][]*string
}

// semanticRun runs sql on conn. With the simple protocol the values are
// PostgreSQL's text; with the extended one (decoded is set) they come in
// the formats pgx asks for and are decoded and printed by the same code
// on both sides (semanticText).
func semanticRun(conn *pgx.Conn, sql string, decoded bool) (*semanticResult, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	res := &semanticResult{}
	for _, f := range rows.FieldDescriptions() {
		res.names = append(res.names, f.Name)
		res.oids = append(res.oids, f.DataTypeOID)
	}
	for rows.Next() {
		var row []*string
		if n := len(rows.RawValues()); n != len(res.names) {
			// pgx would index past its field descriptions
			return nil, fmt.Errorf("a row of %d values after a row description of %d columns %v", n, len(res.names), res.names)
		}
		if decoded {
			vals, err := rows.Values()
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				row = append(row, semanticText(v))
			}
			res.rows = append(res.rows, row)
			continue
		}
		for _, v := range rows.RawValues() {
			if v == nil {
				row = append(row, nil)
				continue
			}
			s := string(v)
			row = append(row, &s)
		}
		res.rows = append(res.rows, row)
	}
	return res, rows.Err()
}

// semanticText prints a value pgx decoded: numbers so that they parse as
// floats, times in UTC.
func semanticText(v any) *string {
	var s string
	switch x := v.(type) {
	case nil:
		return nil
	case pgtype.Numeric:
		if !x.Valid {
			return nil
		}
		dv, err := x.Value()
		if err != nil {
			s = fmt.Sprint(x)
		} else {
			s = fmt.Sprint(dv)
		}
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		s = strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		s = x.UTC().Format(time.RFC3339Nano)
	default:
		s = fmt.Sprint(x)
	}
	return &s
}

// semanticCheck runs q both ways and returns "" or the difference.
func semanticCheck(px, db *pgx.Conn, q semanticQuery, extended bool) string {
	proto := "simple protocol"
	if extended {
		proto = "extended protocol"
	}
	want, err := semanticRun(db, q.sql, extended)
	if err != nil {
		return fmt.Sprintf("%s (%s)\n\tPostgreSQL: %v (the corpus must hold queries PostgreSQL answers)", q.sql, proto, err)
	}
	got, err := semanticRun(px, q.sql, extended)
	if err != nil {
		return fmt.Sprintf("%s (%s)\n\tproxy: %v\n\tPostgreSQL: %s", q.sql, proto, err, want.String())
	}
	if msg := semanticCompare(q, want, got); msg != "" {
		return fmt.Sprintf("%s (%s)\n\t%s\n\tPostgreSQL: %s\n\tproxy:      %s\n\trewrite:\n%s", q.sql, proto, msg, want.String(), got.String(), q.plan.SQL)
	}
	return ""
}

func (r *semanticResult) String() string {
	var rows []string
	for i, row := range r.rows {
		if i == 12 {
			rows = append(rows, fmt.Sprintf("... (%d rows)", len(r.rows)))
			break
		}
		rows = append(rows, semanticRowString(row))
	}
	return strings.Join(r.names, ",") + ": " + strings.Join(rows, " ")
}

func semanticRowString(row []*string) string {
	var cells []string
	for _, c := range row {
		if c == nil {
			cells = append(cells, "NULL")
		} else {
			cells = append(cells, *c)
		}
	}
	return "(" + strings.Join(cells, ",") + ")"
}

// semanticCompare compares PostgreSQL's answer want with the proxy's got.
func semanticCompare(q semanticQuery, want, got *semanticResult) string {
	if strings.Join(want.names, ",") != strings.Join(got.names, ",") {
		return fmt.Sprintf("column names %v, want %v", got.names, want.names)
	}
	if fmt.Sprint(want.oids) != fmt.Sprint(got.oids) {
		return fmt.Sprintf("column types %v, want %v", got.oids, want.oids)
	}
	exp, filled, extra := semanticExpect(q, want)
	if q.limited {
		extra = 0 // the public combinations must not change what LIMIT keeps
	}
	if filled && q.limited {
		return "corpus: LIMIT/OFFSET over keys with public values the database lacks cannot be compared; change the query"
	}
	if len(got.rows) < len(exp) || len(got.rows) > len(exp)+extra {
		return fmt.Sprintf("%d rows, want %d (+ up to %d public combinations)", len(got.rows), len(exp), extra)
	}
	if q.ordered && !filled && len(got.rows) == len(exp) {
		for i := range exp {
			if msg := exp[i].match(got.rows[i]); msg != "" {
				return fmt.Sprintf("row %d: %s", i, msg)
			}
		}
		return ""
	}
	// Unordered: match each expected row with a distinct proxy row.
	used := make([]bool, len(got.rows))
	for i, e := range exp {
		found := false
		for j, g := range got.rows {
			if !used[j] && e.match(g) == "" {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return fmt.Sprintf("no row of the proxy matches expected row %d %s; nearest %s", i, e, e.nearest(got.rows))
		}
	}
	return ""
}

// semanticCell is what one released value may be: the database's text,
// or (where a release differs by design) a set of numbers.
type semanticCell struct {
	text *string   // compared as text, or as numbers when both parse
	nums []float64 // when set: any of these numbers
	tol  float64   // relative tolerance of numeric comparisons
	any  bool      // any value (an expression over an empty aggregate)
	// scale, when set, compares variances with an absolute tolerance of
	// 1e-9·scale (the squared half-width of the bounds, the largest
	// variance) besides the relative one: the release computes them as
	// E[x²] − mean² in float64, which cancels digits near 0. square says
	// the values are standard deviations: their squares are compared.
	scale  float64
	square bool
}

type semanticRow []semanticCell

func (r semanticRow) String() string {
	var cells []string
	for _, c := range r {
		switch {
		case c.nums != nil:
			cells = append(cells, fmt.Sprint(c.nums))
		case c.text == nil:
			cells = append(cells, "NULL")
		default:
			cells = append(cells, *c.text)
		}
	}
	return "(" + strings.Join(cells, ",") + ")"
}

// nearest is the row of rows that differs from r in the fewest cells.
func (r semanticRow) nearest(rows [][]*string) string {
	best, bestDiff := "none", len(r)+1
	for _, g := range rows {
		diff := 0
		for i, c := range r {
			if c.match(g[i]) != "" {
				diff++
			}
		}
		if diff < bestDiff {
			best, bestDiff = semanticRowString(g), diff
		}
	}
	return best
}

func (r semanticRow) match(got []*string) string {
	for i, c := range r {
		if msg := c.match(got[i]); msg != "" {
			return fmt.Sprintf("column %d: %s (row %s, want %s)", i, msg, semanticRowString(got), r)
		}
	}
	return ""
}

func (c semanticCell) match(got *string) string {
	if c.any {
		return ""
	}
	if c.nums != nil {
		if got == nil {
			return "NULL, want a number"
		}
		g, err := strconv.ParseFloat(*got, 64)
		if err != nil {
			return fmt.Sprintf("%q is not a number", *got)
		}
		for _, n := range c.nums {
			if c.close(g, n) {
				return ""
			}
		}
		return fmt.Sprintf("%s, want one of %v", *got, c.nums)
	}
	switch {
	case c.text == nil && got == nil:
		return ""
	case c.text == nil || got == nil:
		return "NULL mismatch"
	case *c.text == *got:
		return ""
	}
	w, err1 := strconv.ParseFloat(*c.text, 64)
	g, err2 := strconv.ParseFloat(*got, 64)
	if err1 == nil && err2 == nil && c.close(g, w) {
		return ""
	}
	return fmt.Sprintf("%s, want %s", *got, *c.text)
}

func (c semanticCell) close(got, want float64) bool {
	if c.scale > 0 {
		if c.square {
			got, want = got*got, want*want
		}
		return math.Abs(got-want) <= 1e-9*c.scale+c.tol*math.Max(math.Abs(got), math.Abs(want))
	}
	return closeTo(got, want, c.tol)
}

func closeTo(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// semanticExpect turns PostgreSQL's answer into what the exact proxy must
// release, applying the two differences the design makes (docs/design.md):
//
//   - a released aggregate is never NULL: an empty SUM is 0, an empty AVG
//     the middle of its bounds (mid + noisy(S − mid·C)/max(noisy C, 1)),
//     an empty VARIANCE w²/2 and a single-value sample VARIANCE 0
//     (dp/variance.go, w the half-width of the bounds);
//     (and an expression over such an aggregate, which post-processing
//     computes from that number, is not NULL either);
//   - with every key public, every combination of public values is
//     released (an empty group with the values of an empty aggregate)
//     and no other value.
//
// filled reports that the second rule changed the set of rows; extra is
// how many more rows than rows the proxy may release unchecked, where the
// second rule's rows cannot be predicted.
func semanticExpect(q semanticQuery, want *semanticResult) (rows []semanticRow, filled bool, extra int) {
	plan := q.plan
	simple := plan.Post == nil && len(plan.Outputs) == len(want.names)
	keyOut := map[int]int{} // group key -> output column
	if simple {
		for i, o := range plan.Outputs {
			if o.GroupKey >= 0 {
				keyOut[o.GroupKey] = i
			}
		}
	}
	cellFor := func(i int, v *string) semanticCell {
		c := semanticCell{text: v, tol: 1e-9}
		if v == nil && i < len(q.overAggs) && q.overAggs[i] {
			// NULL from an empty SUM or AVG inside the expression: the
			// release has a number there, and so has the expression.
			c.any = true
			return c
		}
		if i >= len(q.aggs) || q.aggs[i] == nil {
			return c
		}
		a := q.aggs[i]
		if a.Kind == rewrite.AggVariance {
			// E[x²] − mean² loses digits: compare variances to a
			// fraction of the largest one, w²
			w := (a.Upper - a.Lower) / 2
			c.scale, c.square = math.Max(1, w*w), a.Stddev
		}
		if v != nil {
			return c
		}
		mid, w := (a.Lower+a.Upper)/2, (a.Upper-a.Lower)/2
		switch a.Kind {
		case rewrite.AggSum:
			c.nums = []float64{0}
		case rewrite.AggAvg:
			c.nums = []float64{mid}
		case rewrite.AggVariance:
			c.nums = []float64{0, w * w / 2}
			if a.Stddev {
				c.nums = []float64{0, math.Sqrt(w * w / 2)}
			}
		}
		return c
	}
	allPublic := len(plan.GroupKeys) > 0
	for _, k := range plan.GroupKeys {
		allPublic = allPublic && k.PublicValues != nil
	}
	seen := map[string]bool{}
	for _, r := range want.rows {
		if simple && allPublic {
			// keys outside the public values are not released
			public := true
			for k, i := range keyOut {
				if r[i] == nil || !contains(plan.GroupKeys[k].PublicValues, *r[i]) {
					public = false
				}
			}
			if !public {
				filled = true
				continue
			}
			seen[semanticKeyString(keyOut, r)] = true
		}
		row := make(semanticRow, len(r))
		for i, v := range r {
			row[i] = cellFor(i, v)
		}
		rows = append(rows, row)
	}
	if !allPublic {
		return rows, filled, 0
	}
	combos := [][]string{nil}
	for _, k := range plan.GroupKeys {
		var next [][]string
		for _, c := range combos {
			for _, v := range k.PublicValues {
				next = append(next, append(append([]string(nil), c...), v))
			}
		}
		combos = next
	}
	if !simple || len(keyOut) != len(plan.GroupKeys) {
		// The proxy's extra rows cannot be predicted here (post-processing
		// computes them, or the keys are not all output): accept as many
		// as the combinations the database lacks, unchecked.
		return rows, false, max(0, len(combos)-len(rows))
	}
	for _, c := range combos {
		r := make([]*string, len(want.names))
		for k, i := range keyOut {
			v := c[k]
			r[i] = &v
		}
		if seen[semanticKeyString(keyOut, r)] {
			continue
		}
		filled = true
		row := make(semanticRow, len(r))
		for i := range r {
			o := plan.Outputs[i]
			switch {
			case o.GroupKey >= 0:
				row[i] = semanticCell{text: r[i]}
			case o.Agg.Kind == rewrite.AggSum || o.Agg.Kind == rewrite.AggAvg || o.Agg.Kind == rewrite.AggVariance:
				row[i] = cellFor(i, nil)
			default: // counts
				row[i] = semanticCell{nums: []float64{0}}
			}
		}
		rows = append(rows, row)
	}
	return rows, filled, 0
}

func semanticKeyString(keyOut map[int]int, r []*string) string {
	ks := make([]int, 0, len(keyOut))
	for k := range keyOut {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var b strings.Builder
	for _, k := range ks {
		if v := r[keyOut[k]]; v != nil {
			b.WriteString("V" + *v)
		}
		b.WriteString("\x00")
	}
	return b.String()
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}
