package dp

import (
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// COUNT(DISTINCT ...), released as a noisy count (count.go's counter):
//
//   - of the privacy unit: a unit is one unit in each group it touches,
//     L∞ = 1;
//   - of another column: each unit keeps at most MaxDistinct of its
//     distinct values per group, L∞ = MaxDistinct.

func init() {
	register(rewrite.AggCountDistinctUnit, false, func(a *rewrite.Aggregate, p Params) (Aggregator, error) {
		return newCounter(a, p, sensitivity.DistinctUnits(p.L0))
	})
	register(rewrite.AggCountDistinct, false, func(a *rewrite.Aggregate, p Params) (Aggregator, error) {
		return newCounter(a, p, sensitivity.CountDistinct(p.L0, a.MaxDistinct))
	})
}
