package dp

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

func TestZCDPCost(t *testing.T) {
	count := sensitivity.Count(4, 8) // L0 = 4, L∞ = 8
	share := sensitivity.Share{Epsilon: 0.5, Delta: 1e-8}
	agg := &rewrite.Aggregate{Kind: rewrite.AggCount}
	// Laplace: (ε/L0)²/2 per group, L0 groups; the selection's δ is approximate.
	lap := &Spec{mech: noise.Laplace(), aggs: []Aggregator{&counter{a: agg, count: Part{count, share}}},
		sel: &selection{units: Part{sensitivity.DistinctUnits(4), sensitivity.Share{Epsilon: 0.5}}, delta: 1e-7}}
	rho, d, err := zcdpCost(lap)
	if want := 2 * 0.25 / 2 / 4; err != nil || math.Abs(rho-want) > 1e-15 || d != 1e-7 {
		t.Errorf("Laplace: ρ = %v, δ = %v, %v; want %v, 1e-7", rho, d, err, want)
	}
	// Gaussian: Δ2²/(2σ²) with the sampler's σ; half the selection's δ is noise.
	gau := &Spec{mech: noise.Gaussian(), aggs: []Aggregator{&counter{a: agg, count: Part{count, share}}},
		sel: &selection{units: Part{sensitivity.DistinctUnits(4), sensitivity.Share{Epsilon: 0.5, Delta: 5e-8}}, delta: 1e-7, noiseDel: 5e-8}}
	s1, _ := noise.Gaussian().StdDev(4, 8, 0.5, 1e-8)
	s2, _ := noise.Gaussian().StdDev(4, 1, 0.5, 5e-8)
	want := budget.GaussianRho(16, s1) + budget.GaussianRho(2, s2)
	rho, d, err = zcdpCost(gau)
	if err != nil || math.Abs(rho-want) > 1e-15 || d != 5e-8 {
		t.Errorf("Gaussian: ρ = %v, δ = %v, %v; want %v, 5e-8", rho, d, err, want)
	}
}

// TestQuantileCost: a quantile's exponential mechanism costs
// L0·(ε/L0)²/2 in ρ and nothing in δ, whatever the noise.
func TestQuantileCost(t *testing.T) {
	q := &quantile{a: &rewrite.Aggregate{Kind: rewrite.AggQuantile}, eps: 0.25, l0: 4}
	for _, m := range []noise.Mechanism{noise.Laplace(), noise.Gaussian()} {
		rho, d, err := zcdpCost(&Spec{mech: m, aggs: []Aggregator{q}})
		if want := 4 * 0.25 * 0.25 / 2; err != nil || math.Abs(rho-want) > 1e-15 || d != 0 {
			t.Errorf("%s: ρ = %v, δ = %v, %v; want %v, 0", m.Name(), rho, d, err, want)
		}
	}
}
