package dp

import (
	"fmt"
	"math"
	"strconv"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// confidence of the error bounds reported with every answer.
const confidence = 0.95

// Part is one noised quantity: its sensitivity and its share of the budget.
// A part with LInf 0 is not noised (the value cannot depend on a person).
type Part struct {
	Bound sensitivity.Bound
	Share sensitivity.Share
}

// check refuses, before the charge, a part the sampler would refuse (e.g.
// an ε below its floor of 2^-50, or a sensitivity that overflows): it
// must fail before the charge, not after it.
func (p Part) check(m noise.Mechanism) error {
	if p.Bound.LInf == 0 {
		return nil
	}
	if !(p.Bound.LInf < math.MaxFloat64) {
		return refuse("a sensitivity of this query is not finite: narrow the bounds of its expressions")
	}
	if _, err := m.StdDev(p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta); err != nil {
		return err
	}
	return nil
}

// checkParts checks parts in order; the first refusal wins.
func checkParts(m noise.Mechanism, parts ...Part) error {
	for _, p := range parts {
		if err := p.check(m); err != nil {
			return err
		}
	}
	return nil
}

func (p Part) add(m noise.Mechanism, x float64) (float64, error) {
	if p.Bound.LInf == 0 {
		// Degenerate bounds (e.g. lower = upper): the value cannot depend
		// on any person, so it needs no noise.
		return x, nil
	}
	return m.Add(x, p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta)
}

func (p Part) errorBound(m noise.Mechanism) float64 {
	return p.errorBoundAt(m, confidence)
}

// errorBoundAt is the bound the noise stays within with probability c.
func (p Part) errorBoundAt(m noise.Mechanism, c float64) float64 {
	if p.Bound.LInf == 0 {
		return 0
	}
	t, err := m.ErrorBound(p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta, c)
	if err != nil {
		return math.NaN()
	}
	return t
}

// describe words one noised quantity: mechanism, sensitivity, share,
// noise scale and 95% error bound.
func (p Part) describe(m noise.Mechanism) string {
	if p.Bound.LInf == 0 {
		return fmt.Sprintf("sensitivity 0 (lower = upper): exact, no noise, ε=%s", formatNum(p.Share.Epsilon))
	}
	sd, _ := m.StdDev(p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta)
	scale := fmt.Sprintf("noise σ %s", humanBound(sd))
	if m.Name() == "laplace" {
		// Laplace's standard deviation is √2 times its scale b = L1/ε.
		scale = fmt.Sprintf("noise scale b=%s (std dev %s)", humanBound(sd/math.Sqrt2), humanBound(sd))
	}
	return fmt.Sprintf("%s, sensitivity L0=%d L∞=%s, ε=%s δ=%s, %s, 95%% error ±%s",
		m.Name(), p.Bound.L0, formatNum(p.Bound.LInf), formatNum(p.Share.Epsilon), formatNum(p.Share.Delta), scale, humanBound(p.errorBound(m)))
}

// humanBound prints a non-negative amount for a person: three significant
// digits, no exponent ("288", "144000", "0.0312").
func humanBound(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// formatNum prints a number as SHOW and the notices do (proxy's formatNum).
func formatNum(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// barText prints an error bar for a person: three significant digits,
// rounded up, so that the bar shown is never narrower than the one
// computed ("288", "144000", "0.0313").
func barText(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	if v <= 0 {
		return "0"
	}
	e := math.Pow(10, math.Floor(math.Log10(v))-2)
	r := math.Ceil(v/e*(1-1e-12)) * e
	r, _ = strconv.ParseFloat(strconv.FormatFloat(r, 'g', 3, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// stdDev is the part's noise standard deviation (0 when not noised).
func (p Part) stdDev(m noise.Mechanism) float64 {
	if p.Bound.LInf == 0 {
		return 0
	}
	sd, err := m.StdDev(p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta)
	if err != nil {
		return math.NaN()
	}
	return sd
}

// sumBound is the bound that |e1 + e2| stays within with probability c,
// for independent noises of mechanism m with standard deviations sd1 and
// sd2: the sum of two Gaussians is Gaussian; for two Laplace noises of
// scales a ≠ b, P(e1 + e2 > x) = (a²·e^(−x/a) − b²·e^(−x/b)) / (2(a² − b²)),
// and e^(−x/a)·(2 + x/a)/4 when a = b (solved by bisection).
func sumBound(m noise.Mechanism, sd1, sd2, c float64) float64 {
	if m.Name() != "laplace" {
		return math.Sqrt2 * math.Erfinv(c) * math.Hypot(sd1, sd2)
	}
	a, b := sd1/math.Sqrt2, sd2/math.Sqrt2
	if a < b {
		a, b = b, a
	}
	if b == 0 {
		return a * math.Log(1/(1-c))
	}
	tail := func(x float64) float64 { // P(|e1 + e2| > x)
		if (a-b)/a < 1e-9 {
			return math.Exp(-x/a) * (2 + x/a) / 2
		}
		return (a*a*math.Exp(-x/a) - b*b*math.Exp(-x/b)) / (a*a - b*b)
	}
	lo, hi := 0.0, (a+b)*math.Log(2/(1-c))+a // the tail at hi is below 1 − c
	for tail(hi) > 1-c {
		hi *= 2
	}
	for i := 0; i < 200 && hi-lo > 1e-12*hi; i++ {
		if mid := (lo + hi) / 2; tail(mid) > 1-c {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// ratioBar is the 95% bound of a ratio of two noisy quantities, for a
// group of n rows, returned as num/(n − den) (valid for n > den): the
// released (S + e1)/(n + e2) with |S/n| ≤ mult differs from S/n by
// |e1 − (S/n)·e2| / (n + e2). The numerator's noise e1 − (S/n)·e2 is a
// sum of independent symmetric unimodal noises, which is spread widest
// when |S/n| is largest (peakedness, Birnbaum 1948): it stays within
// sumBound(sd1, mult·sd2, 96%) with probability ≥ 96%, and the
// denominator's noise within its 99% bound; both hold with probability
// ≥ 95% (union bound).
func ratioBar(m noise.Mechanism, num, den Part, mult float64) (float64, float64) {
	return sumBound(m, num.stdDev(m), mult*den.stdDev(m), 0.96), den.errorBoundAt(m, 0.99)
}
