package bounds

import (
	"math"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
)

// laplace95 is the Laplace mechanism's 95% bound at ε = 1.
func laplace95(l0 int64, lInf float64) (float64, error) {
	return noise.Laplace().ErrorBound(l0, lInf, 1, 0, 0.95)
}

// hist builds an exact count histogram from units' row counts.
func hist(counts map[float64]float64) Hist {
	b := CountBins()
	h := Hist{Bins: b, Count: make([]float64, len(b.Lo))}
	for n, units := range counts {
		h.Count[b.Index(n)] += units
	}
	return h
}

func TestBinsAreFixedAndOrdered(t *testing.T) {
	for _, b := range []Bins{CountBins(), ValueBins(), GroupBins(4)} {
		for i := 1; i < len(b.Lo); i++ {
			if !(b.Lo[i] > b.Lo[i-1]) {
				t.Fatalf("bins not increasing at %d: %v", i, b.Lo[i-1:i+1])
			}
		}
	}
	b := CountBins()
	for n := 1.0; n <= 32; n++ {
		if i := b.Index(n); b.Lo[i] != n || b.Rep(i) != n {
			t.Errorf("count %v: bin %d [%v], rep %v; want exact bins up to 32", n, i, b.Lo[i], b.Rep(i))
		}
	}
	if i := b.Index(1e9); i != len(b.Lo)-1 || b.Rep(i) != b.Lo[i] {
		t.Errorf("huge count: bin %d rep %v, want the open last bin at its lower edge", i, b.Rep(i))
	}
	v := ValueBins()
	if v.Index(0) != 0 || v.Lo[v.Index(500)] != 500 || v.Lo[v.Index(499.99)] != 400 {
		t.Errorf("value bins: 0→%d, 500→%v, 499.99→%v", v.Index(0), v.Lo[v.Index(500)], v.Lo[v.Index(499.99)])
	}
}

// Half the units have 4 rows, half 12: a bound of 8 drops 4 of every 16
// rows (25%), 12 drops none; the noise grows with the bound.
func TestRowsTradeoff(t *testing.T) {
	h := hist(map[float64]float64{4: 1000, 12: 1000})
	rows, err := RowsTradeoff(h, []float64{4, 8, 12, 16}, 1, laplace95)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.5, 0.25, 0, 0}
	for i, r := range rows {
		if math.Abs(r.DroppedShare-want[i]) > 1e-12 || math.Abs(r.Dropped-want[i]*16000) > 1e-6 {
			t.Errorf("R=%v drops %v (%v rows), want %v", r.Bound, r.DroppedShare, r.Dropped, want[i])
		}
		if wantNoise := r.Bound * math.Log(20); math.Abs(r.Noise-wantNoise) > 1e-9 {
			t.Errorf("R=%v noise %v, want R·ln 20 = %v", r.Bound, r.Noise, wantNoise)
		}
	}
	if b := Best(rows); b.Bound != 12 {
		t.Errorf("best %v, want 12 (no bias, least noise among the unbiased)", b.Bound)
	}
	// Priced on a tenth of the rows, the bias shrinks and the noise
	// does not: a tiny bias can be worth less noise.
	h = hist(map[float64]float64{4: 1000, 100: 10})
	rows, _ = RowsTradeoff(h, RowCandidates(h, 8), 0.1, laplace95)
	if b := Best(rows); b.Bound != 4 {
		t.Errorf("ten units of 100 rows among 1000 of 4: best %v, want 4", b.Bound)
	}
	rows, _ = RowsTradeoff(h, RowCandidates(h, 8), 1, laplace95)
	if b := Best(rows); b.Bound <= 4 {
		t.Errorf("priced on the whole table: best %v, want more than 4", b.Bound)
	}
}

func TestGroupsTradeoff(t *testing.T) {
	// 600 units in 1 group, 400 in 3 groups: G=1 drops 800 of 1800 pairs.
	h := Hist{Bins: GroupBins(4), Count: []float64{600, 0, 400, 0}}
	rows, err := GroupsTradeoff(h, GroupCandidates(h, 4, 4), 10, 1000, laplace95)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{800.0 / 1800, 400.0 / 1800, 0, 0}
	for i, r := range rows {
		if math.Abs(r.DroppedShare-want[i]) > 1e-12 {
			t.Errorf("G=%v drops %v, want %v", r.Bound, r.DroppedShare, want[i])
		}
		if wantNoise := float64(i+1) * 10 * math.Log(20); math.Abs(r.Noise-wantNoise) > 1e-9 {
			t.Errorf("G=%v noise %v, want G·R·ln 20 = %v", r.Bound, r.Noise, wantNoise)
		}
	}
	if b := Best(rows); b.Bound != 3 {
		t.Errorf("best %v, want 3", b.Bound)
	}
}

func TestClampTradeoff(t *testing.T) {
	b := ValueBins()
	s := Signed{Pos: Hist{Bins: b, Count: make([]float64, len(b.Lo))}, Neg: Hist{Bins: b, Count: make([]float64, len(b.Lo))}}
	s.Pos.Count[b.Index(100)] = 10000 // values near 100 ([100, 125))
	s.Pos.Count[b.Index(5000)] = 1    // one outlier
	rows, best, err := ClampTradeoff(s, 1, 1, laplace95)
	if err != nil {
		t.Fatal(err)
	}
	if best.Lower != 0 || best.Bound != 125 {
		t.Errorf("best [%v, %v], want [0, 125]: the outlier is worth less than its noise", best.Lower, best.Bound)
	}
	for _, r := range rows {
		if r.Lower != 0 || math.Signbit(r.Lower) {
			t.Errorf("lower %v with no negative value, want 0", r.Lower)
		}
	}
	// Clamping [0, 125] changes only the outlier: 5650-125 of the sum.
	if got, want := s.Clamped(0, 125), (5000+6300)/2.0-125; math.Abs(got-want) > 1e-9 {
		t.Errorf("clamped %v, want %v", got, want)
	}
	// Negative values: the lower bound follows them.
	s.Neg.Count[b.Index(50)] = 10000
	_, best, _ = ClampTradeoff(s, 1, 1, laplace95)
	if best.Lower != -63 {
		t.Errorf("with values near -50: best lower %v, want -63", best.Lower)
	}
}

func TestNoisedCutsTheTail(t *testing.T) {
	b := CountBins()
	exact := make([]float64, len(b.Lo))
	exact[3] = 1000
	// Deterministic "noise": -3, +2, -3, +2, ... and +5 in bin 20.
	i := -1
	add := func(x float64) (float64, error) {
		i++
		switch {
		case i == 20:
			return x + 5, nil
		case i%2 == 0:
			return x - 3, nil
		}
		return x + 2, nil
	}
	fl := Floor(1, len(b.Lo))
	if want := math.Log(float64(len(b.Lo)) / 2e-6); math.Abs(fl-want) > 1e-12 || fl <= 5 {
		t.Fatalf("floor %v, want ln(n/2e-6) = %v (above the +5 of bin 20)", fl, want)
	}
	h, err := Noised(b, exact, add, fl)
	if err != nil {
		t.Fatal(err)
	}
	// The tail after the last bin that reaches the floor is cut; bins
	// before it keep their noisy counts, never negative.
	for i, c := range h.Count {
		var want float64
		switch {
		case i == 3:
			want = 1002
		case i < 3 && i%2 == 1:
			want = 2
		}
		if c != want {
			t.Errorf("bin %d reads %v, want %v", i, c, want)
		}
	}
	// A real Laplace sampler: the full bin stays about right.
	lap := noise.Laplace()
	h, err = Noised(b, exact, func(x float64) (float64, error) { return lap.Add(x, 1, 1, 1, 0) }, fl)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(h.Count[3]-1000) > 30 {
		t.Errorf("bin 3 reads %v, want about 1000", h.Count[3])
	}
}

func TestShownKeepsMarkedRows(t *testing.T) {
	var rows []Row
	for i := 1; i <= 100; i++ {
		rows = append(rows, Row{Bound: float64(i)})
	}
	got := Shown(rows, 5, 37, 64)
	var bs []string
	for _, r := range got {
		bs = append(bs, num(r.Bound))
	}
	s := strings.Join(bs, " ")
	if !strings.Contains(s, "37") || !strings.Contains(s, "64") || !strings.HasPrefix(s, "1 ") || !strings.HasSuffix(s, " 100") {
		t.Errorf("shown %s, want the ends, 37 and 64", s)
	}
}
