package dp

import (
	"fmt"
	"io"
	"math"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// VARIANCE/STDDEV (and their _samp/_pop forms) from three noisy sums over
// values clamped to [lower, upper], centred on mid = (lower+upper)/2 with
// half-width w: the count n, S = Σ(x−mid) and Q = Σ(x−mid)² (noised as
// Q − n·w²/2, whose sensitivity is half that of Q). Then, as
// post-processing, mean = S/n ∈ [−w, w], E[(x−mid)²] = Q/n ∈ [0, w²],
// var_pop = E[(x−mid)²] − mean² ∈ [0, w²] (the largest variance of values
// in an interval of half-width w), var_samp = var_pop·n/(n−1). Centring on
// mid makes the error depend on the width of the range, not on its
// distance from zero.

func init() {
	register(rewrite.AggVariance, false, func(a *rewrite.Aggregate, p Params) (Aggregator, error) {
		return newVariance(a, p)
	})
}

type variance struct {
	a              *rewrite.Aggregate
	count, sum, sq Part // sum and sq are centred on the middle of the bounds
}

func newVariance(a *rewrite.Aggregate, p Params) (*variance, error) {
	if a.CountCol < 0 || a.SumCol < 0 || a.SumSqCol < 0 {
		return nil, internal("%s: the plan has no count, sum or sum of squares column", a.Func)
	}
	// A third each for the count, the centred sum and the centred sum of
	// squares (sequential composition).
	third := sensitivity.Share{Epsilon: p.Share.Epsilon / 3, Delta: p.Share.Delta / 3}
	v := &variance{a: a,
		count: Part{sensitivity.Count(p.L0, p.MaxRows), third},
		sum:   Part{sensitivity.CenteredSum(p.L0, p.MaxRows, a.Lower, a.Upper), third},
		sq:    Part{sensitivity.CenteredSumOfSquares(p.L0, p.MaxRows, a.Lower, a.Upper), third},
	}
	if err := checkParts(p.Mech, v.Parts()...); err != nil {
		return nil, err
	}
	return v, nil
}

// Parts include the sum of squares: the pre-charge check once listed the
// count and the sum by hand and forgot it (TestReleaseSpecChecksEveryNoisedPart).
func (v *variance) Parts() []Part { return []Part{v.count, v.sum, v.sq} }

func (v *variance) Release(m noise.Mechanism, _ io.Reader, g *Group) (float64, error) {
	a, vals := v.a, g.Vals
	w := (a.Upper - a.Lower) / 2
	c := vals[a.CountCol]
	n, err := v.count.add(m, c)
	if err != nil {
		return 0, err
	}
	s, err := v.sum.add(m, vals[a.SumCol])
	if err != nil {
		return 0, err
	}
	q, err := v.sq.add(m, vals[a.SumSqCol]-c*w*w/2)
	if err != nil {
		return 0, err
	}
	nn := math.Max(n, 1)
	mean := math.Min(w, math.Max(-w, s/nn))
	ex2 := math.Min(w*w, math.Max(0, (q+nn*w*w/2)/nn))
	r := math.Min(w*w, math.Max(0, ex2-mean*mean))
	if a.Sample && nn >= 2 {
		r *= nn / (nn - 1)
	}
	if a.Stddev {
		r = math.Sqrt(r)
	}
	return r, nil
}

func (v *variance) Bound(name string, m noise.Mechanism) string {
	return fmt.Sprintf("%s: from a noisy count ±%s, centred sum ±%s and sum of squares ±%s", name,
		humanBound(v.count.errorBound(m)), humanBound(v.sum.errorBound(m)), humanBound(v.sq.errorBound(m)))
}

func (v *variance) Explain(name string, m noise.Mechanism) []string {
	return []string{
		explainPart(name, label(v.a, "count"), m, v.count),
		explainPart(name, label(v.a, "centred sum"), m, v.sum),
		explainPart(name, label(v.a, "sum of squares"), m, v.sq),
	}
}
