package budget

import (
	"math"
	"math/rand/v2"
	"testing"
)

// An audit of the accountants' admission rules against an adaptive
// analyst, with exact privacy losses. Two neighbouring datasets give a
// counting query the values 0 (D0) and 1 (D1); each admitted query is
// answered with Laplace noise of scale 1/ε_i, and the analyst picks the
// next ε_i from the answers so far (larger after an answer above 1/2).
// For a Laplace release y the privacy loss is exactly
// ℓ_i = ln p0(y)/p1(y) = ε_i(|y − 1| − |y|), and the transcript's loss is
// L = Σℓ_i (the analyst is deterministic given the transcript). The
// interaction is (ε_g, δ)-DP against this analyst with
// δ = E_D0[(1 − e^{ε_g − L})₊] (the hockey-stick divergence), which the
// test estimates by simulation and compares with δ_g; the estimator is
// unbiased and bounded, so the comparison allows 4 standard errors. Both
// directions (D0 vs D1, D1 vs D0) are symmetric here.
//
// The limits are (1, 0.05), large enough that δ can be estimated; a filter
// that overspends fails (TestAdaptiveAuditDetectsOverspend).

// auditAdaptive runs n transcripts against admit and returns the estimate
// of δ at epsG and its standard error.
func auditAdaptive(admit func(Totals, Charge) (Totals, bool), epsG float64, n int, seed uint64) (delta, se float64, queries float64) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	var sum, sumSq, q float64
	for range n {
		var tot Totals
		var loss float64
		eps := 0.1
		for {
			c := laplaceCharge(eps)
			next, ok := admit(tot, c)
			if !ok {
				break
			}
			tot = next
			q++
			// y ~ Laplace(0, 1/ε) under D0.
			u := rnd.Float64() - 0.5
			y := -math.Copysign(1, u) * math.Log(1-2*math.Abs(u)) / eps
			loss += eps * (math.Abs(y-1) - math.Abs(y))
			if y > 0.5 {
				eps = 0.3
			} else {
				eps = 0.1
			}
		}
		h := math.Max(0, 1-math.Exp(epsG-loss))
		sum += h
		sumSq += h * h
	}
	mean := sum / float64(n)
	return mean, math.Sqrt((sumSq/float64(n) - mean*mean) / float64(n)), q / float64(n)
}

// TestAdaptiveAudit: every accountant's rule keeps an adaptive analyst
// within (1, 0.05) by the exact hockey-stick divergence of its transcripts.
func TestAdaptiveAudit(t *testing.T) {
	l := Limits{Epsilon: numericOf(1), Delta: numericOf(0.05)}
	for _, a := range accountantsWith(Options{AdvancedDelta: 0.01}) {
		d, se, q := auditAdaptive(func(tot Totals, c Charge) (Totals, bool) { return a.Compose(tot, l, c) }, 1, 4000, 1)
		t.Logf("%-8s δ estimate %.5f ± %.5f (limit 0.05), %.1f queries per transcript", a.Name(), d, se, q)
		if d > 0.05+4*se {
			t.Errorf("%s: the adaptive analyst's δ at ε = 1 is %.5f ± %.5f, above the limit 0.05", a.Name(), d, se)
		}
	}
}

// TestAdaptiveAuditDetectsOverspend: the audit catches a rule that admits
// four times the ε budget by basic composition, so TestAdaptiveAudit can
// fail. It is a coarse audit: composition bounds are loose for a
// particular analyst (rdp's transcripts reach δ ≈ 0.015 of 0.05, and a rule
// spending twice the budget only ≈ 0.016), so it catches gross errors (a
// curve or a conversion off by a large factor), not a lost union bound.
func TestAdaptiveAuditDetectsOverspend(t *testing.T) {
	over := Limits{Epsilon: numericOf(4), Delta: numericOf(0.05)}
	d, se, _ := auditAdaptive(func(tot Totals, c Charge) (Totals, bool) { return basicAccountant{}.Compose(tot, over, c) }, 1, 4000, 2)
	if d <= 0.05+4*se {
		t.Errorf("a rule spending ε = 4 against a limit of 1 passed the audit: δ %.5f ± %.5f", d, se)
	}
	t.Logf("overspending rule: δ estimate %.4f ± %.4f", d, se)
}
