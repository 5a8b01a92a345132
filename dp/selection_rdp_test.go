package dp

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// bernoulliRenyi is the Rényi divergence of order alpha of Bern(p) from
// Bern(q).
func bernoulliRenyi(alpha, p, q float64) float64 {
	return math.Log(math.Pow(p, alpha)*math.Pow(q, 1-alpha)+math.Pow(1-p, alpha)*math.Pow(1-q, 1-alpha)) / (alpha - 1)
}

// TestOptimalSelectionRDPBoundsItsDivergence (red team, issue 15/16): the
// releases a query with the optimal pre-aggregated selection records
// (Cost().Releases, which the default rdp accountant composes) must bound
// the Rényi divergence of what the selection actually does. Each of the L0
// groups one person touches is kept with probability p(n) of its n units;
// removing the person moves n to n−1 in each, so the selection's
// divergence at order α is L0 · max over n of D_α between Bern(p(n)) and
// Bern(p(n−1)), either way round. Only pairs where both probabilities are
// in [1e-3, 1−1e-3] are compared: with δ = 1e-10 no event of probability
// δ (the approximate part recorded apart) can move their divergence
// measurably. Where p crosses one half the decision is randomized response
// at ε/L0, whose Rényi divergence exceeds the Laplace mechanism's at the
// same ε: recording the selection as Laplace noise undercounted it.
func TestOptimalSelectionRDPBoundsItsDivergence(t *testing.T) {
	orders := []float64{1.25, 1.5, 2, 3, 4, 6, 8, 16, 32, 64}
	for _, mech := range []string{conf.Laplace, conf.Gaussian} {
		for _, l0 := range []int64{1, 2} {
			for _, eps := range []float64{0.2, 0.5, 1, 2, 4} {
				plan := &rewrite.Plan{Table: &conf.Table{Schema: "public", Name: "t", PrivacyUnit: "uid"}, MaxGroups: l0, MaxRows: 1, Limit: -1,
					PartitionSelection: true, GroupKeys: []rewrite.GroupKey{{ResultCol: 0}}, UnitsCol: 1, SQL: "SELECT 1",
					Outputs: []rewrite.Output{{GroupKey: 0}}}
				const delta = 1e-10
				p, err := NewPrivacy(mech, eps, delta)
				if err != nil {
					t.Fatal(err)
				}
				s, err := NewSpec(plan, p)
				if err != nil {
					t.Fatal(err)
				}
				if s.sel.method != selOptimal {
					continue // thresholding: its noise is a Laplace or Gaussian release indeed
				}
				c, err := s.Cost()
				if err != nil {
					t.Fatal(err)
				}
				for _, alpha := range orders {
					recorded := 0.0
					for _, r := range c.Releases {
						recorded += budget.RDPCurve(r, alpha)
					}
					worst := 0.0
					for n := 2.0; n <= s.sel.hard+1; n++ {
						a := optimalKeepProbability(n-1, l0, s.sel.eps, s.sel.delta)
						b := optimalKeepProbability(n, l0, s.sel.eps, s.sel.delta)
						if math.Min(a, b) < 1e-3 || math.Max(a, b) > 1-1e-3 {
							continue
						}
						worst = math.Max(worst, math.Max(bernoulliRenyi(alpha, a, b), bernoulliRenyi(alpha, b, a)))
					}
					if actual := float64(l0) * worst; actual > recorded*(1+1e-9) {
						t.Errorf("%s, L0=%d, ε=%v, α=%v: the selection's Rényi divergence is %.6g, its recorded releases %v bound it by %.6g only",
							mech, l0, eps, alpha, actual, c.Releases, recorded)
					}
				}
			}
		}
	}
}
