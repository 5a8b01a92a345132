package e2e

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// The privacy audit runs the whole release path (rewrite, bounded SQL on a
// real PostgreSQL, budget split, noise, post-processing) many times on two
// neighbouring databases and estimates a lower bound on the privacy loss
// from the two output distributions, in the spirit of DP-Sniper and StatDP:
// for a family of output events E, Clopper-Pearson bounds on P[E | D0] and
// P[E | D1] give ε_lb = ln(P1_lower / P0_upper); the test fails if some
// event's ε_lb exceeds the ε the mechanism claims. The neighbours differ by
// one privacy unit with the largest possible contribution (more rows than
// max_rows_per_unit, values beyond the clamp bounds), so a broken bound, a
// missing clamp or a mis-scaled noise would show up as a larger ε_lb.
//
// Each query varies a no-op predicate (uid > -i) so that the answer cache
// never returns an earlier draw.

// auditConfig is the audit's proxy (testconf.Audit).
var auditConfig = testconf.YAML(testconf.Audit)

// auditRuns is the number of releases per database and query. With 600,
// a correctly calibrated mechanism passes with a false-failure rate below
// 0.1% (the bounds are Bonferroni-corrected), and a bound broken by a factor
// of 3 or more fails.
const auditRuns = 600

// auditAlpha is the total false-failure probability of one audit.
const auditAlpha = 1e-3

// auditEdgeUnits is filled in by the test: the number of units in group
// 'edge' of D0, chosen near the partition-selection threshold so that the
// group appears about half the time.
func auditSetup(t *testing.T, edgeUnits int) {
	t.Helper()
	db := direct(t)
	var b strings.Builder
	for _, tbl := range []string{"dp_audit_d0", "dp_audit_d1"} {
		fmt.Fprintf(&b, "DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (uid int, g text, v numeric);\n", tbl)
		// 20 ordinary units in group 'common', one row each at the lower bound
		// (the worst case for AVG: the added unit moves it the most).
		fmt.Fprintf(&b, "INSERT INTO %s SELECT u, 'common', 0 FROM generate_series(1, 20) u;\n", tbl)
		// edgeUnits units in group 'edge'.
		fmt.Fprintf(&b, "INSERT INTO %s SELECT u, 'edge', 0 FROM generate_series(101, %d) u;\n", tbl, 100+edgeUnits)
	}
	// D1 = D0 + one unit with the largest contribution: 10 rows (> R = 2),
	// each far above the upper bound, in group 'edge'.
	b.WriteString("INSERT INTO dp_audit_d1 SELECT 999, 'edge', 1000 FROM generate_series(1, 10);\n")
	if _, err := db.Exec(ctx, b.String()); err != nil {
		t.Fatal(err)
	}
}

func TestPrivacyAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("the privacy audit runs thousands of queries")
	}
	eps := 1.0
	// Partition selection gets ε/2 (one aggregate + the selection), δ all.
	// It is the optimal pre-aggregated selection (dp/selection.go), which
	// at the Laplace threshold releases a group more than half the time.
	thr, err := noise.Laplace().Threshold(1, 1, eps/2, 0, 1e-7)
	if err != nil {
		t.Fatal(err)
	}
	edge := int(math.Round(thr))
	auditSetup(t, edge)
	_, addr, _ := startProxyWith(t, configFor(t, auditConfig, map[string]string{"PW": "pw"}))

	type sample struct{ count, sum, avg []float64 }
	var scalar [2]sample
	var edgeSeen [2]int
	var mu sync.Mutex
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := dialAt(addr, "auditor", "pw")
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			for i := w; i < auditRuns; i += workers {
				for d := range 2 {
					var c int64
					var s, a pgtype.Numeric
					q := fmt.Sprintf("SELECT count(*), sum(v), avg(v) FROM dp_audit_d%d WHERE uid > %d", d, -i)
					if err := conn.QueryRow(ctx, q).Scan(&c, &s, &a); err != nil {
						errs <- fmt.Errorf("%s: %w", q, err)
						return
					}
					sf, _ := s.Float64Value()
					af, _ := a.Float64Value()
					q = fmt.Sprintf("SELECT g, count(*) FROM dp_audit_d%d WHERE uid > %d GROUP BY g", d, -i)
					rows, err := conn.Query(ctx, q)
					if err != nil {
						errs <- err
						return
					}
					seen := false
					for rows.Next() {
						var g string
						var n int64
						if err := rows.Scan(&g, &n); err != nil {
							errs <- err
							return
						}
						seen = seen || g == "edge"
					}
					if err := rows.Err(); err != nil {
						errs <- fmt.Errorf("%s: %w", q, err)
						return
					}
					mu.Lock()
					scalar[d].count = append(scalar[d].count, float64(c))
					scalar[d].sum = append(scalar[d].sum, sf.Float64)
					scalar[d].avg = append(scalar[d].avg, af.Float64)
					if seen {
						edgeSeen[d]++
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Four audits share the false-failure budget.
	alpha := auditAlpha / 4
	share := eps / 3 // three aggregates in the scalar query
	for _, c := range []struct {
		name   string
		d0, d1 []float64
	}{{"count", scalar[0].count, scalar[1].count}, {"sum", scalar[0].sum, scalar[1].sum}, {"avg", scalar[0].avg, scalar[1].avg}} {
		lb, ev := epsLowerBound(c.d0, c.d1, alpha)
		t.Logf("%s: ε lower bound %.3f (event %s), claimed ε %.3f; means %.2f vs %.2f", c.name, lb, ev, share, mean(c.d0), mean(c.d1))
		if lb > share {
			t.Errorf("PRIVACY VIOLATION: %s releases are distinguishable beyond ε=%.3f: ε_lb = %.3f on event %s", c.name, share, lb, ev)
		}
	}
	// Partition selection: the event "group edge is released".
	sel := eps / 2
	n := auditRuns
	lo1, hi1 := clopperPearson(edgeSeen[1], n, alpha/2)
	lo0, hi0 := clopperPearson(edgeSeen[0], n, alpha/2)
	t.Logf("partition selection: edge released %d/%d (D0, %d units) vs %d/%d (D1), threshold %.2f", edgeSeen[0], n, edge, edgeSeen[1], n, thr)
	delta := 1e-7
	if lo1 > math.Exp(sel)*hi0+delta || lo0 > math.Exp(sel)*hi1+delta {
		t.Errorf("PRIVACY VIOLATION: partition selection distinguishes the neighbours beyond (ε=%.2f, δ=%g): P0 in [%.3f, %.3f], P1 in [%.3f, %.3f]", sel, delta, lo0, hi0, lo1, hi1)
	}
	if edgeSeen[0] == 0 && edgeSeen[1] == 0 {
		t.Errorf("group edge never released: the audit of partition selection has no power")
	}
}

// epsLowerBound returns the largest ε lower bound over the events
// {x >= t} and {x < t}, t ranging over 19 quantiles of the pooled samples,
// each bound holding with confidence 1 - alpha/(number of bounds).
func epsLowerBound(d0, d1 []float64, alpha float64) (float64, string) {
	pooled := append(append([]float64(nil), d0...), d1...)
	sort.Float64s(pooled)
	const cands = 19
	a := alpha / (cands * 2 * 2) // each event, each direction, two bounds
	best, event := 0.0, "none"
	for q := 1; q <= cands; q++ {
		thr := pooled[q*len(pooled)/(cands+1)]
		k0, k1 := countAtLeast(d0, thr), countAtLeast(d1, thr)
		for _, e := range []struct {
			name   string
			k0, k1 int
		}{{fmt.Sprintf(">= %g", thr), k0, k1}, {fmt.Sprintf("< %g", thr), len(d0) - k0, len(d1) - k1}} {
			lo0, hi0 := clopperPearson(e.k0, len(d0), a)
			lo1, hi1 := clopperPearson(e.k1, len(d1), a)
			for _, r := range []float64{math.Log(lo1 / hi0), math.Log(lo0 / hi1)} {
				if r > best {
					best, event = r, e.name
				}
			}
		}
	}
	return best, event
}

func countAtLeast(xs []float64, t float64) int {
	n := 0
	for _, x := range xs {
		if x >= t {
			n++
		}
	}
	return n
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// clopperPearson returns the exact binomial confidence interval for k
// successes in n trials: each side holds with probability 1 - alpha.
func clopperPearson(k, n int, alpha float64) (lo, hi float64) {
	// P[X >= k | p] increases with p; lo solves P[X >= k | lo] = alpha.
	if k > 0 {
		lo = bisect(func(p float64) bool { return binomTailAtLeast(k, n, p) < alpha })
	}
	hi = 1
	if k < n {
		// hi solves P[X <= k | hi] = alpha, i.e. P[X >= k+1 | hi] = 1 - alpha.
		hi = bisect(func(p float64) bool { return 1-binomTailAtLeast(k+1, n, p) > alpha })
	}
	return lo, hi
}

// bisect finds the boundary in (0, 1) where below(p) turns false.
func bisect(below func(p float64) bool) float64 {
	lo, hi := 0.0, 1.0
	for range 100 {
		mid := (lo + hi) / 2
		if below(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// binomTailAtLeast is P[X >= k] for X ~ Binomial(n, p), summed in log space.
func binomTailAtLeast(k, n int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	lgn, _ := math.Lgamma(float64(n + 1))
	s := 0.0
	for i := k; i <= n; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		s += math.Exp(lgn - a - b + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return math.Min(1, s)
}

func TestClopperPearson(t *testing.T) {
	// Reference values (R: binom.test(k, n, conf.level = 0.9)$conf.int).
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{{5, 20, 0.1040, 0.4556}, {0, 10, 0, 0.2589}, {10, 10, 0.7411, 1}} {
		lo, hi := clopperPearson(c.k, c.n, 0.05)
		if math.Abs(lo-c.lo) > 1e-3 || math.Abs(hi-c.hi) > 1e-3 {
			t.Errorf("clopperPearson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
}

// TestSamplerNoFloatingPointHoles checks Mironov's attack (2012) on the
// Laplace sampler the proxy uses: a naive x + b·ln(U) in float64 leaves
// holes in its output set that depend on x, so one output can tell two
// neighbouring inputs apart. The library snaps every output to a lattice
// g·Z with g = 2^⌈log2(b/2^40)⌉ (noise/noise.go), the same for both inputs,
// so every output is possible under either input. The test draws outputs
// for two neighbours whose fractional parts differ in the low bits and
// checks that every output lies on g·Z; a naive sampler, run as a control,
// fails the same check (so the check has power).
func TestSamplerNoFloatingPointHoles(t *testing.T) {
	const n = 20000
	eps := 0.5
	b := 1 / eps // L0 = L∞ = 1
	g := math.Exp2(math.Ceil(math.Log2(b / 0x1p40)))
	onLattice := func(ys []float64) (int, float64) {
		for i, y := range ys {
			if math.Mod(y, g) != 0 {
				return i, y
			}
		}
		return -1, 0
	}
	x0, x1 := 0.1, 1.1 // neighbours for L∞ = 1; 0.1 is not a multiple of g
	for _, x := range []float64{x0, x1} {
		ys := make([]float64, n)
		for i := range ys {
			y, err := noise.Laplace().Add(x, 1, 1, eps, 0)
			if err != nil {
				t.Fatal(err)
			}
			ys[i] = y
		}
		if i, y := onLattice(ys); i >= 0 {
			t.Errorf("input %v: output %v (draw %d) is not a multiple of g = %g: the output carries the input's low bits", x, y, i, g)
		}
	}
	// Control: the naive sampler leaves the input's bits in its outputs.
	naive := make([]float64, n)
	for i := range naive {
		u := (float64(i) + 0.5) / n
		naive[i] = x0 - b*math.Copysign(math.Log(1-2*math.Abs(u-0.5)), u-0.5)
	}
	if i, _ := onLattice(naive); i < 0 {
		t.Errorf("control: the naive sampler passed the lattice check, so the check has no power")
	}
}

// precisionConfig is TestSumNearFloatPrecision's (testconf.AuditPrecision).
var precisionConfig = testconf.YAML(testconf.AuditPrecision)

// TestSumNearFloatPrecision: values near 2^53, where float64 stops being
// exact, and fractional values inside the clamp bounds. The rewritten SQL
// must sum them exactly (numeric, not float8), and the neighbours' bounded
// sums, as the proxy parses them, must differ by no more than the
// sensitivity R·max(|lower|, |upper|) (up to float64's relative rounding of
// the total, 2^-52, documented in docs/threat-model.md).
func TestSumNearFloatPrecision(t *testing.T) {
	db := direct(t)
	vals := []string{"9007199254740991", "9007199254740993", "-9007199254740991", "0.1", "0.2", "4503599627370497.5", "1e-30"}
	var b strings.Builder
	for _, tbl := range []string{"dp_audit_prec0", "dp_audit_prec1"} {
		fmt.Fprintf(&b, "DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (uid int, v numeric);\n", tbl)
		for u := 1; u <= 40; u++ {
			fmt.Fprintf(&b, "INSERT INTO %s VALUES (%d, %s);\n", tbl, u, vals[u%len(vals)])
		}
	}
	// The neighbour: one more unit, 5 rows (> R = 2) just under the bound.
	b.WriteString("INSERT INTO dp_audit_prec1 SELECT 999, 9007199254740991 FROM generate_series(1, 5);\n")
	if _, err := db.Exec(ctx, b.String()); err != nil {
		t.Fatal(err)
	}
	cfg := configFor(t, precisionConfig, map[string]string{"PW": "pw"})
	an := rewrite.New(cfg, rewrite.Options{})
	var sums [2]string
	for d := range 2 {
		stmts, err := an.Analyze(fmt.Sprintf("SELECT sum(v) FROM dp_audit_prec%d", d))
		if err != nil {
			t.Fatal(err)
		}
		plan := stmts[0].Plan
		if plan == nil || plan.NumParams != 0 {
			t.Fatalf("unexpected plan %+v", plan)
		}
		agg := plan.Aggregates[0]
		rows, err := db.Query(ctx, plan.SQL, pgx.QueryExecModeExec, int64(0x0123456789abcdef))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := rows.RawValues()
			sums[d] = string(vals[agg.SumCol])
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Exact: the database's bounded sum of D0 is the exact decimal sum of
	// the clamped values (each unit has one row, R = 2 does not scale it).
	want := new(big.Rat)
	bound := new(big.Rat).SetInt64(1 << 53)
	for u := 1; u <= 40; u++ {
		r, _ := new(big.Rat).SetString(vals[u%len(vals)])
		if r.Cmp(bound) > 0 {
			r = bound
		}
		want.Add(want, r)
	}
	got, ok := new(big.Rat).SetString(sums[0])
	if !ok || got.Cmp(want) != 0 {
		t.Errorf("bounded sum of D0 = %s, want exactly %s: the sum is not exact numeric", sums[0], want.FloatString(30))
	}
	s0, err0 := strconv.ParseFloat(sums[0], 64)
	s1, err1 := strconv.ParseFloat(sums[1], 64)
	if err0 != nil || err1 != nil {
		t.Fatalf("parse: %v %v", err0, err1)
	}
	sens := 2 * 9007199254740992.0
	total := math.Max(math.Abs(s0), math.Abs(s1))
	slack := 2 * total * 0x1p-52
	if d := math.Abs(s1 - s0); d > sens+slack {
		t.Errorf("neighbours' bounded sums differ by %g > sensitivity %g (+ rounding %g)", d, sens, slack)
	}
	// Through the proxy: a finite answer within a generous error bound.
	_, addr, _ := startProxyWith(t, cfg)
	conn, err := dialAt(addr, "auditor_prec", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	v := queryFloat(t, conn, "SELECT sum(v) FROM dp_audit_prec1")
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v-s1) > 40*sens {
		t.Errorf("noisy sum %g, exact bounded sum %g: off by more than 40 sensitivities", v, s1)
	}
}

// TestConstantTimeAuthComparisons reads internal/scram and fails if a
// secret is compared with bytes.Equal, string ==, or anything else than
// crypto/subtle's constant-time comparison (hmac.Equal also qualifies).
func TestConstantTimeAuthComparisons(t *testing.T) {
	files, err := filepath.Glob("../internal/scram/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scram sources: %v", err)
	}
	secretish := []string{"proof", "key", "hash", "signature", "stored", "password", "response", "want", "computed", "digest"}
	constTime := 0
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
					pkg, _ := sel.X.(*ast.Ident)
					switch {
					case pkg != nil && pkg.Name == "subtle" && sel.Sel.Name == "ConstantTimeCompare",
						pkg != nil && pkg.Name == "hmac" && sel.Sel.Name == "Equal":
						constTime++
					case pkg != nil && pkg.Name == "bytes" && (sel.Sel.Name == "Equal" || sel.Sel.Name == "Compare"):
						t.Errorf("%s: bytes.%s in authentication code: use subtle.ConstantTimeCompare", fset.Position(x.Pos()), sel.Sel.Name)
					}
				}
			case *ast.BinaryExpr:
				if x.Op != token.EQL && x.Op != token.NEQ {
					return true
				}
				for _, side := range []ast.Expr{x.X, x.Y} {
					text := strings.ToLower(string(src[fset.Position(side.Pos()).Offset:fset.Position(side.End()).Offset]))
					// Lengths and results of calls (ConstantTimeCompare(...) == 1)
					// are not secrets.
					if strings.Contains(text, "len") || strings.Contains(text, "(") || text == "nil" {
						continue
					}
					for _, s := range secretish {
						if strings.Contains(text, s) {
							t.Errorf("%s: %s compared with %s: use subtle.ConstantTimeCompare", fset.Position(x.Pos()), text, x.Op)
						}
					}
				}
			}
			return true
		})
	}
	if constTime < 2 {
		t.Errorf("found %d constant-time comparisons in internal/scram, want at least 2 (SCRAM proof, MD5 response)", constTime)
	}
}
