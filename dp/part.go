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
	if p.Bound.LInf == 0 {
		return 0
	}
	t, err := m.ErrorBound(p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta, confidence)
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
