package dp

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestDerivedAvgIsSumOverCount: AVG derived from SUM and COUNT is the
// released sum over the released (rounded) count, after the pair is
// moved into lower·COUNT ≤ SUM ≤ upper·COUNT; NULL when the count is 0.
func TestDerivedAvgIsSumOverCount(t *testing.T) {
	for _, c := range []struct {
		name                  string
		count, sum, shift     float64
		wantCount, wantAvgMax float64
	}{
		{"inside", 10, 500, 0.3, 10, 100},
		{"sum above upper·count", 10, 1500, 0, -1, 100},
		{"count noised to 0", 0.2, 1, -0.6, 0, math.NaN()},
	} {
		cnt, sm := agg(rewrite.AggCount, "count", 0, 0, 0, -1, -1), agg(rewrite.AggSum, "sum", 0, 100, -1, 1, -1)
		av := agg(rewrite.AggAvg, "avg", 0, 100, -1, -1, -1)
		av.FromSum, av.FromCount = sm, cnt
		s := spec(t, conf.Laplace, 1, cnt, sm, av)
		if parts := s.Parts(); len(parts) != 2 || parts[0].Share.Epsilon != 0.5 {
			t.Fatalf("%s: parts %+v, want a count and a sum at ε/2 each", c.name, parts)
		}
		s.mech = shifted{noise.Laplace(), c.shift}
		v, err := s.noisyRow(&Group{Vals: []float64{c.count, c.sum}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] != math.Round(v[0]) || v[1] < 0 || v[1] > 100*v[0] {
			t.Errorf("%s: count %v, sum %v: not a consistent pair", c.name, v[0], v[1])
		}
		if c.wantCount >= 0 && v[0] != c.wantCount {
			t.Errorf("%s: count %v, want %v", c.name, v[0], c.wantCount)
		}
		if v[0] == 0 {
			if !math.IsNaN(v[2]) {
				t.Errorf("%s: avg %v with a count of 0, want NULL", c.name, v[2])
			}
			continue
		}
		if v[2] != v[1]/v[0] || v[2] > c.wantAvgMax {
			t.Errorf("%s: avg %v, want sum/count = %v ≤ %v", c.name, v[2], v[1]/v[0], c.wantAvgMax)
		}
	}
}

// TestProjectRatio: a pair outside the cone moves to its nearest edge in
// the noise-weighted norm, never farther from an exact pair inside it.
func TestProjectRatio(t *testing.T) {
	s, c := projectRatio(1500, 10, 0, 100, 1, 1) // sum noise equal to the count's: both move
	if math.Abs(s-100*c) > 1e-9 || c <= 10 || s >= 1500 {
		t.Errorf("projectRatio(1500, 10) = %v, %v, want on s = 100·c between", s, c)
	}
	s, c = projectRatio(1000, 10, 0, 100, 1e6, 1) // sum far noisier: it moves, the count hardly
	if math.Abs(c-10) > 0.01 || math.Abs(s-100*c) > 1e-6 {
		t.Errorf("projectRatio with a noisy sum = %v, %v, want ≈ 1000, 10", s, c)
	}
	if s, c = projectRatio(-5, 3, 0, 100, 1, 1); s != 0 || c != 3 {
		t.Errorf("projectRatio(−5, 3) = %v, %v, want 0, 3", s, c)
	}
	if s, c = projectRatio(50, 3, 0, 100, 1, 1); s != 50 || c != 3 {
		t.Errorf("projectRatio inside = %v, %v, want unchanged", s, c)
	}
}

// TestCountStarOfSelectedGroupAtLeastOne: COUNT(*) without FILTER of a
// group released by partition selection is at least 1; a FILTERed count,
// or a count without selection, is floored at 0 only.
func TestCountStarOfSelectedGroupAtLeastOne(t *testing.T) {
	for _, c := range []struct {
		name         string
		allRows, sel bool
		want         float64
	}{
		{"count(*) selected", true, true, 1},
		{"count(*) FILTER selected", false, true, 0},
		{"count(*) public keys", true, false, 0},
	} {
		a := agg(rewrite.AggCount, "count", 0, 0, 0, -1, -1)
		a.AllRows = c.allRows
		plan := coveragePlan(a)
		plan.PartitionSelection = c.sel
		p, _ := NewPrivacy(conf.Laplace, 1, 1e-6)
		s, err := NewSpec(plan, p)
		if err != nil {
			t.Fatal(err)
		}
		s.mech = shifted{noise.Laplace(), -50}
		v, err := s.noisyRow(&Group{Vals: []float64{3}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] != c.want {
			t.Errorf("%s: count %v, want %v", c.name, v[0], c.want)
		}
	}
}
