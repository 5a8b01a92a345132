package dp

import (
	"fmt"
	"io"
	"math"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// AVG(col) over a column clamped to [Lower, Upper]: released as
// mid + noisy(sum − mid·count) / noisy(count), clamped to the bounds, with
// mid the middle of the bounds, so that the error depends on the width of
// the range and not on its distance from zero.

func init() {
	register(rewrite.AggAvg, false, func(a *rewrite.Aggregate, p Params) (Aggregator, error) {
		return newAvg(a, p)
	})
}

type avg struct {
	a          *rewrite.Aggregate
	count, sum Part // sum is centred on the middle of the bounds
}

func newAvg(a *rewrite.Aggregate, p Params) (*avg, error) {
	if a.CountCol < 0 || a.SumCol < 0 {
		return nil, internal("%s: the plan has no count or sum column", a.Func)
	}
	// Half of the aggregate's share for the count, half for the sum
	// centred on the middle of the bounds (sequential composition).
	half := sensitivity.Share{Epsilon: p.Share.Epsilon / 2, Delta: p.Share.Delta / 2}
	v := &avg{a: a,
		count: Part{sensitivity.Count(p.L0, p.MaxRows), half},
		sum:   Part{sensitivity.CenteredSum(p.L0, p.MaxRows, a.Lower, a.Upper), half},
	}
	if err := checkParts(p.Mech, v.count, v.sum); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *avg) Parts() []Part { return []Part{v.count, v.sum} }

func (v *avg) Release(m noise.Mechanism, _ io.Reader, g *Group) (float64, error) {
	a, vals := v.a, g.Vals
	mid := (a.Lower + a.Upper) / 2
	n, err := v.count.add(m, vals[a.CountCol])
	if err != nil {
		return 0, err
	}
	c, err := v.sum.add(m, vals[a.SumCol]-mid*vals[a.CountCol])
	if err != nil {
		return 0, err
	}
	return math.Min(a.Upper, math.Max(a.Lower, mid+c/math.Max(n, 1))), nil
}

func (v *avg) Bound(name string, m noise.Mechanism) string {
	num, den := v.bar(m)
	return fmt.Sprintf("%s: ±%s/(n−%s) (95%%; n = rows in the group)", name, barText(num), barText(den))
}

// bar is the 95% bound as num/(n − den) for a group of n rows: the
// noise of the centred sum and the count with |S/n − mid| ≤ w
// (ratioBar); clamping to [lower, upper] only brings the answer closer.
// The old ±(sum's 95% bound)/n left out the count's noise and covered
// about 93% (TestCoverage).
func (v *avg) bar(m noise.Mechanism) (num, den float64) {
	return ratioBar(m, v.sum, v.count, (v.a.Upper-v.a.Lower)/2)
}

func (v *avg) Explain(name string, m noise.Mechanism) []string {
	num, den := v.bar(m)
	return []string{
		explainPart(name, label(v.a, "count"), m, v.count),
		explainPart(name, label(v.a, "centred sum"), m, v.sum),
		fmt.Sprintf("Column %s: released as the middle of the bounds plus noisy centred sum / noisy count, clamped to [%s, %s]; 95%% error ±%s/(n−%s) for a group of n rows",
			name, formatNum(v.a.Lower), formatNum(v.a.Upper), barText(num), barText(den)),
	}
}
