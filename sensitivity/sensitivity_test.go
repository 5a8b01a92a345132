package sensitivity

import (
	"math"
	"testing"
)

func TestBounds(t *testing.T) {
	tests := []struct {
		name   string
		got    Bound
		want   Bound
		l1, l2 float64
	}{
		{"count no group by", Count(1, 8), Bound{1, 8}, 8, 8},
		{"count grouped", Count(4, 8), Bound{4, 8}, 32, 16},
		{"distinct units", DistinctUnits(4), Bound{4, 1}, 4, 2},
		{"distinct units no group by", DistinctUnits(1), Bound{1, 1}, 1, 1},
		{"sum positive range", Sum(4, 8, 0, 500), Bound{4, 4000}, 16000, 8000},
		{"sum negative dominates", Sum(1, 2, -30, 10), Bound{1, 60}, 60, 60},
		{"sum negative range", Sum(9, 1, -7, -3), Bound{9, 7}, 63, 21},
		{"centred sum", CenteredSum(4, 8, 0, 500), Bound{4, 2000}, 8000, 4000},
		{"centred sum far from zero", CenteredSum(1, 8, 1000, 1010), Bound{1, 40}, 40, 40},
		{"centred sum across zero", CenteredSum(1, 3, -10, 30), Bound{1, 60}, 60, 60},
		{"centred sum degenerate", CenteredSum(1, 3, 5, 5), Bound{1, 0}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %+v, want %+v", tt.got, tt.want)
			}
			if got := tt.got.L1(); got != tt.l1 {
				t.Errorf("%+v.L1() = %v, want %v", tt.got, got, tt.l1)
			}
			if got := tt.got.L2(); math.Abs(got-tt.l2) > 1e-12*tt.l2 {
				t.Errorf("%+v.L2() = %v, want %v", tt.got, got, tt.l2)
			}
		})
	}
}

func TestMaxGroups(t *testing.T) {
	tests := []struct {
		grouped          bool
		perUnit, publics int64
		want             int64
	}{
		{false, 4, 0, 1},
		{false, 4, 10, 1},
		{true, 4, 0, 4},
		{true, 4, -1, 4},
		{true, 4, 2, 2},
		{true, 4, 4, 4},
		{true, 4, 100, 4},
	}
	for _, tt := range tests {
		if got := MaxGroups(tt.grouped, tt.perUnit, tt.publics); got != tt.want {
			t.Errorf("MaxGroups(%v, %d, %d) = %d, want %d", tt.grouped, tt.perUnit, tt.publics, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name          string
		eps, delta    float64
		k             int
		sel, gaussian bool
		perAgg, selS  Share
		total         Share
	}{
		{"laplace one agg no selection", 1, 1e-6, 1, false, false, Share{1, 0}, Share{}, Share{1, 0}},
		{"laplace three aggs no selection", 3, 1e-6, 3, false, false, Share{1, 0}, Share{}, Share{3, 0}},
		{"laplace one agg selection", 1, 1e-6, 1, true, false, Share{0.5, 0}, Share{0.5, 1e-6}, Share{1, 1e-6}},
		{"laplace three aggs selection", 2, 1e-6, 3, true, false, Share{0.5, 0}, Share{0.5, 1e-6}, Share{2, 1e-6}},
		{"laplace selection only", 1, 1e-6, 0, true, false, Share{}, Share{1, 1e-6}, Share{1, 1e-6}},
		{"gaussian one agg no selection", 1, 1e-6, 1, false, true, Share{1, 1e-6}, Share{}, Share{1, 1e-6}},
		{"gaussian four aggs no selection", 2, 4e-6, 4, false, true, Share{0.5, 1e-6}, Share{}, Share{2, 4e-6}},
		{"gaussian one agg selection", 1, 2e-6, 1, true, true, Share{0.5, 1e-6}, Share{0.5, 1e-6}, Share{1, 2e-6}},
		{"gaussian three aggs selection", 2, 4e-6, 3, true, true, Share{0.5, 1e-6}, Share{0.5, 1e-6}, Share{2, 4e-6}},
		{"gaussian selection only", 1, 1e-6, 0, true, true, Share{}, Share{1, 1e-6}, Share{1, 1e-6}},
		{"nothing to release", 1, 1e-6, 0, false, true, Share{}, Share{}, Share{}},
		{"negative aggregate count", 1, 1e-6, -2, false, false, Share{}, Share{}, Share{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perAgg, sel, total := SplitWith(tt.eps, tt.delta, tt.k, 0, tt.sel, tt.gaussian)
			if !near(perAgg, tt.perAgg) || !near(sel, tt.selS) || !near(total, tt.total) {
				t.Errorf("SplitWith(%v, %v, %d, 0, %v, %v) = %+v, %+v, %+v, want %+v, %+v, %+v",
					tt.eps, tt.delta, tt.k, tt.sel, tt.gaussian, perAgg, sel, total, tt.perAgg, tt.selS, tt.total)
			}
			// Sequential composition: what the mechanisms consume never
			// exceeds the charge.
			n := max(tt.k, 0)
			var sumEps, sumDelta float64
			for range n {
				sumEps += perAgg.Epsilon
				sumDelta += perAgg.Delta
			}
			sumEps += sel.Epsilon
			sumDelta += sel.Delta
			if sumEps > total.Epsilon*(1+1e-15) || sumDelta > total.Delta*(1+1e-15) {
				t.Errorf("shares add up to (%v, %v), more than the charge %+v", sumEps, sumDelta, total)
			}
		})
	}
}

// TestSplitNeverOvercharges checks the exact-arithmetic guarantee of
// divideDown over many divisions that do not come out even.
func TestSplitNeverOvercharges(t *testing.T) {
	for _, eps := range []float64{0.1, 0.3, 1, 1.1, 2.0 / 3, 7e-5, 1e-7, 3.3} {
		for n := 1; n <= 50; n++ {
			q := divideDown(eps, n)
			if math.FMA(q, float64(n), -eps) > 0 {
				t.Errorf("divideDown(%v, %d) = %v: %d shares exceed the total", eps, n, q, n)
			}
			if q < eps/float64(n)*(1-1e-15) {
				t.Errorf("divideDown(%v, %d) = %v, want about %v", eps, n, q, eps/float64(n))
			}
		}
	}
}

func near(a, b Share) bool {
	close := func(x, y float64) bool { return math.Abs(x-y) <= 1e-15*math.Max(math.Abs(x), math.Abs(y)) }
	return close(a.Epsilon, b.Epsilon) && close(a.Delta, b.Delta)
}

func TestBreadthBounds(t *testing.T) {
	if b := CountDistinct(4, 8); b.L0 != 4 || b.LInf != 8 {
		t.Errorf("CountDistinct(4, 8) = %+v", b)
	}
	// values in [0, 10]: w = 5, centred squares in [0, 25], centred on 12.5.
	if b := CenteredSumOfSquares(1, 8, 0, 10); b.LInf != 8*12.5 {
		t.Errorf("CenteredSumOfSquares = %+v, want L∞ 100", b)
	}
	if u := QuantileUtility(8, 0.5); u != 4 {
		t.Errorf("QuantileUtility(8, 0.5) = %v, want 4", u)
	}
	if u := QuantileUtility(8, 0.9); math.Abs(u-7.2) > 1e-12 {
		t.Errorf("QuantileUtility(8, 0.9) = %v, want 7.2", u)
	}
	// Gaussian with one quantile (pure) and one sum: δ goes to the sum only.
	per, _, total := SplitWith(1, 1e-6, 2, 1, false, true)
	if per.Delta != 1e-6 || total.Delta != 1e-6 || per.Epsilon != 0.5 {
		t.Errorf("SplitWith = %+v total %+v", per, total)
	}
	// Only pure aggregates under Gaussian: no δ charged.
	if _, _, total := SplitWith(1, 1e-6, 1, 1, false, true); total.Delta != 0 {
		t.Errorf("a quantile alone charged δ=%v", total.Delta)
	}
}
