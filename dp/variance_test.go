package dp

import (
	"math"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

func TestReleaseVarianceFeasible(t *testing.T) {
	a := &rewrite.Aggregate{Kind: rewrite.AggVariance, Lower: 0, Upper: 10, CountCol: 0, SumCol: 1, SumSqCol: 2, Sample: true, Stddev: true}
	// Degenerate parts (L0 = 0) add no noise: the exact formula.
	// values 0 and 10 (mid 5): count 2, centred sum 0, centred squares 50.
	v, err := (&variance{a: a}).Release(nil, nil, &Group{Vals: []float64{2, 0, 50}})
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Sqrt(50.0); math.Abs(v-want) > 1e-9 { // sample variance of {0, 10} is 50
		t.Errorf("stddev_samp = %v, want %v", v, want)
	}
	a.Sample, a.Stddev = false, false
	v, _ = (&variance{a: a}).Release(nil, nil, &Group{Vals: []float64{2, 0, 1e9}})
	if v != 25 {
		t.Errorf("var_pop with an absurd sum of squares = %v, want clamped to w² = 25", v)
	}
}

// TestVarianceChecksSumOfSquares: variance's sum of squares is one of its
// noised parts and is checked at construction, so a sensitivity that only
// the squares overflow is refused before the charge (the pre-charge check
// once listed the count and the sum by hand and forgot it).
func TestVarianceChecksSumOfSquares(t *testing.T) {
	a := &rewrite.Aggregate{Kind: rewrite.AggVariance, Func: "variance", Lower: 0, Upper: 1e155, CountCol: 0, SumCol: 1, SumSqCol: 2}
	for _, m := range []noise.Mechanism{noise.Laplace(), noise.Gaussian()} {
		share := sensitivity.Share{Epsilon: 1} // Laplace: pure ε-DP
		if m.Name() == "gaussian" {
			share.Delta = 1e-7
		}
		p := Params{L0: 1, MaxRows: 1, Share: share, Mech: m}
		if sensitivity.CenteredSum(1, 1, a.Lower, a.Upper).LInf >= math.MaxFloat64 {
			t.Fatal("the centred sum overflows too: the test no longer isolates the squares")
		}
		if _, err := newVariance(a, p); err == nil || !strings.Contains(err.Error(), "not finite") {
			t.Errorf("%s: a variance whose sum of squares has an infinite sensitivity: %v, want refused as not finite", m.Name(), err)
		}
		v, err := newVariance(&rewrite.Aggregate{Kind: rewrite.AggVariance, Func: "variance", Lower: 0, Upper: 10, SumSqCol: 2, SumCol: 1}, p)
		if err != nil {
			t.Fatalf("%s: variance over [0, 10]: %v", m.Name(), err)
		}
		if parts := v.Parts(); len(parts) != 3 || parts[2].Bound != sensitivity.CenteredSumOfSquares(1, 1, 0, 10) {
			t.Errorf("%s: variance parts %+v, want count, centred sum and sum of squares", m.Name(), parts)
		}
	}
}
