package dp

import (
	"fmt"
	"io"
	"math"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Aggregates derived from other released aggregates of the same query
// (rewrite/derive.go): AVG = SUM/COUNT and STDDEV = sqrt(VARIANCE). They
// are post-processing of released values: no share of the budget, no
// noised part, and the row cannot contradict itself.

// derivedAvg is AVG(x) as the released SUM(x) over the released COUNT(x).
type derivedAvg struct {
	a          *rewrite.Aggregate
	sum        *sum
	count      *counter
	sumI, cntI int // the sources' indexes in Spec.aggs
}

// derivedStddev is STDDEV(x) as the square root of the released
// VARIANCE(x) of the same form.
type derivedStddev struct {
	a    *rewrite.Aggregate
	v    *variance
	varI int
}

// newDerived builds a derived aggregate from the already built aggregates
// of the spec.
func (s *Spec) newDerived(a *rewrite.Aggregate) (Aggregator, error) {
	switch {
	case a.FromSum != nil && a.FromCount != nil:
		si, ci := aggIndex(s.plan, a.FromSum), aggIndex(s.plan, a.FromCount)
		sm, ok1 := s.aggs[si].(*sum)
		c, ok2 := s.aggs[ci].(*counter)
		if !ok1 || !ok2 || s.plan.Aggregates[si] != a.FromSum || s.plan.Aggregates[ci] != a.FromCount {
			return nil, internal("%s: derived from aggregates that are not a sum and a count", a.Func)
		}
		return &derivedAvg{a: a, sum: sm, count: c, sumI: si, cntI: ci}, nil
	case a.FromVariance != nil:
		vi := aggIndex(s.plan, a.FromVariance)
		v, ok := s.aggs[vi].(*variance)
		if !ok || s.plan.Aggregates[vi] != a.FromVariance {
			return nil, internal("%s: derived from an aggregate that is not a variance", a.Func)
		}
		return &derivedStddev{a: a, v: v, varI: vi}, nil
	}
	return nil, internal("%s: derived from nothing", a.Func)
}

func (d *derivedAvg) Parts() []Part    { return nil }
func (d *derivedStddev) Parts() []Part { return nil }

// Release is never called for a derived aggregate: Spec.noisyRow computes
// it from its sources.
func (d *derivedAvg) Release(noise.Mechanism, io.Reader, *Group) (float64, error) {
	return 0, internal("%s is derived from other aggregates", d.a.Func)
}

func (d *derivedStddev) Release(noise.Mechanism, io.Reader, *Group) (float64, error) {
	return 0, internal("%s is derived from other aggregates", d.a.Func)
}

func (d *derivedAvg) Bound(name string, m noise.Mechanism) string {
	num, den := d.bar(m)
	return fmt.Sprintf("%s: ±%s/(n−%s) (95%%; n = rows in the group; %s/%s of the released values, no budget of its own)", name,
		barText(num), barText(den), d.a.FromSum.Text, d.a.FromCount.Text)
}

// bar is the AVG's 95% bound as num/(n − den) (ratioBar over the sum's
// and the count's noise, |SUM/COUNT| ≤ max(|lower|, |upper|)), widened by
// the rounding of the released count and sum (0.5 each). Moving the pair
// into the cone of consistent pairs only brings the ratio into
// [lower, upper], closer to the exact average.
func (d *derivedAvg) bar(m noise.Mechanism) (num, den float64) {
	mult := math.Max(math.Abs(d.a.Lower), math.Abs(d.a.Upper))
	num, den = ratioBar(m, d.sum.sum, d.count.count, mult)
	return num + 0.5 + 0.5*mult, den + 0.5
}

func (d *derivedAvg) Explain(name string, m noise.Mechanism) []string {
	num, den := d.bar(m)
	return []string{fmt.Sprintf("Column %s (%s): derived as %s / %s of the released values (post-processing, no budget of its own; the pair is first moved to the nearest one whose ratio lies in [%s, %s]), 95%% error ±%s/(n−%s) for a group of n rows",
		name, d.a.Func, d.a.FromSum.Text, d.a.FromCount.Text, formatNum(d.a.Lower), formatNum(d.a.Upper), barText(num), barText(den))}
}

func (d *derivedStddev) Bound(name string, m noise.Mechanism) string {
	num, den := d.v.bar(m)
	return fmt.Sprintf("%s: ±%s (95%%; n = rows in the group; √ of the released %s, no budget of its own)", name,
		stddevBarWords(num, den), d.a.FromVariance.Text)
}

func (d *derivedStddev) Explain(name string, m noise.Mechanism) []string {
	num, den := d.v.bar(m)
	return []string{fmt.Sprintf("Column %s (%s): derived as the square root of the released %s (post-processing, no budget of its own), 95%% error ±%s for a group of n rows",
		name, d.a.Func, d.a.FromVariance.Text, stddevBarWords(num, den))}
}

// noisyRow noises every aggregate of one group that is not derived, then
// makes the row consistent and computes the derived ones (all
// post-processing of the noisy values):
//
//  0. COUNT(*) without FILTER of a group released by partition selection
//     is at least 1;
//  1. the pair (SUM, COUNT) an AVG is derived from is moved to the
//     nearest pair (weighted by each part's noise variance) with
//     lower·COUNT ≤ SUM ≤ upper·COUNT, which the exact pair satisfies:
//     projecting onto a convex set that holds the truth never moves the
//     pair farther from it in that norm;
//  2. the count is rounded (as it is shown), the sum too when it is shown
//     as an integer, and the sum is kept in [lower·COUNT, upper·COUNT];
//  3. AVG = SUM/COUNT of exactly those values (NULL when COUNT is 0, as
//     PostgreSQL's AVG over no rows); an AVG or VARIANCE that shares a
//     released COUNT (rewrite.Aggregate.SharedCount) divides by it as
//     shown; STDDEV = √VARIANCE.
//
// A value is NaN for a NULL.
func (s *Spec) noisyRow(g *Group, cols []Column) ([]float64, error) {
	noisy := make([]float64, len(s.aggs))
	for i, ag := range s.aggs {
		switch ag := ag.(type) {
		case *derivedAvg, *derivedStddev:
			continue
		case *avg:
			if ag.shared {
				continue
			}
		case *variance:
			if ag.shared {
				continue
			}
		}
		v, err := ag.Release(s.mech, s.rnd, g)
		if err != nil {
			return nil, err
		}
		if a := s.plan.Aggregates[i]; s.sel != nil && a.Kind == rewrite.AggCount && a.AllRows {
			// A group released by partition selection is one the
			// rewritten query returned: COUNT(*) counts at least one
			// bounded row there, so 1 is a valid floor (the clamp only
			// brings the value closer to the exact one).
			v = math.Max(1, v)
		}
		noisy[i] = v
	}
	for i, ag := range s.aggs {
		d, ok := ag.(*derivedAvg)
		if !ok {
			continue
		}
		lo, hi := d.a.Lower, d.a.Upper
		sd := func(p Part) float64 {
			if p.Bound.LInf == 0 {
				return 0
			}
			v, err := s.mech.StdDev(p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta)
			if err != nil {
				return 0
			}
			return v
		}
		sm, c := projectRatio(noisy[d.sumI], noisy[d.cntI], lo, hi, sd(d.sum.sum), sd(d.count.count))
		c = math.Round(c)
		minS, maxS := lo*c, hi*c
		if s.intOutput(d.a.FromSum, cols) {
			sm = math.Round(sm)
			minS, maxS = math.Ceil(minS), math.Floor(maxS)
		}
		sm = math.Min(maxS, math.Max(minS, sm))
		noisy[d.sumI], noisy[d.cntI] = sm, c
		noisy[i] = math.NaN()
		if c > 0 {
			noisy[i] = sm / c
		}
	}
	// An AVG or VARIANCE sharing a released COUNT divides by it as shown.
	shared := func(a *rewrite.Aggregate) float64 {
		ci := aggIndex(s.plan, a.SharedCount)
		noisy[ci] = math.Round(noisy[ci])
		return noisy[ci]
	}
	for i, ag := range s.aggs {
		var v float64
		var err error
		switch ag := ag.(type) {
		case *avg:
			if !ag.shared {
				continue
			}
			v, err = ag.releaseWith(s.mech, g, shared(ag.a))
		case *variance:
			if !ag.shared {
				continue
			}
			v, err = ag.releaseWith(s.mech, g, shared(ag.a))
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		noisy[i] = v
	}
	for i, ag := range s.aggs {
		if d, ok := ag.(*derivedStddev); ok {
			noisy[i] = math.Sqrt(math.Max(0, noisy[d.varI]))
		}
	}
	return noisy, nil
}

// intOutput reports whether agg is shown as an integer (an integer
// column type of an output that releases it).
func (s *Spec) intOutput(agg *rewrite.Aggregate, cols []Column) bool {
	for i, o := range s.plan.Outputs {
		if o.Agg == agg && i < len(cols) {
			switch cols[i].Type {
			case oidInt8, oidInt4, oidInt2:
				return true
			}
		}
	}
	return false
}

// projectRatio moves (sum, count) to the nearest point, in the norm
// weighting each coordinate by 1/sd², of the cone
// {lower·c ≤ s ≤ upper·c, c ≥ 0}: unchanged when inside, else the nearest
// point of one of its two edges (the rays c·(1, lower) and c·(1, upper),
// c ≥ 0). An exact coordinate (sd 0) stays where it is.
func projectRatio(s, c, lower, upper, sdS, sdC float64) (float64, float64) {
	if c >= 0 && s >= lower*c && s <= upper*c {
		return s, c
	}
	if sdC == 0 {
		c = math.Max(c, 0)
		return math.Min(upper*c, math.Max(lower*c, s)), c
	}
	if sdS == 0 {
		// The count alone moves: the nearest c ≥ 0 with lower·c ≤ s ≤ upper·c.
		lo, hi := 0.0, math.Inf(1)
		if upper > 0 {
			lo = math.Max(lo, s/upper)
		}
		if lower < 0 {
			lo = math.Max(lo, s/lower)
		}
		if lower > 0 {
			hi = s / lower
		}
		if upper < 0 {
			hi = math.Min(hi, s/upper)
		}
		if lo <= hi {
			return s, math.Min(hi, math.Max(lo, c))
		}
		return s, math.Max(c, 0) // no count fits: the sum is off, leave the pair
	}
	ws, wc := 1/(sdS*sdS), 1/(sdC*sdC)
	best, bestS, bestC := math.Inf(1), 0.0, 0.0
	for _, k := range []float64{lower, upper} {
		t := math.Max(0, (wc*c+ws*k*s)/(wc+ws*k*k))
		ps, pc := k*t, t
		if dist := ws*(ps-s)*(ps-s) + wc*(pc-c)*(pc-c); dist < best {
			best, bestS, bestC = dist, ps, pc
		}
	}
	return bestS, bestC
}
