package budget

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
)

// TestLaplaceRDPMironov: the Laplace curve against Mironov 2017, Prop. 6
// evaluated by hand (python, math.log/exp), and its limits: α → 1 is the
// KL divergence ε + e^{−ε} − 1 (Mironov, Table II), α → ∞ is ε.
func TestLaplaceRDPMironov(t *testing.T) {
	for _, tc := range []struct{ alpha, eps, want float64 }{
		{2, 1, 0.6191236299985928},     // log(2/3·e + 1/3·e^{−2})
		{4, 0.1, 0.018991214963384174}, // ≈ αε²/2 for small ε
		{32, 0.5, 0.47814842504542626},
		{1 + 1e-7, 1, 0.36787944117144233}, // KL
		{1e9, 0.7, 0.7},                    // max divergence
	} {
		if got := LaplaceRDP(tc.alpha, tc.eps); math.Abs(got-tc.want) > 1e-6*tc.want {
			t.Errorf("LaplaceRDP(%v, %v) = %v, want %v", tc.alpha, tc.eps, got, tc.want)
		}
	}
	// The curve is increasing in α and never above ε (Mironov, Prop. 9,
	// monotonicity; 10: ε-DP ⇒ D_α ≤ ε).
	prev := 0.0
	for _, a := range rdpOrders {
		r := LaplaceRDP(a, 0.3)
		if r < prev || r > 0.3 {
			t.Errorf("LaplaceRDP(%v, 0.3) = %v after %v", a, r, prev)
		}
		prev = r
	}
}

// TestRDPConversionBalle: Balle et al. 2020, Thm. 21, by hand, and B_α
// its inverse.
func TestRDPConversionBalle(t *testing.T) {
	// 10 + log(3/4) − (log 1e-6 + log 4)/3
	if got, want := RDPToDP(4, 10, 1e-6), 13.855389993163012; math.Abs(got-want) > 1e-12 {
		t.Errorf("RDPToDP(4, 10, 1e-6) = %v, want %v", got, want)
	}
	for _, a := range rdpOrders {
		b := RDPBudget(a, 10, 1e-6)
		if e := RDPToDP(a, b, 1e-6); math.Abs(e-10) > 1e-9 {
			t.Errorf("α=%v: RDPToDP(B_α) = %v, want 10", a, e)
		}
	}
	if !math.IsInf(RDPToDP(2, 1, 0), 1) || !math.IsInf(RDPBudget(2, 1, 0), -1) {
		t.Error("δ = 0 must certify nothing")
	}
}

// TestRDPCurves: each mechanism's curve, by hand.
func TestRDPCurves(t *testing.T) {
	for _, tc := range []struct {
		r      Release
		alpha  float64
		want   float64
		pureEp float64
	}{
		// Laplace b = L0·L∞/ε = 4·2/0.4 = 20: each group ε_p = 0.1.
		{Release{Mechanism: MechLaplace, L0: 4, Sensitivity: 2, Scale: 20, Epsilon: 0.4}, 4, 4 * 0.018991214963384174, 0.4},
		// Gaussian: αΔ²/(2σ²) = 3·4/(2·16).
		{Release{Mechanism: MechGaussian, L0: 1, Sensitivity: 2, Scale: 4, Epsilon: 1, Delta: 1e-9}, 3, 0.375, math.Inf(1)},
		// Exponential, ε_p = 0.5: min(0.5, 2·0.25/8) per group.
		{Release{Mechanism: MechExponential, L0: 2, Epsilon: 1}, 2, 2 * 0.0625, 1},
		{Release{Mechanism: MechExponential, L0: 1, Epsilon: 1}, 1024, 1, 1},
		// Unknown kind: min(ε, αε²/2).
		{Release{Mechanism: MechPure, L0: 1, Epsilon: 0.2, Delta: 1e-8}, 5, 0.1, 0.2},
		{Release{Mechanism: MechSelection, L0: 1, Delta: 1e-8}, 5, 0, 0},
	} {
		if got := RDPCurve(tc.r, tc.alpha); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("RDPCurve(%+v, %v) = %v, want %v", tc.r, tc.alpha, got, tc.want)
		}
		if got := tc.r.pureEpsilon(); math.Abs(got-tc.pureEp) > 1e-12 && got != tc.pureEp {
			t.Errorf("%+v at ∞ = %v, want %v", tc.r, got, tc.pureEp)
		}
	}
}

// laplaceCharge is a Laplace query at ε (L0 = L∞ = 1, b = 1/ε).
func laplaceCharge(eps float64) Charge {
	return Charge{Analyst: "a", Epsilon: eps, Rho: PureRho(eps),
		Releases: []Release{{Mechanism: MechLaplace, L0: 1, Sensitivity: 1, Scale: 1 / eps, Epsilon: eps}}}
}

// gaussianCharge is a Gaussian query at (ε, 1e-9) with σ as the sampler
// calibrates it.
func gaussianCharge(t *testing.T, eps float64) Charge {
	sigma, err := noise.Gaussian().StdDev(1, 1, eps, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	return Charge{Analyst: "a", Epsilon: eps, Delta: 1e-9, Rho: GaussianRho(1, sigma),
		Releases: []Release{{Mechanism: MechGaussian, L0: 1, Sensitivity: 1, Scale: sigma, Epsilon: eps, Delta: 1e-9}}}
}

// TestRDPCounts: how many queries each accountant admits within
// (10, 1e-6), as pure functions of the sequence (the goal of issue 15:
// rdp ≥ 320 Laplace queries at ε = 0.1 and ≥ 10 at ε = 1; advanced ≥ 216).
func TestRDPCounts(t *testing.T) {
	l := Limits{Epsilon: numericOf(10), Delta: numericOf(1e-6)}
	min := map[string]map[float64]int{
		conf.AccountingRDP:      {0.1: 320, 0.5: 20, 1: 10},
		conf.AccountingBasic:    {0.1: 100, 0.5: 20, 1: 10},
		conf.AccountingAdvanced: {0.1: 216, 0.5: 20, 1: 10},
		conf.AccountingZCDP:     {0.1: 305, 0.5: 20, 1: 10},
	}
	for _, a := range accountants() {
		for _, eps := range []float64{0.1, 0.5, 1} {
			nl, _ := composeAll(t, a, l, laplaceCharge(eps))
			ng, _ := composeAll(t, a, l, gaussianCharge(t, eps))
			t.Logf("%-8s ε=%-4v Laplace %4d  Gaussian(δ=1e-9) %4d", a.Name(), eps, nl, ng)
			if m, ok := min[a.Name()][eps]; ok && nl < m {
				t.Errorf("%s admits %d Laplace queries at ε=%v, want ≥ %d", a.Name(), nl, eps, m)
			}
		}
	}
}

// randomRelease is one of the mechanisms at random.
func randomRelease(rnd *rand.Rand) Release {
	eps := 0.01 + rnd.Float64()
	l0 := int64(1 + rnd.IntN(4))
	switch rnd.IntN(4) {
	case 0:
		return Release{Mechanism: MechLaplace, L0: l0, Sensitivity: 1, Scale: float64(l0) / eps, Epsilon: eps}
	case 1:
		return Release{Mechanism: MechGaussian, L0: 1, Sensitivity: 1, Scale: 0.5 + 5*rnd.Float64(), Epsilon: eps, Delta: 1e-9}
	case 2:
		return Release{Mechanism: MechExponential, L0: l0, Epsilon: eps}
	}
	return Release{Mechanism: MechPure, L0: 1, Epsilon: eps}
}

// TestRDPProperties: the sums are monotone in every release; a sequence
// never reads as cheaper than any one of its releases alone; for pure ε
// sequences rdp admits whenever basic composition does and never reports
// more ε than Σε.
func TestRDPProperties(t *testing.T) {
	a := rdpAccountant{share: conf.DefaultRDPDeltaShare}
	l := Limits{Epsilon: numericOf(10), Delta: numericOf(1e-6)}
	rnd := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		var tot Totals
		pureOnly := trial%2 == 0
		for i := 0; i < 40; i++ {
			r := randomRelease(rnd)
			if pureOnly && r.Mechanism == MechGaussian {
				r = Release{Mechanism: MechLaplace, L0: 1, Sensitivity: 1, Scale: 1 / r.Epsilon, Epsilon: r.Epsilon}
			}
			c := Charge{Epsilon: r.Epsilon, Delta: r.Delta, Rho: PureRho(r.Epsilon), Releases: []Release{r}}
			next := tot.plus(c)
			before, after := tot.rdp(), next.rdp()
			for k := range after {
				if after[k] < before[k] {
					t.Fatalf("sum at order %d decreased: %v → %v", k, before[k], after[k])
				}
			}
			rb, ra := a.Report(tot, l).EpsilonSpent, a.Report(next, l).EpsilonSpent
			if ra < rb {
				t.Fatalf("reported ε decreased: %v → %v", rb, ra)
			}
			if single := a.Report(Totals{}.plus(c), l).EpsilonSpent; ra < single {
				t.Fatalf("sequence reads %v, below its release alone %v", ra, single)
			}
			if pureOnly {
				if withinBasic(next, l) && !a.within(next, l) {
					t.Fatalf("basic admits Σε=%v but rdp refuses", next.Epsilon.Float64())
				}
				if ra > next.Epsilon.Float64() {
					t.Fatalf("rdp reports ε=%v above Σε=%v", ra, next.Epsilon.Float64())
				}
			}
			tot = next
		}
	}
}

// TestRDPDeltaSetAside: the approximate parts may use δ_g − δ_c, no more;
// with δ = 0 only the ∞ order is left (basic composition for pure ε).
func TestRDPDeltaSetAside(t *testing.T) {
	a := rdpAccountant{share: 0.9}
	l := Limits{Epsilon: numericOf(1), Delta: numericOf(1e-6)}
	sel := func(d float64) Charge {
		return Charge{Epsilon: 0.01, Delta: d, Releases: []Release{{Mechanism: MechSelection, L0: 1, Delta: d}}}
	}
	if _, ok := a.Compose(Totals{}, l, sel(1e-7)); !ok {
		t.Error("δ_approx = 1e-7 = δ_g − δ_c refused")
	}
	if _, ok := a.Compose(Totals{}, l, sel(1.1e-7)); ok {
		t.Error("δ_approx above δ_g − δ_c admitted")
	}
	l0 := Limits{Epsilon: numericOf(1), Delta: numericOf(0)}
	n, _ := composeAll(t, a, l0, laplaceCharge(0.1))
	if n != 10 {
		t.Errorf("δ limit 0: %d Laplace queries at ε=0.1 within ε=1, want 10", n)
	}
	if n, _ := composeAll(t, a, Limits{Epsilon: numericOf(10), Delta: numericOf(0)}, Charge{Epsilon: 0.1, Releases: gaussianCharge(t, 0.1).Releases[:1]}); n != 0 {
		t.Errorf("δ limit 0: %d Gaussian queries admitted, want 0", n)
	}
}
