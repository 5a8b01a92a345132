package dp

import (
	"math"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/noise"
)

func TestAutoBucketEdges(t *testing.T) {
	for _, tc := range []struct {
		id     int
		lo, hi float64
	}{
		{0, 0, 0}, {1, 0, 1}, {2, 1, 2}, {11, 512, 1024}, {64, math.Ldexp(1, 62), math.Ldexp(1, 63)},
		{-1, -1, 0}, {-2, -2, -1}, {-11, -1024, -512}, {-64, -math.Ldexp(1, 63), -math.Ldexp(1, 62)},
	} {
		lo, hi := AutoBucketEdges(tc.id)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("AutoBucketEdges(%d) = [%v, %v], want [%v, %v]", tc.id, lo, hi, tc.lo, tc.hi)
		}
	}
}

// hist returns a histogram with the given counts at bucket ids.
func hist(counts map[int]float64) []float64 {
	h := make([]float64, AutoBuckets)
	for id, c := range counts {
		h[id+AutoBucketsPerSign] = c
	}
	return h
}

func TestChooseAutoBounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts map[int]float64
		lo, hi float64
		found  bool
	}{
		{"values in [0, 1000]", map[int]float64{8: 20, 9: 30, 10: 50, 11: 60, 3: 2}, 0, 1024, true},
		{"a lone outlier below the threshold is left out", map[int]float64{11: 60, 40: 9}, 0, 1024, true},
		{"negative and positive", map[int]float64{-5: 11, -2: 30, 4: 40}, -16, 8, true},
		{"negative only: widened up to 0", map[int]float64{-7: 50, -6: 50}, -64, 0, true},
		{"positive far from 0: widened down to 0", map[int]float64{30: 50}, 0, math.Ldexp(1, 29), true},
		{"zeros only", map[int]float64{0: 100}, 0, 0, true},
		{"the largest bucket", map[int]float64{64: 100}, 0, math.Ldexp(1, 63), true},
		{"nothing passes", map[int]float64{3: 10, 4: 10}, 0, 0, false},
		{"exactly the threshold does not pass", map[int]float64{3: 10.5}, 0, 0, false},
	} {
		lo, hi, found := ChooseAutoBounds(hist(tc.counts), 10.5)
		if lo != tc.lo || hi != tc.hi || found != tc.found {
			t.Errorf("%s: ChooseAutoBounds = [%v, %v] %v, want [%v, %v] %v", tc.name, lo, hi, found, tc.lo, tc.hi, tc.found)
		}
	}
}

func TestAutoThreshold(t *testing.T) {
	for _, b := range []float64{1, 8, 80} {
		th := AutoThreshold(b, AutoBuckets, AutoBoundsSuccess)
		// The probability that none of the buckets' Laplace(b) noise
		// exceeds th is the success probability.
		p := math.Pow(1-math.Exp(-th/b)/2, AutoBuckets)
		if math.Abs(p-AutoBoundsSuccess) > 1e-13 {
			t.Errorf("b=%v: threshold %v gives success probability %v, want %v", b, th, p, AutoBoundsSuccess)
		}
		if want := 24.89 * b; math.Abs(th-want) > 0.01*b {
			t.Errorf("b=%v: threshold %v, want about %v", b, th, want)
		}
	}
}

func TestApproxBoundsCalibration(t *testing.T) {
	// L0 = 2 groups, R = 8 rows: a unit's counts add up to at most 16.
	a, err := NewApproxBounds("amount", 0.1, 2, 8, noise.Laplace())
	if err != nil {
		t.Fatal(err)
	}
	if a.Scale() != 160 {
		t.Errorf("scale = %v, want L0·R/ε = 160", a.Scale())
	}
	if want := AutoThreshold(160, AutoBuckets, AutoBoundsSuccess); a.Threshold() != want {
		t.Errorf("threshold = %v, want %v", a.Threshold(), want)
	}
	// The noise has scale 160: the mean |noise| of a Laplace is its
	// scale; over 20,000 draws its standard error is 0.7%, so 5% is
	// over 7 standard errors (false failure below 1e-11).
	sum := 0.0
	const n = 20000
	for i := 0; i < n; i++ {
		r, err := a.mech.Add(0, 1, a.l1, a.eps, 0)
		if err != nil {
			t.Fatal(err)
		}
		sum += math.Abs(r)
	}
	if m := sum / n; math.Abs(m-160)/160 > 0.05 {
		t.Errorf("mean |noise| = %v, want about 160", m)
	}
	// An empty histogram passes no bucket (false failure 1e-9).
	r, err := a.Choose(make([]float64, AutoBuckets))
	if err != nil || r.Found {
		t.Errorf("empty histogram: %+v, %v; want nothing found", r, err)
	}
	// 100,000 values in (256, 1024] and 50,000 in (0, 256]: far above the
	// threshold (about 4,000), so the bounds are [0, 1024] (false failure
	// far below 1e-9).
	r, err = a.Choose(hist(map[int]float64{1: 10000, 5: 10000, 8: 30000, 10: 50000, 11: 50000}))
	if err != nil || r != (AutoResult{Lower: 0, Upper: 1024, Found: true}) {
		t.Errorf("data in [0, 1024]: %+v, %v", r, err)
	}
	if _, err := NewApproxBounds("amount", 0.1, 2, 8, noise.Gaussian()); err == nil {
		t.Error("NewApproxBounds accepted a Gaussian sampler")
	}
	if _, err := NewApproxBounds("amount", math.NaN(), 2, 8, noise.Laplace()); err == nil {
		t.Error("NewApproxBounds accepted ε = NaN")
	}
}

func TestApproxBoundsCost(t *testing.T) {
	a, err := NewApproxBounds("amount", 0.25, 1, 4, noise.Laplace())
	if err != nil {
		t.Fatal(err)
	}
	main := Cost{Epsilon: 0.75, Delta: 1e-6, Rho: 0.2, Releases: []budget.Release{{Mechanism: budget.MechGaussian}}}
	c := a.AddCost(main)
	if c.Epsilon != 1 || c.Delta != 1e-6 || c.Rho != 0.2+0.25*0.25/2 || len(c.Releases) != 2 || len(main.Releases) != 1 {
		t.Fatalf("AddCost = %+v", c)
	}
	if r := c.Releases[1]; r != (budget.Release{Mechanism: budget.MechLaplace, L0: 1, Sensitivity: 4, Scale: 16, Epsilon: 0.25}) {
		t.Errorf("release = %+v", r)
	}
}

func TestParseAutoHistogram(t *testing.T) {
	rows := make([][][]byte, AutoBuckets)
	for i := range rows {
		rows[i] = [][]byte{[]byte(strconv.Itoa(i - AutoBucketsPerSign)), []byte("0")}
	}
	rows[75] = [][]byte{[]byte("11"), []byte("12.5000")}
	h, err := ParseAutoHistogram(rows)
	if err != nil || h[75] != 12.5 || h[0] != 0 {
		t.Fatalf("ParseAutoHistogram = %v, %v", h, err)
	}
	if _, err := ParseAutoHistogram(rows[1:]); err == nil {
		t.Error("accepted 128 rows")
	}
	rows[3][0] = []byte("7")
	if _, err := ParseAutoHistogram(rows); err == nil {
		t.Error("accepted rows out of order")
	}
}
