package dp

import (
	"math"
	"reflect"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// TestReleases: the releases a spec's cost lists, part for part: Laplace
// (b = L0·L∞/ε), Gaussian (L2 and the sampler's σ), the quantile's
// exponential mechanism, partition selection's noise and its threshold δ.
func TestReleases(t *testing.T) {
	count := sensitivity.Count(4, 8) // L0 = 4, L∞ = 8
	share := sensitivity.Share{Epsilon: 0.5, Delta: 1e-8}
	agg := &rewrite.Aggregate{Kind: rewrite.AggCount}
	q := &quantile{a: &rewrite.Aggregate{Kind: rewrite.AggQuantile}, eps: 0.25, l0: 4}
	lap := &Spec{mech: noise.Laplace(), aggs: []Aggregator{&counter{a: agg, count: Part{count, sensitivity.Share{Epsilon: 0.5}}}, q},
		sel: &selection{units: Part{sensitivity.DistinctUnits(4), sensitivity.Share{Epsilon: 0.5}}, delta: 1e-7}}
	got, err := releases(lap)
	want := []budget.Release{
		{Mechanism: budget.MechLaplace, L0: 4, Sensitivity: 8, Scale: 64, Epsilon: 0.5},
		{Mechanism: budget.MechExponential, L0: 4, Epsilon: 1},
		{Mechanism: budget.MechLaplace, L0: 4, Sensitivity: 1, Scale: 8, Epsilon: 0.5},
		{Mechanism: budget.MechSelection, L0: 1, Delta: 1e-7},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Laplace releases = %+v, %v\nwant %+v", got, err, want)
	}
	gau := &Spec{mech: noise.Gaussian(), aggs: []Aggregator{&counter{a: agg, count: Part{count, share}}},
		sel: &selection{units: Part{sensitivity.DistinctUnits(4), sensitivity.Share{Epsilon: 0.5, Delta: 5e-8}}, delta: 1e-7, noiseDel: 5e-8}}
	s1, _ := noise.Gaussian().StdDev(4, 8, 0.5, 1e-8)
	s2, _ := noise.Gaussian().StdDev(4, 1, 0.5, 5e-8)
	got, err = releases(gau)
	want = []budget.Release{
		{Mechanism: budget.MechGaussian, L0: 4, Sensitivity: 16, Scale: s1, Epsilon: 0.5, Delta: 1e-8},
		{Mechanism: budget.MechGaussian, L0: 4, Sensitivity: 2, Scale: s2, Epsilon: 0.5, Delta: 5e-8},
		{Mechanism: budget.MechSelection, L0: 1, Delta: 5e-8},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Gaussian releases = %+v, %v\nwant %+v", got, err, want)
	}
	// The Gaussian curve at α is exactly the zCDP ρ times α.
	rho, _, _ := zcdpCost(gau)
	var r float64
	for _, rel := range got {
		r += budget.RDPCurve(rel, 3)
	}
	if math.Abs(r-3*rho) > 1e-12 {
		t.Errorf("Σ curve(3) = %v, want 3ρ = %v", r, 3*rho)
	}
}
