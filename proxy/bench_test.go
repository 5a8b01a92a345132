package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dpnoise "github.com/google/differential-privacy/go/v3/noise"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// The proxy's CPU per query, and the accuracy of its release path. The
// benchmarks follow a DP query through everything the proxy does itself:
// parse → validate → rewrite (rewrite.Analyzer, or the parse cache), the
// budget split and noise (releaseSpec, release) and the encoding of the
// answer into wire messages. The database's share (running the rewritten
// SQL) and the ledger's are excluded: bench/ measures those end to end.
//
//	go test ./proxy -run '^$' -bench Pipeline -benchmem
//
// Each benchmark also reports the p50 and p99 of one operation (p50-ns,
// p99-ns), since the goals are stated as percentiles.

func benchServer(tb testing.TB) *Server {
	tb.Helper()
	// The benchmarks' tables (events, pgbench_accounts) are those of
	// testconf.ProxyBench (internal/testconf/dpproxy.yaml).
	cfg, err := testconf.Get(testconf.ProxyBench).Parse(func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	return &Server{cfg: cfg, analyzer: rewrite.New(cfg, rewrite.Options{}), parsed: newParseCache(), shapes: newShapeCache()}
}

func benchSession(srv *Server, w io.Writer, mech string, eps, delta float64) *session {
	return &session{
		srv: srv, backend: pgproto3.NewBackend(strings.NewReader(""), w),
		epsilon: eps, delta: delta, mechanism: mech, notices: true,
	}
}

// boundedRows fakes the rewritten query's result: ngroups groups, each with
// plausible exact bounded aggregates in every column the plan reads.
func boundedRows(plan *rewrite.Plan, ngroups int) [][][]byte {
	ncols := plan.UnitsCol + 1
	for _, a := range plan.Aggregates {
		ncols = max(ncols, a.SumCol+1, a.CountCol+1, a.SumSqCol+1, a.HistCol+1)
	}
	rows := make([][][]byte, ngroups)
	for g := range rows {
		row := make([][]byte, ncols)
		for i := range row {
			row[i] = []byte("1000")
		}
		for _, k := range plan.GroupKeys {
			row[k.ResultCol] = []byte(strconv.Itoa(g))
		}
		row[plan.UnitsCol] = []byte("500")
		rows[g] = row
	}
	return rows
}

// fieldsFor gives the plan's outputs the types PostgreSQL would.
func fieldsFor(plan *rewrite.Plan) []pgproto3.FieldDescription {
	fs := make([]pgproto3.FieldDescription, len(plan.Outputs))
	for i, o := range plan.Outputs {
		oid := uint32(oidInt4)
		if o.Agg != nil {
			oid = oidNumeric
			if o.Agg.Kind == rewrite.AggCount {
				oid = oidInt8
			}
		}
		fs[i] = pgproto3.FieldDescription{Name: []byte(fmt.Sprint("c", i)), DataTypeOID: oid, DataTypeSize: typeSize(oid), TypeModifier: -1}
	}
	return fs
}

var pipelineQueries = []struct{ name, sql string }{
	{"count", "SELECT COUNT(*) FROM events"},
	{"sum_group", "SELECT grp, SUM(val) FROM events GROUP BY grp"},
	{"avg_group", "SELECT grp, AVG(val) AS a FROM events WHERE val > 10 GROUP BY grp ORDER BY grp"},
}

// onePipeline is the proxy's whole CPU path of one fresh DP query.
func onePipeline(tb testing.TB, ss *session, sql string, analyze func(string) ([]*rewrite.Statement, error), ngroups int) {
	stmts, err := analyze(sql)
	if err != nil {
		tb.Fatal(err)
	}
	plan := stmts[0].Plan
	spec, err := ss.releaseSpec(plan)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := release(plan, spec, fieldsFor(plan), boundedRows(plan, ngroups))
	if err != nil {
		tb.Fatal(err)
	}
	r := ss.answerResult(a, false, budget.Spend{EpsilonLimit: 1000, DeltaLimit: 1e-3})
	ss.send(&pgproto3.RowDescription{Fields: r.fields})
	if _, err := ss.sendRows(r, nil, 0); err != nil {
		tb.Fatal(err)
	}
	ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := ss.backend.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// timed runs op b.N times and reports the p50 and p99 of one run.
func timed(b *testing.B, op func()) {
	d := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		op()
		d = append(d, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Nanoseconds()), "p99-ns")
}

func BenchmarkPipeline(b *testing.B) {
	srv := benchServer(b)
	for _, cached := range []bool{false, true} {
		analyze := srv.analyzer.Analyze
		mode := "uncached"
		if cached {
			analyze, mode = srv.analyze, "cached"
		}
		for _, q := range pipelineQueries {
			ngroups := 1
			if strings.Contains(q.sql, "GROUP BY") {
				ngroups = 16
			}
			b.Run(mode+"/"+q.name, func(b *testing.B) {
				ss := benchSession(srv, io.Discard, conf.Laplace, 1, 1e-7)
				timed(b, func() { onePipeline(b, ss, q.sql, analyze, ngroups) })
			})
		}
	}
}

// BenchmarkPassThroughAnalyze is the proxy's CPU on a pass-through query
// (pgbench's select-only statement) before it is forwarded.
func BenchmarkPassThroughAnalyze(b *testing.B) {
	srv := benchServer(b)
	sql := "SELECT abalance FROM pgbench_accounts WHERE aid = 4711;"
	for _, cached := range []bool{false, true} {
		analyze := srv.analyzer.Analyze
		mode := "uncached"
		if cached {
			analyze, mode = srv.analyze, "cached"
		}
		b.Run(mode, func(b *testing.B) {
			timed(b, func() {
				if _, err := analyze(sql); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	// A new constant every time (client-side parameters): the text cache
	// misses, and the comparison-constant cache (shapecache.go) fills the
	// new integer into the deparse of the first text analysed.
	b.Run("new-constant", func(b *testing.B) {
		i := 0
		timed(b, func() {
			i++
			if _, err := srv.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = " + strconv.Itoa(i) + ";"); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// TestParseCacheSharesAnalysis checks that the cache returns the analysis
// of the same text, never one of another text, and skips long texts.
func TestParseCacheSharesAnalysis(t *testing.T) {
	srv := benchServer(t)
	a1, err := srv.analyze("SELECT COUNT(*) FROM events")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := srv.analyze("SELECT COUNT(*) FROM events")
	if a1[0] != a2[0] {
		t.Error("the same text was analysed twice: the parse cache is not used")
	}
	b, _ := srv.analyze("SELECT COUNT(*) FROM events WHERE val > 1")
	if b[0] == a1[0] || b[0].Key == a1[0].Key {
		t.Error("a different text got the cached analysis of another")
	}
	if _, err := srv.analyze("SELECT * FROM events"); err == nil {
		t.Fatal("row-level query accepted")
	}
	if _, err := srv.analyze("SELECT * FROM events"); err == nil {
		t.Fatal("row-level query accepted the second time: a refusal was cached as a success")
	}
	long := "SELECT COUNT(*) FROM events WHERE val > 1" + strings.Repeat(" ", parseCacheMaxText)
	l1, _ := srv.analyze(long)
	l2, _ := srv.analyze(long)
	if l1[0] == l2[0] {
		t.Error("a text longer than parseCacheMaxText was cached")
	}
}

// Accuracy of the release path. For COUNT, SUM and AVG without GROUP BY
// (one group, each unit in it: L0 = 1), the exact bounded aggregates are
// fixed and released many times through releaseSpec and release — the code
// every DP answer goes through — and the observed RMSE is compared with the
// standard deviation the configured bounds call for:
//
//	COUNT: Δ = R                      σ_L = √2·Δ/ε, σ_G = SigmaForGaussian(1, Δ, ε, δ);
//	                                  plus 1/12 variance from rounding to bigint
//	SUM:   Δ = R·max(|L|, |U|)
//	AVG:   count (Δ = R) and centred sum (Δ = R·(U−L)/2) at ε/2, δ/2 each;
//	       by the delta method σ² ≈ σ_s²/n² + (S−mid·n)²·σ_c²/n⁴
//
// with R = max_rows_per_unit = 10, [L, U] = [0, 100], n = 10000 rows and a
// true mean of 40. The Laplace formula is computed here, independently of
// the noise package; the Gaussian σ is the Google library's analytic
// calibration. A wasted budget (noise larger than the bounds require)
// shows as a ratio above 1.
type accuracyRow struct {
	Agg       string  `json:"agg"`
	Mechanism string  `json:"mechanism"`
	Epsilon   float64 `json:"epsilon"`
	Runs      int     `json:"runs"`
	RMSE      float64 `json:"rmse"`
	Theory    float64 `json:"theory"`
	Ratio     float64 `json:"ratio"`
	Truth     float64 `json:"truth"`
}

const (
	accN     = 10000.0 // rows (and count)
	accMean  = 40.0
	accR     = 10.0
	accLower = 0.0
	accUpper = 100.0
	accDelta = 1e-7
)

func accuracyTheory(agg, mech string, eps float64) float64 {
	sd := func(sens, eps, delta float64) float64 {
		if mech == conf.Laplace {
			return math.Sqrt2 * sens / eps
		}
		return dpnoise.SigmaForGaussian(1, sens, eps, delta)
	}
	delta := accDelta
	if mech == conf.Laplace {
		delta = 0
	}
	switch agg {
	case "count":
		s := sd(accR, eps, delta)
		return math.Sqrt(s*s + 1.0/12)
	case "sum":
		return sd(accR*math.Max(math.Abs(accLower), math.Abs(accUpper)), eps, delta)
	default: // avg
		sc := sd(accR, eps/2, delta/2)
		ss := sd(accR*(accUpper-accLower)/2, eps/2, delta/2)
		cs := accN*accMean - (accLower+accUpper)/2*accN
		return math.Sqrt(ss*ss/(accN*accN) + cs*cs*sc*sc/math.Pow(accN, 4))
	}
}

// measureAccuracy releases one aggregate runs times and returns the row.
func measureAccuracy(tb testing.TB, srv *Server, agg, mech string, eps float64, runs int) accuracyRow {
	sql := map[string]string{"count": "SELECT COUNT(*) FROM events", "sum": "SELECT SUM(val) FROM events", "avg": "SELECT AVG(val) FROM events"}[agg]
	stmts, err := srv.analyze(sql)
	if err != nil {
		tb.Fatal(err)
	}
	plan := stmts[0].Plan
	if plan.MaxGroups != 1 || plan.PartitionSelection {
		tb.Fatalf("%s: L0 = %d, selection %v: want a scalar aggregate with L0 = 1", sql, plan.MaxGroups, plan.PartitionSelection)
	}
	delta := accDelta
	ss := benchSession(srv, io.Discard, mech, eps, delta)
	spec, err := ss.releaseSpec(plan)
	if err != nil {
		tb.Fatal(err)
	}
	rows := boundedRows(plan, 1)
	a := plan.Aggregates[0]
	if a.CountCol >= 0 {
		rows[0][a.CountCol] = []byte(strconv.Itoa(int(accN)))
	}
	if a.SumCol >= 0 {
		rows[0][a.SumCol] = []byte(strconv.Itoa(int(accN * accMean)))
	}
	truth := map[string]float64{"count": accN, "sum": accN * accMean, "avg": accMean}[agg]
	fields := fieldsFor(plan)
	var sq float64
	for range runs {
		ans, err := release(plan, spec, fields, rows)
		if err != nil {
			tb.Fatal(err)
		}
		v, err := strconv.ParseFloat(string(ans.rows[0][0]), 64)
		if err != nil {
			tb.Fatal(err)
		}
		sq += (v - truth) * (v - truth)
	}
	rmse := math.Sqrt(sq / float64(runs))
	th := accuracyTheory(agg, mech, eps)
	return accuracyRow{Agg: agg, Mechanism: mech, Epsilon: eps, Runs: runs, RMSE: rmse, Theory: th, Ratio: rmse / th, Truth: truth}
}

// TestReleaseAccuracyMatchesBounds checks that the release path adds
// exactly the noise the bounds call for, not more. 4000 runs give the
// RMSE a relative standard error of about 1.8% for Laplace (kurtosis 6)
// and 1.1% for Gaussian; a tolerance of 12% is over 6 standard errors, a
// false failure below 1e-9 per check.
//
// With DPPROXY_BENCH_ACCURACY=FILE it measures the whole grid (COUNT, SUM,
// AVG × ε ∈ {0.1, 1, 10} × both mechanisms, DPPROXY_BENCH_ACCURACY_RUNS
// runs each, default 20000) and writes it to FILE as JSON for bench/.
func TestReleaseAccuracyMatchesBounds(t *testing.T) {
	srv := benchServer(t)
	if out := os.Getenv("DPPROXY_BENCH_ACCURACY"); out != "" {
		runs := 20000
		if s := os.Getenv("DPPROXY_BENCH_ACCURACY_RUNS"); s != "" {
			var err error
			if runs, err = strconv.Atoi(s); err != nil || runs < 2 {
				t.Fatalf("DPPROXY_BENCH_ACCURACY_RUNS=%q: want an integer > 1", s)
			}
		}
		var rows []accuracyRow
		for _, agg := range []string{"count", "sum", "avg"} {
			for _, mech := range []string{conf.Laplace, conf.Gaussian} {
				for _, eps := range []float64{0.1, 1, 10} {
					rows = append(rows, measureAccuracy(t, srv, agg, mech, eps, runs))
				}
			}
		}
		data, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, c := range []struct {
		agg, mech string
		eps       float64
	}{
		{"count", conf.Laplace, 1}, {"sum", conf.Gaussian, 1}, {"avg", conf.Laplace, 0.1},
	} {
		r := measureAccuracy(t, srv, c.agg, c.mech, c.eps, 4000)
		t.Logf("%s %s ε=%v: RMSE %.4g, theory %.4g, ratio %.3f", c.agg, c.mech, c.eps, r.RMSE, r.Theory, r.Ratio)
		if math.Abs(r.Ratio-1) > 0.12 {
			t.Errorf("%s %s ε=%v: RMSE %.4g is %.2f× the %.4g the bounds call for", c.agg, c.mech, c.eps, r.RMSE, r.Ratio, r.Theory)
		}
	}
}
