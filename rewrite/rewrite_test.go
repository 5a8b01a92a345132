package rewrite

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/golden"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

var update = flag.Bool("update", false, "rewrite testdata/**/*.golden from the current output")

// testConfig is the configuration of the unit tests and goldens:
// testconf.Rewrite in internal/testconf/dpproxy.yaml.
var testConfig = testconf.YAML(testconf.Rewrite)

func newTestAnalyzer(t testing.TB) *Analyzer {
	t.Helper()
	return newTestAnalyzerEdited(t, nil)
}

// newTestAnalyzerEdited is newTestAnalyzer with the parsed configuration
// changed by edit first.
func newTestAnalyzerEdited(t testing.TB, edit func(*conf.Config)) *Analyzer {
	t.Helper()
	cfg, err := conf.Parse("test.yaml", []byte(testConfig), func(string) string { return "" })
	if err != nil {
		t.Fatalf("conf.Parse: %v", err)
	}
	if edit != nil {
		edit(cfg)
	}
	// The demo's amount is numeric(10,2); discount is left unconstrained.
	return New(cfg, Options{Relations: testRelations, ColumnTypes: testColumnTypes, Database: "shop",
		NumericTypmods: map[string][2]int{"public.orders.amount": {10, 2}},
		// amount is NOT NULL, as in the demo and e2e schema (internal/demo/schema.sql).
		NotNull: map[string]bool{"public.orders.amount": true}})
}

var kindNames = map[Kind]string{
	KindPrivate: "private", KindPassThrough: "pass-through", KindSetDP: "set-dp",
	KindShowDP: "show-dp", KindExplainDP: "explain-dp", KindEmpty: "empty", KindDeallocate: "deallocate",
}

var aggNames = map[AggKind]string{
	AggCount: "count", AggCountDistinctUnit: "count-distinct-unit", AggSum: "sum", AggAvg: "avg",
	AggCountDistinct: "count-distinct", AggVariance: "variance", AggQuantile: "quantile",
}

// render prints the result of Analyze for a golden file.
func render(stmts []*Statement, err error) string {
	var b strings.Builder
	if err != nil {
		var re *RejectError
		if !errors.As(err, &re) {
			return "NOT A RejectError: " + err.Error() + "\n"
		}
		fmt.Fprintf(&b, "ERROR %s: %s\n", re.Code, re.Message)
		if re.Detail != "" {
			fmt.Fprintf(&b, "DETAIL: %s\n", re.Detail)
		}
		if re.Hint != "" {
			fmt.Fprintf(&b, "HINT: %s\n", re.Hint)
		}
		if re.Position != 0 {
			fmt.Fprintf(&b, "POSITION: %d\n", re.Position)
		}
		return b.String()
	}
	for i, st := range stmts {
		fmt.Fprintf(&b, "-- statement %d: %s", i+1, kindNames[st.Kind])
		if st.Tag != "" {
			fmt.Fprintf(&b, " (tag %s)", st.Tag)
		}
		b.WriteString("\n")
		if c := st.Copy; c != nil {
			fmt.Fprintf(&b, "copy: csv=%v header=%v delimiter=%q null=%q quote=%q escape=%q\n", c.CSV, c.Header, c.Delimiter, c.Null, c.Quote, c.Escape)
		}
		if st.Setting != nil {
			fmt.Fprintf(&b, "setting: name=%q value=%q reset=%v\n", st.Setting.Name, st.Setting.Value, st.Setting.Reset)
		}
		if st.Kind != KindEmpty {
			fmt.Fprintf(&b, "key: %s\n", st.Key)
		}
		switch {
		case st.Plan != nil:
			renderPlan(&b, st.Plan)
		case st.Kind == KindPassThrough:
			fmt.Fprintf(&b, "sql: %s\n", st.SQL)
		}
	}
	return b.String()
}

func renderPlan(b *strings.Builder, p *Plan) {
	if len(p.Branches) > 0 {
		fmt.Fprintf(b, "-- union all of %d branches: params=%d limit=%d offset=%d\n", len(p.Branches), p.NumParams, p.Limit, p.Offset)
		fmt.Fprintf(b, "-- describe: %s\n", p.DescribeSQL)
		for i, o := range p.Outputs {
			fmt.Fprintf(b, "-- output %d: %s\n", i, o.Name)
		}
		if p.Post != nil {
			fmt.Fprintf(b, "-- post: SELECT %s ORDER BY %q\n", p.Post.Targets, p.Post.OrderBy)
		}
		for i, br := range p.Branches {
			fmt.Fprintf(b, "-- branch %d:\n", i+1)
			renderPlan(b, br)
		}
		return
	}
	fmt.Fprintf(b, "%s\n", p.SQL)
	fmt.Fprintf(b, "-- plan: table=%s params=%d max_groups=%d max_rows=%d partition_selection=%v units_col=%d limit=%d offset=%d\n",
		p.Table.QualifiedName(), p.NumParams, p.MaxGroups, p.MaxRows, p.PartitionSelection, p.UnitsCol, p.Limit, p.Offset)
	fmt.Fprintf(b, "-- describe: %s\n", p.DescribeSQL)
	for i, k := range p.GroupKeys {
		fmt.Fprintf(b, "-- key %d: column=%s public=%q col=%d\n", i, k.Column, k.PublicValues, k.ResultCol)
		if k.PublicTable != "" {
			fmt.Fprintf(b, "--   public keys of %s: %s\n", k.PublicTable, k.KeysSQL)
		}
	}
	for i, a := range p.Aggregates {
		fmt.Fprintf(b, "-- agg %d: %s func=%s column=%q bounds=[%v,%v] sum_col=%d count_col=%d",
			i, aggNames[a.Kind], a.Func, a.Column, a.Lower, a.Upper, a.SumCol, a.CountCol)
		switch a.Kind {
		case AggVariance:
			fmt.Fprintf(b, " sumsq_col=%d sample=%v stddev=%v", a.SumSqCol, a.Sample, a.Stddev)
		case AggQuantile:
			fmt.Fprintf(b, " hist_col=%d quantile=%v discrete=%v buckets=%d", a.HistCol, a.Quantile, a.Discrete, a.Buckets)
		case AggCountDistinct:
			fmt.Fprintf(b, " max_distinct=%d", a.MaxDistinct)
		}
		if a.FromSum != nil {
			fmt.Fprintf(b, " from=%s/%s", a.FromSum.Text, a.FromCount.Text)
		}
		if a.SharedCount != nil {
			fmt.Fprintf(b, " count_from=%s", a.SharedCount.Text)
		}
		if a.FromVariance != nil {
			fmt.Fprintf(b, " from=sqrt(%s)", a.FromVariance.Text)
		}
		fmt.Fprintf(b, " text=%s\n", a.Text)
	}
	if p.Post != nil {
		fmt.Fprintf(b, "-- post: SELECT %s", p.Post.Targets)
		if p.Post.Where != "" {
			fmt.Fprintf(b, " WHERE %s", p.Post.Where)
		}
		if p.Post.OrderBy != "" {
			fmt.Fprintf(b, " ORDER BY %s", p.Post.OrderBy)
		}
		b.WriteString("\n")
	}
	for i, o := range p.Outputs {
		if o.Agg != nil {
			fmt.Fprintf(b, "-- output %d: agg %s(%s)\n", i, o.Agg.Func, o.Agg.Column)
		} else {
			fmt.Fprintf(b, "-- output %d: key %d\n", i, o.GroupKey)
		}
	}
	for _, o := range p.OrderBy {
		fmt.Fprintf(b, "-- order: output=%d desc=%v nulls_first=%v\n", o.Output, o.Descending, o.NullsFirst)
	}
	renderTotality(b, p) // totality_test.go
	renderAuto(b, p)     // autobounds_test.go
}

// goldenCases is the golden corpus: every testdata/FEATURE/NAME.sql,
// its intent line stripped (testdata/README.md).
func goldenCases(t testing.TB) []golden.Case {
	cases, err := golden.Cases("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestGolden compares Analyze's output for testdata/FEATURE/NAME.sql
// (without its intent line) with testdata/FEATURE/NAME.golden. Files named ok_* must be accepted and refuse_*
// refused, so a regression cannot hide in a regenerated golden file.
func TestGolden(t *testing.T) {
	a := newTestAnalyzer(t)
	files := goldenCases(t)
	var ok, refused int
	for _, f := range files {
		name := f.Name
		if strings.HasPrefix(name, "ok_") {
			ok++
		} else {
			refused++
		}
		t.Run(name, func(t *testing.T) {
			src := f.SQL
			stmts, err := a.Analyze(src)
			switch {
			case strings.HasPrefix(name, "ok_") && err != nil:
				t.Errorf("Analyze(%q) refused: %v", src, err)
			case strings.HasPrefix(name, "refuse_") && err == nil:
				t.Errorf("Analyze(%q) accepted, want a refusal", src)
			}
			got := render(stmts, err)
			golden := f.Golden()
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./rewrite -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Analyze(%q) =\n%s\nwant\n%s", src, got, want)
			}
		})
	}
	if ok < 15 || refused < 30 {
		t.Errorf("golden corpus has %d accepted and %d refused cases, want at least 15 and 30", ok, refused)
	}
}

// TestGoldenLayout: every case lives in a feature directory
// (testdata/FEATURE/NAME.sql), is named ok_* or refuse_*, has its golden
// output next to it, and starts with a one-line intent saying why it
// exists (testdata/README.md).
func TestGoldenLayout(t *testing.T) {
	for _, c := range goldenCases(t) {
		if dir := filepath.Dir(c.Path); filepath.Dir(dir) != "testdata" {
			t.Errorf("%s: want testdata/FEATURE/%s.sql", c.Path, c.Name)
		}
		if !strings.HasPrefix(c.Name, "ok_") && !strings.HasPrefix(c.Name, "refuse_") {
			t.Errorf("%s: name must start with ok_ or refuse_", c.Path)
		}
		if c.Intent == "" {
			t.Errorf("%s: first line must be %q followed by why the case exists", c.Path, golden.IntentPrefix+" ")
		}
		if _, err := os.Stat(c.Golden()); err != nil && !*update {
			t.Errorf("%s: %v", c.Path, err)
		}
	}
}

// checkPrivateSQL verifies that a rewritten query parses and reads the
// private table exactly once, in the innermost per-unit pre-aggregation
// (GROUP BY the privacy unit first).
func checkPrivateSQL(t testing.TB, src string, p *Plan) {
	for _, b := range p.Branches {
		checkPrivateSQL(t, src, b)
	}
	if len(p.Branches) > 0 {
		return
	}
	t.Helper()
	tree, err := pg_query.Parse(p.SQL)
	if err != nil {
		t.Fatalf("rewrite of %q does not parse: %v\n%s", src, err, p.SQL)
	}
	if len(tree.Stmts) != 1 {
		t.Fatalf("rewrite of %q has %d statements", src, len(tree.Stmts))
	}
	refs := collectRels(tree.Stmts[0].Stmt.ProtoReflect())
	// With quantiles the result is a GROUP BY over a UNION ALL: the
	// groups' rows, then the histograms' rows (histogram.go); each arm is
	// checked alike.
	top := tree.Stmts[0].Stmt.GetSelectStmt()
	arms := []*pg_query.SelectStmt{top}
	quantiles := false
	for _, a := range p.Aggregates {
		quantiles = quantiles || a.Kind == AggQuantile
	}
	if quantiles {
		if len(top.FromClause) != 1 || top.FromClause[0].GetRangeSubselect() == nil {
			t.Fatalf("rewrite of %q: quantiles without the merge of the arms:\n%s", src, p.SQL)
		}
		arms = unionArms(top.FromClause[0].GetRangeSubselect().Subquery.GetSelectStmt())
		if len(arms) < 2 {
			t.Fatalf("rewrite of %q: quantiles without histogram arms:\n%s", src, p.SQL)
		}
	}
	innermost := map[*pg_query.RangeVar]bool{}
	for i, arm := range arms {
		sel := checkArm(t, src, p, arm, i > 0)
		// Every relation is read in the innermost FROM: the private
		// table exactly once per arm, and otherwise only public tables.
		for _, f := range sel.FromClause {
			walk(f.ProtoReflect(), func(m protoreflect.Message) bool {
				if rv, ok := m.Interface().(*pg_query.RangeVar); ok {
					innermost[rv] = true
				}
				return true
			})
		}
	}
	private := 0
	for _, r := range refs {
		if !innermost[r.rv] {
			t.Fatalf("rewrite of %q reads %s outside the innermost per-unit query:\n%s", src, r.rv.Relname, p.SQL)
		}
		if r.rv.Schemaname == p.Table.Schema && r.rv.Relname == p.Table.Name {
			private++
			continue
		}
		if r.rv.Schemaname == "" || !strings.Contains(testConfig, r.rv.Schemaname+"."+r.rv.Relname+": {public: true}") {
			t.Fatalf("rewrite of %q reads %s.%s, which is not a public table:\n%s", src, r.rv.Schemaname, r.rv.Relname, p.SQL)
		}
	}
	if private != len(arms) {
		t.Fatalf("rewrite of %q reads the private table %d times, want once in each of %d arms:\n%s", src, private, len(arms), p.SQL)
	}
	// The salt is the last parameter, and no other parameter is added.
	if n := numParams(tree.Stmts[0].Stmt.GetSelectStmt()); n != p.SeedParam() {
		t.Errorf("rewrite of %q: highest parameter $%d, want $%d", src, n, p.SeedParam())
	}
	checkConstantsHoisted(t, src, p, tree) // totality_test.go
	// Result columns: keys, then dp_units, then each component once.
	seen := map[int]bool{p.UnitsCol: true}
	if name := top.TargetList[p.UnitsCol].GetResTarget().Name; name != "dp_units" {
		t.Errorf("rewrite of %q: UnitsCol %d is %q", src, p.UnitsCol, name)
	}
	for _, k := range p.GroupKeys {
		seen[k.ResultCol] = true
	}
	for _, a := range p.Aggregates {
		for _, c := range []int{a.SumCol, a.CountCol, a.SumSqCol, a.HistCol} {
			if c < 0 {
				continue
			}
			if seen[c] || c >= len(top.TargetList) {
				t.Errorf("rewrite of %q: result column %d used twice or out of range", src, c)
			}
			seen[c] = true
		}
	}
	if len(seen) != len(top.TargetList) {
		t.Errorf("rewrite of %q: %d result columns, %d referenced by the plan", src, len(top.TargetList), len(seen))
	}
}

// unionArms is the SELECTs of a UNION ALL, in order, or sel alone.
func unionArms(sel *pg_query.SelectStmt) []*pg_query.SelectStmt {
	if sel == nil || sel.Op == pg_query.SetOperation_SETOP_NONE {
		return []*pg_query.SelectStmt{sel}
	}
	return append(unionArms(sel.Larg), unionArms(sel.Rarg)...)
}

// checkArm checks one arm of the rewritten query, the groups' rows or a
// histogram's (hist), and returns its innermost SELECT: the per-unit
// query, at the expected depth, grouped by the unit first.
func checkArm(t testing.TB, src string, p *Plan, arm *pg_query.SelectStmt, hist bool) *pg_query.SelectStmt {
	t.Helper()
	// Descend through the FROM subqueries to the innermost SELECT.
	sel := arm
	depth := 0
	for {
		if sel == nil || len(sel.FromClause) == 0 {
			t.Fatalf("rewrite of %q: unexpected shape at depth %d:\n%s", src, depth, p.SQL)
		}
		sub := sel.FromClause[0].GetRangeSubselect()
		if sub == nil {
			break
		}
		if len(sel.FromClause) != 1 {
			t.Fatalf("rewrite of %q: a subquery is joined at depth %d:\n%s", src, depth, p.SQL)
		}
		sel = sub.Subquery.GetSelectStmt()
		depth++
	}
	nested := len(p.GroupKeys) > 0 || p.DistinctValues || hist
	if nested && depth == 1 && !p.DistinctValues && !hist {
		// The groups are not ranked per unit: sound only when the keys'
		// public values allow no more than max_groups_per_unit groups.
		combos := 1
		for _, k := range p.GroupKeys {
			if k.PublicTable != "" {
				combos = 0 // read when the query runs: no bound known here
				break
			}
			combos *= len(k.PublicValues)
		}
		if combos == 0 || int64(combos) > p.Table.MaxGroupsPerUnit {
			t.Errorf("rewrite of %q: groups not ranked per unit, but the keys allow %d groups against max_groups_per_unit %d:\n%s", src, combos, p.Table.MaxGroupsPerUnit, p.SQL)
		}
		nested = false
	}
	if want := 1 + map[bool]int{true: 1}[nested]; depth != want {
		t.Errorf("rewrite of %q: private table at depth %d, want %d:\n%s", src, depth, want, p.SQL)
	}
	extra := map[bool]int{true: 1}[p.DistinctValues]
	if hist {
		extra = 1 // the bucket
	}
	if want := len(p.GroupKeys) + 1 + extra; len(sel.GroupClause) != want {
		t.Fatalf("rewrite of %q: innermost GROUP BY has %d items, want %d", src, len(sel.GroupClause), want)
	}
	first := sel.GroupClause[0].GetColumnRef()
	if first == nil || first.Fields[len(first.Fields)-1].GetString_().GetSval() != p.Table.PrivacyUnit {
		t.Errorf("rewrite of %q: innermost GROUP BY does not start with the privacy unit %s", src, p.Table.PrivacyUnit)
	}
	return sel
}

func TestRewrittenSQLReadsTableOnlyPerUnit(t *testing.T) {
	a := newTestAnalyzer(t)
	n := 0
	for _, f := range goldenCases(t) {
		src := f.SQL
		stmts, err := a.Analyze(src)
		if err != nil {
			continue
		}
		for _, st := range stmts {
			if st.Plan != nil {
				checkPrivateSQL(t, src, st.Plan)
				n++
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d private plans in the corpus", n)
	}
}

func TestDesignExamplePlan(t *testing.T) {
	// docs/design.md's example reads region's values from the rows: with
	// its four public values and L0 = 4 no unit's groups would be ranked
	// (TestPublicValuesCapGroups).
	a := newTestAnalyzerEdited(t, func(cfg *conf.Config) {
		cfg.Tables["public.orders"].Columns["region"].PublicValues = nil
	})
	stmts, err := a.Analyze("SELECT region, count(*), sum(amount), avg(amount) FROM orders WHERE amount > 10 GROUP BY region")
	if err != nil {
		t.Fatal(err)
	}
	p := stmts[0].Plan
	if p == nil || stmts[0].Kind != KindPrivate {
		t.Fatalf("got %+v, want a private plan", stmts[0])
	}
	if !p.PartitionSelection || p.MaxGroups != 4 || p.MaxRows != 8 || p.UnitsCol != 1 || p.GroupKeys[0].ResultCol != 0 {
		t.Errorf("plan bounds = %+v", p)
	}
	want := []struct {
		kind          AggKind
		sumCol, count int
	}{{AggCount, -1, 2}, {AggSum, 3, -1}, {AggAvg, -1, -1}}
	for i, w := range want {
		g := p.Aggregates[i]
		if g.Kind != w.kind || g.SumCol != w.sumCol || g.CountCol != w.count {
			t.Errorf("aggregate %d = %+v, want kind %v sum %d count %d", i, g, w.kind, w.sumCol, w.count)
		}
	}
	// amount is NOT NULL: avg is the released sum over the released count(*).
	if a := p.Aggregates[2]; a.FromSum != p.Aggregates[1] || a.FromCount != p.Aggregates[0] {
		t.Errorf("avg derived from %v / %v, want sum(amount) / count(*)", a.FromSum, a.FromCount)
	}
	for _, frag := range []string{
		"CASE WHEN (amount)::numeric > 500 THEN 500 WHEN (amount)::numeric < 0 THEN 0 ELSE (amount)::numeric END",
		"ORDER BY hashtextextended(concat_ws('|', dp_u, g0), $1::bigint), g0)",
		"WHERE dp_rank <= 4",
		"sum(least(dp_n, 8))",
		"CASE WHEN dp_n <= 8 THEN s1 ELSE s1 * (8::numeric / dp_n) END",
	} {
		if !strings.Contains(p.SQL, frag) {
			t.Errorf("rewritten SQL lacks %q:\n%s", frag, p.SQL)
		}
	}
}

func TestAnalyzeStatements(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, tc := range []struct {
		sql   string
		kinds []Kind
	}{
		{"", []Kind{KindEmpty}},
		{"  ;; ", []Kind{KindEmpty}},
		{"-- c\n", []Kind{KindEmpty}},
		{"SELECT 1; SELECT count(*) FROM orders", []Kind{KindPassThrough, KindPrivate}},
		{"SET dp.epsilon = 1; EXPLAIN DP SELECT count(*) FROM orders; SELECT 2", []Kind{KindSetDP, KindExplainDP, KindPassThrough}},
		{"explain   DP select sum(amount) from orders", []Kind{KindExplainDP}},
	} {
		stmts, err := a.Analyze(tc.sql)
		if err != nil {
			t.Errorf("Analyze(%q) = %v", tc.sql, err)
			continue
		}
		var got []Kind
		for _, st := range stmts {
			got = append(got, st.Kind)
			if st.Kind != KindEmpty && (st.Key == "" || len(st.Fingerprint) != 16) {
				t.Errorf("Analyze(%q): statement %+v lacks Key or Fingerprint", tc.sql, st)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.kinds) {
			t.Errorf("Analyze(%q) kinds = %v, want %v", tc.sql, got, tc.kinds)
		}
	}
}

func TestKeyKeepsConstants(t *testing.T) {
	a := newTestAnalyzer(t)
	s1, err1 := a.Analyze("SELECT count(*) FROM orders WHERE amount > 10")
	s2, err2 := a.Analyze("select   COUNT(*) from orders where amount > 11")
	s3, err3 := a.Analyze("select count(*) from orders where amount > 10 -- again")
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if s1[0].Key == s2[0].Key || s1[0].Key != s3[0].Key {
		t.Errorf("keys %q %q %q: want different constants to differ and spelling not to matter", s1[0].Key, s2[0].Key, s3[0].Key)
	}
	if s1[0].Fingerprint != s2[0].Fingerprint {
		t.Errorf("fingerprints %q %q differ for queries differing only in constants", s1[0].Fingerprint, s2[0].Fingerprint)
	}
}

func TestRejectErrorInterface(t *testing.T) {
	a := newTestAnalyzer(t)
	_, err := a.Analyze("SELECT 1;\nSELECT * FROM orders")
	var st interface{ SQLState() string }
	if !errors.As(err, &st) || st.SQLState() != string(pgerr.InsufficientPrivilege) {
		t.Fatalf("Analyze = %v, want SQLSTATE %s", err, pgerr.InsufficientPrivilege)
	}
	var re *RejectError
	errors.As(err, &re)
	// "SELECT * ..." starts at character 11; the * is at 18.
	if re.Position != 18 {
		t.Errorf("Position = %d, want 18", re.Position)
	}
	_, err = a.Analyze("SELECT 1; EXPLAIN DP SELECT 1 +")
	if !errors.As(err, &re) || re.Code != pgerr.SyntaxError || re.Position != 32 {
		t.Errorf("Analyze(syntax error after EXPLAIN DP) = %#v, want 42601 at 32", re)
	}
}

func TestConcurrentUse(t *testing.T) {
	a := newTestAnalyzer(t)
	files := goldenCases(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, f := range files {
				src := f.SQL
				first := render(a.Analyze(src))
				if again := render(a.Analyze(src)); again != first {
					t.Errorf("Analyze(%q) is not deterministic", src)
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzRewrite checks that Analyze never panics, that every refusal carries
// a SQLSTATE, that accepted private queries rewrite to SQL that reads the
// table only per unit, and that pass-through SQL is a fixed point.
func FuzzRewrite(f *testing.F) {
	for _, c := range goldenCases(f) {
		f.Add(strings.TrimSpace(c.SQL))
	}
	a := newTestAnalyzer(f)
	f.Fuzz(func(t *testing.T, sql string) {
		stmts, err := a.Analyze(sql)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || len(re.Code) != 5 || re.Message == "" {
				t.Fatalf("Analyze(%q) = %v: not a RejectError with a SQLSTATE", sql, err)
			}
			if re.Position < 0 {
				t.Fatalf("Analyze(%q): negative position %d", sql, re.Position)
			}
			return
		}
		if len(stmts) == 0 {
			t.Fatalf("Analyze(%q) returned no statements", sql)
		}
		for _, st := range stmts {
			switch st.Kind {
			case KindPrivate, KindExplainDP:
				checkPrivateSQL(t, sql, st.Plan)
			case KindPassThrough:
				again, err := a.Analyze(st.SQL)
				if err != nil || len(again) != 1 || again[0].Kind != KindPassThrough || again[0].SQL != st.SQL {
					t.Fatalf("pass-through %q of %q is not a fixed point: %v %v", st.SQL, sql, again, err)
				}
			}
		}
	})
}

// TestSessionStatementsText: dp.* commands, answered by the proxy, keep
// their text (for logs); a session command sent upstream is the proxy's
// deparse of what it checked, never the client's bytes.
func TestSessionStatementsText(t *testing.T) {
	a := newTestAnalyzer(t)
	stmts, err := a.Analyze("SET dp.epsilon = 0.5;  show dp.budget ;SET application_name = 'x'")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"SET dp.epsilon = 0.5", "show dp.budget", "SET application_name TO x"}
	for i, st := range stmts {
		if st.SQL != want[i] {
			t.Errorf("statement %d SQL = %q, want %q", i, st.SQL, want[i])
		}
	}
}

func BenchmarkAnalyze(b *testing.B) {
	a := newTestAnalyzer(b)
	var corpus []string
	for _, f := range goldenCases(b) {
		corpus = append(corpus, f.SQL)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Analyze(corpus[i%len(corpus)])
	}
}

func TestBoolPublicValuesSpelling(t *testing.T) {
	got, err := boolPublicValues("paid", []string{" On", "0", "yes", "F"})
	if err != nil || strings.Join(got, ",") != "t,f" {
		t.Errorf("boolPublicValues = %v, %v; want t,f", got, err)
	}
	if _, err := boolPublicValues("paid", []string{"true", "maybe"}); err == nil || !strings.Contains(err.Error(), `"maybe" is not a boolean`) {
		t.Errorf("boolPublicValues(maybe) = %v, want an error naming it", err)
	}
}
