package dp

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"math"
	"testing"

	"github.com/google/differential-privacy/go/v3/dpagg"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/noise/noisetest"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// recurrence is p(n) of the optimal selection computed step by step from
// its definition (Desfontaines et al., Theorem 1), not the closed form.
func recurrence(n int, l0 int64, eps, delta float64) []float64 {
	pe, pd := eps/float64(l0), delta/float64(l0)
	p := make([]float64, n+1)
	for i := 1; i <= n; i++ {
		p[i] = math.Min(math.Min(math.Exp(pe)*p[i-1]+pd, 1-math.Exp(-pe)*(1-p[i-1]-pd)), 1)
	}
	return p
}

var selParams = []struct {
	l0         int64
	eps, delta float64
}{
	{1, 1, 1e-5}, {3, 1, 1e-5}, {2, 0.5, 1e-7}, {1, 0.1, 1e-6}, {3, 2, 1e-3}, {4, 1, 1e-5}, {8, 0.3, 1e-9},
}

// TestOptimalClosedFormIsTheRecurrence: the closed form equals the
// recurrence that defines the optimal selection, to a relative 1e-9.
func TestOptimalClosedFormIsTheRecurrence(t *testing.T) {
	for _, c := range selParams {
		want := recurrence(3000, c.l0, c.eps, c.delta)
		for n := 0; n <= 3000; n++ {
			got := optimalKeepProbability(float64(n), c.l0, c.eps, c.delta)
			if math.Abs(got-want[n]) > 1e-9*want[n]+1e-15 {
				t.Fatalf("L0=%d ε=%v δ=%v: p(%d) = %v, recurrence %v", c.l0, c.eps, c.delta, n, got, want[n])
			}
		}
	}
}

// TestOptimalIsDP checks the privacy constraints between neighbours
// directly: a group of n units and one of n−1 (one unit removed) are
// kept and dropped with probabilities within the per-group
// (ε/L0, δ/L0)-DP bounds, and a group of one unit is kept with
// probability at most δ/L0 (so one person's L0 groups appear with
// probability at most δ).
func TestOptimalIsDP(t *testing.T) {
	for _, c := range selParams {
		pe, pd := c.eps/float64(c.l0), c.delta/float64(c.l0)
		if p1 := optimalKeepProbability(1, c.l0, c.eps, c.delta); p1 > pd {
			t.Errorf("L0=%d ε=%v δ=%v: a group of one unit kept with probability %v > δ/L0 = %v", c.l0, c.eps, c.delta, p1, pd)
		}
		// Rounding: 1 − p loses up to 2^-53 absolutely when p is near 1.
		slack := 1e-15
		for n := 1; n <= 5000; n++ {
			p := optimalKeepProbability(float64(n), c.l0, c.eps, c.delta)
			q := optimalKeepProbability(float64(n-1), c.l0, c.eps, c.delta)
			if p > (math.Exp(pe)*q+pd)*(1+1e-12)+slack || (1-q) > math.Exp(pe)*(1-p)+pd+slack || q > p {
				t.Fatalf("L0=%d ε=%v δ=%v: p(%d) = %v, p(%d) = %v break (ε/L0, δ/L0)-DP or monotonicity", c.l0, c.eps, c.delta, n, p, n-1, q)
			}
		}
	}
}

// TestOptimalMatchesLibrary: the hard threshold (units from which every
// group is kept) equals dpagg.PreAggSelectPartition's for L0 ≤ 3, where
// the library uses this selection.
func TestOptimalMatchesLibrary(t *testing.T) {
	for _, c := range selParams {
		if c.l0 > 3 {
			continue
		}
		s, err := dpagg.NewPreAggSelectPartition(&dpagg.PreAggSelectPartitionOptions{Epsilon: c.eps, Delta: c.delta, MaxPartitionsContributed: c.l0})
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.GetHardThreshold()
		if err != nil {
			t.Fatal(err)
		}
		got := smallestUnits(func(n float64) float64 { return optimalKeepProbability(n, c.l0, c.eps, c.delta) }, 1)
		if got != float64(want) {
			t.Errorf("L0=%d ε=%v δ=%v: hard threshold %v, library %d", c.l0, c.eps, c.delta, got, want)
		}
	}
}

// within reports whether hits/n is within 5 standard deviations of p
// (a false failure about once in 3.5 million per check).
func within(hits, n int, p float64) bool {
	return math.Abs(float64(hits)/float64(n)-p) <= 5*math.Sqrt(p*(1-p)/float64(n))+1e-9
}

// TestSelectionSimulated draws keep() for both methods at a few unit
// counts near the 50% point and compares the frequencies with the closed
// forms; a threshold or probability off by one unit there moves the
// frequency by more than 0.1, far beyond the tolerance (±0.016 at 20,000
// draws). The library's own ShouldKeepPartition is drawn too, against the
// same closed form.
func TestSelectionSimulated(t *testing.T) {
	if testing.Short() {
		t.Skip("draws 600,000 decisions")
	}
	const draws = 20000
	for _, c := range []struct {
		mech  noise.Mechanism
		l0    int64
		units []float64
	}{
		{noise.Laplace(), 1, []float64{10, 12, 14}},
		{noise.Laplace(), 3, []float64{30, 36, 40}},
		{noise.Gaussian(), 8, []float64{45, 54, 60}},
	} {
		gaussian := c.mech.Name() == conf.Gaussian
		sel, err := newSelection(c.mech, c.l0, sensitivity.Share{Epsilon: 1, Delta: 1e-5}, gaussian)
		if err != nil {
			t.Fatal(err)
		}
		for _, method := range []selMethod{selThreshold, selOptimal} {
			s := *sel
			s.method = method
			for _, n := range c.units {
				p := s.probability(gaussian, n)
				hits := 0
				for range draws {
					ok, err := s.keep(c.mech, rand.Reader, n)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						hits++
					}
				}
				if !within(hits, draws, p) {
					t.Errorf("%s L0=%d method %d: %v units kept %d/%d times, closed form %.4f", c.mech.Name(), c.l0, method, n, hits, draws, p)
				}
				if method != selOptimal || c.l0 > 3 {
					continue
				}
				hits = 0
				for range draws {
					ps, err := dpagg.NewPreAggSelectPartition(&dpagg.PreAggSelectPartitionOptions{Epsilon: 1, Delta: 1e-5, MaxPartitionsContributed: c.l0})
					if err != nil {
						t.Fatal(err)
					}
					if err := ps.IncrementBy(int64(n)); err != nil {
						t.Fatal(err)
					}
					if ok, err := ps.ShouldKeepPartition(); err != nil {
						t.Fatal(err)
					} else if ok {
						hits++
					}
				}
				if !within(hits, draws, p) {
					t.Errorf("library L0=%d: %v units kept %d/%d times, our closed form %.4f", c.l0, n, hits, draws, p)
				}
			}
		}
	}
}

// fixedBits is a random source that returns v (its top 53 bits) forever.
func fixedBits(v uint64) *bytes.Reader {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v<<11)
	return bytes.NewReader(bytes.Repeat(b[:], 16))
}

// TestOneUnitAtMostDelta: the draw for a group of one unit succeeds for
// exactly ⌊δ/L0·2^53⌋ of the 2^53 random values (never more than δ/L0):
// the largest value that keeps it and the next one that does not.
func TestOneUnitAtMostDelta(t *testing.T) {
	for _, c := range selParams {
		sel, err := newSelection(noise.Laplace(), c.l0, sensitivity.Share{Epsilon: c.eps, Delta: c.delta}, false)
		if err != nil {
			t.Fatal(err)
		}
		if sel.method != selOptimal {
			t.Fatalf("L0=%d ε=%v δ=%v: Laplace thresholding chosen over the optimal selection", c.l0, c.eps, c.delta)
		}
		cut := uint64(math.Floor(c.delta / float64(c.l0) * (1 << 53)))
		if cut == 0 || float64(cut)/(1<<53) > c.delta/float64(c.l0) {
			t.Fatalf("bad cut %d", cut)
		}
		if ok, err := sel.keep(noise.Laplace(), fixedBits(cut-1), 1); err != nil || !ok {
			t.Errorf("L0=%d δ=%v: value %d below the cut dropped (%v)", c.l0, c.delta, cut-1, err)
		}
		if ok, err := sel.keep(noise.Laplace(), fixedBits(cut), 1); err != nil || ok {
			t.Errorf("L0=%d δ=%v: value %d at the cut kept (%v)", c.l0, c.delta, cut, err)
		}
		// Thresholding's per-group tail is 1−(1−δ)^(1/L0), a hair above δ/L0
		// (to the library's precision in its threshold: 1e-6 relative).
		if p := sel.thresholdProbability(false, 1); p > -math.Expm1(math.Log1p(-c.delta)/float64(c.l0))*(1+1e-6) {
			t.Errorf("L0=%d δ=%v: Laplace thresholding keeps one unit with probability %v", c.l0, c.delta, p)
		}
	}
}

// TestSelectionChoice: the optimal selection releases more under Laplace
// at every L0 (and at every n, except by the relative δ/2 by which its
// δ/L0 falls below thresholding's per-group 1−(1−δ)^(1/L0)), Gaussian thresholding wins at
// large L0, and a sampler that releases every partition (noisetest.Exact,
// the semantic test's hook) keeps the threshold, so that it still
// releases every group.
func TestSelectionChoice(t *testing.T) {
	for _, c := range []struct {
		mech noise.Mechanism
		l0   int64
		want selMethod
	}{
		{noise.Laplace(), 1, selOptimal}, {noise.Laplace(), 3, selOptimal}, {noise.Laplace(), 16, selOptimal},
		{noise.Gaussian(), 1, selOptimal}, {noise.Gaussian(), 8, selThreshold},
		{noisetest.Exact(noise.Laplace()), 1, selThreshold}, {noisetest.Exact(noise.Gaussian()), 1, selThreshold},
	} {
		gaussian := c.mech.Name() == conf.Gaussian
		delta := 1e-5
		sel, err := newSelection(c.mech, c.l0, sensitivity.Share{Epsilon: 1, Delta: delta}, gaussian)
		if err != nil {
			t.Fatal(err)
		}
		if sel.method != c.want {
			t.Errorf("%s L0=%d: method %d (k50 threshold %v, optimal %v), want %d", c.mech.Name(), c.l0, sel.method, sel.k50Threshold, sel.k50Optimal, c.want)
		}
		if c.mech.Name() == conf.Laplace && c.want == selOptimal {
			for n := 1.0; n <= 200*float64(c.l0); n++ {
				if o, th := optimalKeepProbability(n, c.l0, 1, delta), sel.thresholdProbability(false, n); o < th*(1-delta) {
					t.Errorf("Laplace L0=%d: at %v units the optimal selection keeps with %v < thresholding's %v", c.l0, n, o, th)
				}
			}
		}
	}
	// The numbers: thresholds 11.8 (L0 = 1) and 36.8 (L0 = 3).
	for l0, want := range map[int64]float64{1: 11.8, 3: 36.8} {
		sel, _ := newSelection(noise.Laplace(), l0, sensitivity.Share{Epsilon: 1, Delta: 1e-5}, false)
		if math.Abs(sel.threshold-want) > 0.05 {
			t.Errorf("Laplace threshold at L0=%d: %v, want %v", l0, sel.threshold, want)
		}
	}
}

// TestOptimalSelectionCost: the optimal selection has no noised part and
// costs what Laplace thresholding costs: (ε, δ) of its share, and under
// zCDP ρ = ε²/(2·L0) with all of its δ approximate.
func TestOptimalSelectionCost(t *testing.T) {
	plan := &rewrite.Plan{Table: &conf.Table{Schema: "public", Name: "t", PrivacyUnit: "uid"}, MaxGroups: 3, MaxRows: 1, Limit: -1,
		PartitionSelection: true, GroupKeys: []rewrite.GroupKey{{ResultCol: 0}}, UnitsCol: 1, SQL: "SELECT 1",
		Outputs: []rewrite.Output{{GroupKey: 0}}}
	p, err := NewPrivacy(conf.Laplace, 1, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSpec(plan, p)
	if err != nil {
		t.Fatal(err)
	}
	if s.sel.method != selOptimal || len(s.Parts()) != 0 {
		t.Fatalf("method %d, %d parts; want the optimal selection and no noised part", s.sel.method, len(s.Parts()))
	}
	c, err := s.Cost()
	if err != nil {
		t.Fatal(err)
	}
	if c.Epsilon != 1 || c.Delta != 1e-5 || math.Abs(c.Rho-1.0/6) > 1e-12 || c.DeltaApprox != 1e-5 {
		t.Errorf("cost %+v, want ε 1 δ 1e-5 ρ 1/6 δ_approx 1e-5", c)
	}
	if th, ok := s.Threshold(); !ok || th != s.sel.hard {
		t.Errorf("Threshold() = %v, %v; want the hard threshold %v", th, ok, s.sel.hard)
	}
	// Release with the largest random value: a group at the hard
	// threshold is kept, one a unit below it is not.
	s.rnd = fixedBits(1<<53 - 1)
	rows := [][][]byte{{[]byte("a"), []byte(formatNum(s.sel.hard - 1))}, {[]byte("b"), []byte(formatNum(s.sel.hard))}}
	a, err := s.Release([]Column{{Name: "k", Type: 25}}, rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Rows) != 1 || string(a.Rows[0][0]) != "b" {
		t.Errorf("released %q, want only group b", a.Rows)
	}
}
