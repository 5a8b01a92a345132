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
	// shared is set when the count is a COUNT(x) of the same rows
	// released in the query (Aggregate.SharedCount): count is then that
	// COUNT's part, not one of this aggregate's, and countCol its column.
	shared   bool
	countCol int
}

func newAvg(a *rewrite.Aggregate, p Params) (*avg, error) {
	v := &avg{a: a, countCol: a.CountCol}
	if c := a.SharedCount; c != nil {
		// The whole share for the centred sum; the count is the COUNT's.
		v.shared, v.countCol = true, c.CountCol
		v.count = Part{sensitivity.Count(p.L0, p.MaxRows), p.Share}
		v.sum = Part{sensitivity.CenteredSum(p.L0, p.MaxRows, a.Lower, a.Upper), p.Share}
	} else {
		// Half of the aggregate's share for the count, half for the sum
		// centred on the middle of the bounds (sequential composition).
		half := sensitivity.Share{Epsilon: p.Share.Epsilon / 2, Delta: p.Share.Delta / 2}
		v.count = Part{sensitivity.Count(p.L0, p.MaxRows), half}
		v.sum = Part{sensitivity.CenteredSum(p.L0, p.MaxRows, a.Lower, a.Upper), half}
	}
	if v.countCol < 0 || a.SumCol < 0 {
		return nil, internal("%s: the plan has no count or sum column", a.Func)
	}
	if err := checkParts(p.Mech, v.Parts()...); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *avg) Parts() []Part {
	if v.shared {
		return []Part{v.sum}
	}
	return []Part{v.count, v.sum}
}

func (v *avg) Release(m noise.Mechanism, _ io.Reader, g *Group) (float64, error) {
	if v.shared {
		return 0, internal("%s divides by a released count", v.a.Func)
	}
	n, err := v.count.add(m, g.Vals[v.countCol])
	if err != nil {
		return 0, err
	}
	return v.releaseWith(m, g, n)
}

// releaseWith releases the average over a noisy count n (its own, or the
// released COUNT it shares).
func (v *avg) releaseWith(m noise.Mechanism, g *Group, n float64) (float64, error) {
	a, vals := v.a, g.Vals
	mid := (a.Lower + a.Upper) / 2
	c, err := v.sum.add(m, vals[a.SumCol]-mid*vals[v.countCol])
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
	w := (v.a.Upper - v.a.Lower) / 2
	num, den = ratioBar(m, v.sum, v.count, w)
	if v.shared { // the released count is rounded
		num, den = num+0.5*w, den+0.5
	}
	return num, den
}

func (v *avg) Explain(name string, m noise.Mechanism) []string {
	num, den := v.bar(m)
	count := explainPart(name, label(v.a, "count"), m, v.count)
	if v.shared {
		count = fmt.Sprintf("Column %s (%s, count part): the released %s (the same rows), no share of its own", name, v.a.Func, v.a.SharedCount.Text)
	}
	return []string{
		count,
		explainPart(name, label(v.a, "centred sum"), m, v.sum),
		fmt.Sprintf("Column %s: released as the middle of the bounds plus noisy centred sum / noisy count, clamped to [%s, %s]; 95%% error ±%s/(n−%s) for a group of n rows",
			name, formatNum(v.a.Lower), formatNum(v.a.Upper), barText(num), barText(den)),
	}
}
