// Package bounds measures how a private table's rows are spread over its
// privacy units and proposes the contribution bounds of its configuration
// (max_rows_per_unit, max_groups_per_unit, clamping bounds), printing for
// each candidate the bias bounding causes next to the noise it costs.
//
// By default every measurement is a histogram over bins fixed in advance,
// every bin noised with the Laplace mechanism (the noise package, secure
// sampler) at a share of the operator's ε, which the ledger records before
// anything is read. Exact mode reads the same histograms without noise and
// charges nothing: its figures are unprotected.
//
// The proposal math (this file and propose.go) is pure.
package bounds

import (
	"math"
	"strconv"
)

// Bins are fixed histogram bins over non-negative values: bin i holds
// [Lo[i], Lo[i+1]); the last bin is open ([Lo[n-1], ∞)). They never
// depend on the data.
type Bins struct {
	Lo []float64
	// Integer is set for counts: bin i holds the integers in
	// [Lo[i], Lo[i+1]-1], and its representative is their midpoint.
	Integer bool
}

// CountBins are the bins of per-unit row counts: 1 to 32 one by one,
// then a factor √2 apart (rounded) up to 2^20, then open.
func CountBins() Bins {
	var lo []float64
	for i := 1; i <= 33; i++ {
		lo = append(lo, float64(i))
	}
	for x := 33 * math.Sqrt2; x <= 1<<20+1; x *= math.Sqrt2 {
		v := math.Round(x)
		if v > lo[len(lo)-1] {
			lo = append(lo, v)
		}
	}
	return Bins{Lo: lo, Integer: true}
}

// GroupBins are the bins of a number of groups, 1 to k one by one.
func GroupBins(k int) Bins {
	lo := make([]float64, k)
	for i := range lo {
		lo[i] = float64(i + 1)
	}
	return Bins{Lo: lo, Integer: true}
}

// r10 is the Renard series of preferred numbers: the candidate clamping
// bounds are these times powers of ten, so that proposals read well.
var r10 = []float64{1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8}

// ValueBins are the bins of |x| for clamping bounds: [0, 0.001), then
// the R10 series from 0.001 to 10^9, then open.
func ValueBins() Bins {
	lo := []float64{0}
	for e := -3; e <= 8; e++ {
		for _, m := range r10 {
			lo = append(lo, roundSig(m*math.Pow(10, float64(e))))
		}
	}
	return Bins{Lo: append(lo, 1e9)}
}

// roundSig rounds away the floating-point residue of m·10^e.
func roundSig(x float64) float64 {
	v, _ := parseG(x)
	return v
}

// Index is the bin of x (x >= Lo[0]); -1 below the first bin.
func (b Bins) Index(x float64) int {
	i, j := 0, len(b.Lo)
	if x < b.Lo[0] {
		return -1
	}
	for j-i > 1 { // Lo[i] <= x < Lo[j]
		m := (i + j) / 2
		if b.Lo[m] <= x {
			i = m
		} else {
			j = m
		}
	}
	return i
}

// Rep is the value that stands for bin i: the midpoint of its values,
// or, for the open last bin, its lower edge (an underestimate).
func (b Bins) Rep(i int) float64 {
	if i == len(b.Lo)-1 {
		return b.Lo[i]
	}
	if b.Integer {
		return (b.Lo[i] + b.Lo[i+1] - 1) / 2
	}
	return (b.Lo[i] + b.Lo[i+1]) / 2
}

// Hist is a measured histogram: Count[i] is the (noisy) count of bin i.
type Hist struct {
	Bins  Bins
	Count []float64
	// Mass, in exact mode only, is the sum of the values in each bin, so
	// that a bin's values stand for themselves (their mean) rather than
	// for the bin's midpoint: at a bin edge, Excess and Clamped are then
	// exact. nil under DP (it would need noise of its own).
	Mass []float64
}

// value is what stands for bin i's values: their mean when known, else
// the bin's representative.
func (h Hist) value(i int) float64 {
	if h.Mass != nil && h.Count[i] > 0 {
		return h.Mass[i] / h.Count[i]
	}
	return h.Bins.Rep(i)
}

// Signed is a histogram of values of either sign: Pos over x >= 0, Neg
// over -x for x < 0, with the same bins.
type Signed struct {
	Pos, Neg Hist
}

// Noised is a histogram as released: every bin's true count plus noise,
// then (post-processing) negative counts set to 0 and the tail cut: every
// bin after the last one whose count reaches floor is set to 0, so that
// the noise of the many empty bins does not read as a long tail of the
// distribution, while the bulk keeps its unbiased noisy counts. Floor is
// 0 in exact mode.
func Noised(bins Bins, exact []float64, add func(float64) (float64, error), floor float64) (Hist, error) {
	h := Hist{Bins: bins, Count: make([]float64, len(bins.Lo))}
	last := -1
	for i := range h.Count {
		v, err := add(exact[i])
		if err != nil {
			return Hist{}, err
		}
		if v >= floor && v > 0 {
			last = i
		}
		h.Count[i] = math.Max(0, v)
	}
	for i := last + 1; i < len(h.Count); i++ {
		h.Count[i] = 0
	}
	return h, nil
}

// FalseTail is the probability that the noise of an empty bin alone
// extends the tail: one such bin far out (a fake heavy user) would make
// every proposal wrong, so it is kept small.
const FalseTail = 1e-6

// Floor is the count a noisy bin must reach to extend the tail: Laplace
// noise of the given scale exceeds it in one or more of n empty bins with
// probability at most FalseTail (a one-sided tail of e^(-t/b)/2 per bin,
// summed).
func Floor(scale float64, n int) float64 {
	return scale * math.Log(float64(n)/(2*FalseTail))
}

// Total is Σ Count[i]·Rep(i): the number of rows (for a histogram of
// rows per unit) or the sum of |x| (for a value histogram).
func (h Hist) Total() float64 {
	var t float64
	for i, c := range h.Count {
		t += c * h.value(i)
	}
	return t
}

// Units is Σ Count[i].
func (h Hist) Units() float64 {
	var t float64
	for _, c := range h.Count {
		t += c
	}
	return t
}

// Excess is Σ Count[i]·max(0, Rep(i) − r): the rows (or pairs) beyond a
// bound of r per unit.
func (h Hist) Excess(r float64) float64 {
	var t float64
	for i, c := range h.Count {
		t += c * math.Max(0, h.value(i)-r)
	}
	return t
}

// Quantile is the smallest bin edge below which a share q of the counts
// lies (Lo of the bin where the cumulative count reaches q).
func (h Hist) Quantile(q float64) float64 {
	n := h.Units()
	if n == 0 {
		return h.Bins.Lo[0]
	}
	var acc float64
	for i, c := range h.Count {
		acc += c
		if acc >= q*n {
			return h.value(i)
		}
	}
	return h.Bins.Lo[len(h.Bins.Lo)-1]
}

// Clamped is the total change clamping to [lo, hi] makes to the values
// of s, Σ Count·|clamp(x) − x| with x each bin's representative.
func (s Signed) Clamped(lo, hi float64) float64 {
	var t float64
	for i, c := range s.Pos.Count {
		x := s.Pos.value(i)
		t += c * math.Abs(math.Min(math.Max(x, lo), hi)-x)
	}
	for i, c := range s.Neg.Count {
		x := -s.Neg.value(i)
		t += c * math.Abs(math.Min(math.Max(x, lo), hi)-x)
	}
	return t
}

// AbsTotal is Σ Count·|x| over both signs.
func (s Signed) AbsTotal() float64 { return s.Pos.Total() + s.Neg.Total() }

func parseG(x float64) (float64, error) {
	return strconv.ParseFloat(strconv.FormatFloat(x, 'g', 6, 64), 64)
}
