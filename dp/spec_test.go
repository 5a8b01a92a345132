package dp

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// shifted is a deterministic test sampler: it adds d to every value and
// otherwise behaves as its mechanism (checks, threshold, error bounds).
type shifted struct {
	noise.Mechanism
	d float64
}

func (s shifted) Add(x float64, l0 int64, lInf, eps, delta float64) (float64, error) {
	if _, err := s.Mechanism.StdDev(l0, lInf, eps, delta); err != nil {
		return 0, err
	}
	return x + s.d, nil
}

// onePlan is a plan with one aggregate of each kind and no GROUP BY; the
// result columns are units, then each aggregate's.
func onePlan() *rewrite.Plan {
	aggs := []*rewrite.Aggregate{
		{Kind: rewrite.AggCount, Func: "count", CountCol: 1, SumCol: -1, SumSqCol: -1, HistCol: -1},
		{Kind: rewrite.AggCountDistinctUnit, Func: "count", CountCol: 2, SumCol: -1, SumSqCol: -1, HistCol: -1},
		{Kind: rewrite.AggCountDistinct, Func: "count", CountCol: 3, SumCol: -1, SumSqCol: -1, HistCol: -1, MaxDistinct: 3},
		{Kind: rewrite.AggSum, Func: "sum", Lower: 0, Upper: 10, SumCol: 4, CountCol: -1, SumSqCol: -1, HistCol: -1},
		{Kind: rewrite.AggAvg, Func: "avg", Lower: 0, Upper: 10, CountCol: 5, SumCol: 6, SumSqCol: -1, HistCol: -1},
		{Kind: rewrite.AggVariance, Func: "var_pop", Lower: 0, Upper: 10, CountCol: 7, SumCol: 8, SumSqCol: 9, HistCol: -1},
		{Kind: rewrite.AggQuantile, Func: "percentile_cont", Lower: 0, Upper: 10, Quantile: 0.5, Buckets: 2, HistCol: 10, CountCol: -1, SumCol: -1, SumSqCol: -1},
	}
	p := &rewrite.Plan{Table: &conf.Table{Schema: "public", Name: "t", PrivacyUnit: "uid"}, Aggregates: aggs, MaxGroups: 1, MaxRows: 2, Limit: -1, SQL: "SELECT 1"}
	for _, a := range aggs {
		p.Outputs = append(p.Outputs, rewrite.Output{GroupKey: -1, Agg: a})
	}
	return p
}

func TestSpecOfEveryKind(t *testing.T) {
	plan := onePlan()
	p, err := NewPrivacy(conf.Gaussian, 1, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSpec(plan, p)
	if err != nil {
		t.Fatal(err)
	}
	// Seven aggregates, one pure: δ goes to the six others.
	per, _, total := sensitivity.SplitWith(1, 1e-6, 7, 1, false, true)
	if s.Total() != total {
		t.Errorf("total %+v, want %+v", s.Total(), total)
	}
	// count 1, two distinct counts 1 each, sum 1, avg 2, variance 3 parts.
	if n := len(s.Parts()); n != 9 {
		t.Errorf("%d noised parts, want 9", n)
	}
	want := []sensitivity.Bound{
		sensitivity.Count(1, 2), sensitivity.DistinctUnits(1), sensitivity.CountDistinct(1, 3), sensitivity.Sum(1, 2, 0, 10),
		sensitivity.Count(1, 2), sensitivity.CenteredSum(1, 2, 0, 10),
		sensitivity.Count(1, 2), sensitivity.CenteredSum(1, 2, 0, 10), sensitivity.CenteredSumOfSquares(1, 2, 0, 10),
	}
	for i, part := range s.Parts() {
		if part.Bound != want[i] {
			t.Errorf("part %d: %+v, want %+v", i, part.Bound, want[i])
		}
	}
	if got := s.Parts()[0].Share; got != per {
		t.Errorf("count's share %+v, want %+v", got, per)
	}
	if _, ok := s.Threshold(); ok {
		t.Error("a plan without GROUP BY has partition selection")
	}
	c, err := s.Cost()
	if err != nil || c.Epsilon != 1 || c.Delta != 1e-6 || !(c.Rho > 0) || c.DeltaApprox != 0 {
		t.Errorf("cost %+v, %v", c, err)
	}
}

// TestReleaseGivenRows releases fixed rows with a sampler that adds 1
// (and a fixed random source for the quantile).
func TestReleaseGivenRows(t *testing.T) {
	plan := onePlan()
	p, err := NewPrivacy(conf.Laplace, 1, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSpec(plan, p.WithSampler(func(m noise.Mechanism) noise.Mechanism { return shifted{m, 1} }))
	if err != nil {
		t.Fatal(err)
	}
	s.rnd = bytes.NewReader(bytes.Repeat([]byte{0xff}, 64))
	// units, count, distinct units, distinct values, sum, avg count and
	// sum, variance count, centred sum and squares, histogram ({bucket,
	// count} pairs: bucket 2 of 2 holds 4).
	row := [][]byte{[]byte("3"), []byte("4"), []byte("3"), []byte("2"), []byte("20.5"), []byte("4"), []byte("20"),
		[]byte("4"), []byte("0"), []byte("40"), []byte("{{2,4}}")}
	cols := make([]Column, len(plan.Outputs))
	for i := range cols {
		cols[i] = Column{Name: plan.Aggregates[i].Func, Type: 1700} // numeric
	}
	a, err := s.Release(cols, [][][]byte{row})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range a.Rows[0] {
		got = append(got, string(v))
	}
	// count 4+1; sum 20.5+1; avg 5 + (20−5·4+1)/(4+1) = 5.2; var_pop
	// from n = 5, S = 1, Q = 40 − 4·25/2 + 1 → E = (−9 + 62.5)/5 = 10.7,
	// mean 0.2: 10.66; the quantile lands in the upper bucket [5, 10].
	want := []string{"5", "4", "3", "21.5", "5.2", "10.66"}
	if strings.Join(got[:6], " ") != strings.Join(want, " ") {
		t.Errorf("released %v, want %v then the quantile", got, want)
	}
	if q, err := strconv.ParseFloat(got[6], 64); err != nil || q < 5 || q > 10 {
		t.Errorf("quantile %v, want in [5, 10]", q)
	}
	if a.Charged != s.Total() || !strings.HasPrefix(a.Bounds, "count: ±") || !strings.Contains(a.Bounds, "percentile_cont: exponential mechanism over 2 buckets") {
		t.Errorf("answer charged %+v, bounds %q", a.Charged, a.Bounds)
	}
}

func TestNewPrivacyRefuses(t *testing.T) {
	for _, c := range []struct {
		mech       string
		eps, delta float64
	}{{"uniform", 1, 0}, {"laplace", 0, 0}, {"laplace", -1, 0}, {"gaussian", 1, 1}} {
		if _, err := NewPrivacy(c.mech, c.eps, c.delta); err == nil {
			t.Errorf("NewPrivacy(%q, %v, %v) accepted", c.mech, c.eps, c.delta)
		}
	}
}

func TestUnknownKindRefused(t *testing.T) {
	plan := &rewrite.Plan{Aggregates: []*rewrite.Aggregate{{Kind: 99}}, MaxGroups: 1, MaxRows: 1}
	p, _ := NewPrivacy(conf.Laplace, 1, 0)
	if _, err := NewSpec(plan, p); err == nil || err.(*pgerr.Error).Code != pgerr.InternalError {
		t.Errorf("NewSpec with an unknown kind: %v, want XX000", err)
	}
}

// TestExplainBudgetAdvanced: under advanced accounting EXPLAIN DP does not
// subtract the query's ε from what is left (the filter is not additive).
func TestExplainBudgetAdvanced(t *testing.T) {
	p, err := NewPrivacy(conf.Laplace, 0.5, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSpec(onePlan(), p)
	if err != nil {
		t.Fatal(err)
	}
	lines := s.ExplainBudget(Budget{EpsilonLeft: 3, DeltaLeft: 1e-6, Advanced: true})
	if len(lines) != 1 || !strings.Contains(lines[0], "advanced accounting") || !strings.Contains(lines[0], "ε=3 ") || !strings.Contains(lines[0], "ε²=0.25") {
		t.Errorf("ExplainBudget = %q", lines)
	}
}
