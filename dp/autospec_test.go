package dp_test

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/dp"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

func planOf(t *testing.T, a *rewrite.Analyzer, q string) *rewrite.Plan {
	t.Helper()
	sts, err := a.Analyze(q)
	if err != nil || len(sts) != 1 || sts[0].Plan == nil {
		t.Fatalf("Analyze(%q) = %v, %v", q, sts, err)
	}
	return sts[0].Plan
}

// TestAutoSpecCost: the one charge made before the bounds are known is
// the query's ε, and what the release with the chosen bounds consumes:
// the main part's cost (ε, ρ, the Rényi releases' ratio of sensitivity
// to noise) does not depend on the bounds, under Laplace and Gaussian
// noise, and degenerate chosen bounds ([0, 0]: nothing passed the
// threshold) still give a valid spec.
func TestAutoSpecCost(t *testing.T) {
	a := newTestAnalyzer(t)
	const q = "SELECT channel, avg(score), sum(score), count(*) FROM orders GROUP BY channel"
	plan := planOf(t, a, q)
	for _, mech := range []string{conf.Laplace, conf.Gaussian} {
		p, err := dp.NewPrivacy(mech, 1, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		as, err := dp.NewAutoSpec(plan, p, 0.1, noise.Laplace())
		if err != nil {
			t.Fatal(err)
		}
		c, err := as.Cost()
		if err != nil {
			t.Fatal(err)
		}
		wantDelta := 0.0
		if mech == conf.Gaussian {
			wantDelta = 1e-6
		}
		if math.Abs(c.Epsilon-1) > 1e-12 || math.Abs(c.Delta-wantDelta) > 1e-18 {
			t.Errorf("%s: charge ε=%v δ=%v, want the query's ε=1 δ=%v", mech, c.Epsilon, c.Delta, wantDelta)
		}
		if b := as.Bounds; b.Epsilon() != 0.1 || b.Scale() != float64(plan.MaxGroups*plan.MaxRows)/0.1 {
			t.Errorf("%s: bounds part ε=%v scale=%v, want 0.1 and L0·R/0.1", mech, b.Epsilon(), b.Scale())
		}
		for _, bounds := range [][2]float64{{0, 1024}, {-32, 128}, {0, 0}} {
			chosen := planOf(t, a.WithAutoBounds(map[string][2]float64{"public.orders.score": bounds}), q)
			cp, err := plan.WithAutoBounds(chosen)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := as.Chosen(cp)
			if err != nil {
				t.Fatalf("%s %v: %v", mech, bounds, err)
			}
			mc, err := spec.Cost()
			if err != nil {
				t.Fatal(err)
			}
			main, _ := as.Main.Cost()
			if mc.Epsilon != main.Epsilon || mc.Delta != main.Delta || mc.Rho > main.Rho*(1+1e-9) {
				t.Errorf("%s %v: release costs ε=%v δ=%v ρ=%v, charged for ε=%v δ=%v ρ=%v", mech, bounds, mc.Epsilon, mc.Delta, mc.Rho, main.Epsilon, main.Delta, main.Rho)
			}
			if bounds[1] > 0 && math.Abs(mc.Rho-main.Rho) > 1e-9*main.Rho {
				t.Errorf("%s %v: ρ %v with the chosen bounds, %v charged", mech, bounds, mc.Rho, main.Rho)
			}
		}
	}
	if _, err := dp.NewAutoSpec(planOf(t, a, "SELECT sum(amount) FROM orders"), dp.Privacy{}, 0.1, noise.Laplace()); err == nil {
		t.Error("NewAutoSpec accepted a plan without bounds: auto")
	}
}
