package dp

import (
	"fmt"
	"io"
	"math"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// SUM(col) over a column clamped to [Lower, Upper]: one noisy sum,
// L∞ = R·max(|lower|, |upper|).

func init() {
	register(rewrite.AggSum, false, func(a *rewrite.Aggregate, p Params) (Aggregator, error) {
		return newSum(a, p)
	})
}

type sum struct {
	a   *rewrite.Aggregate
	sum Part
}

func newSum(a *rewrite.Aggregate, p Params) (*sum, error) {
	if a.SumCol < 0 {
		return nil, internal("%s: the plan has no sum column", a.Func)
	}
	s := &sum{a: a, sum: Part{sensitivity.Sum(p.L0, p.MaxRows, a.Lower, a.Upper), p.Share}}
	if err := checkParts(p.Mech, s.sum); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *sum) Parts() []Part { return []Part{s.sum} }

func (s *sum) Release(m noise.Mechanism, _ io.Reader, g *Group) (float64, error) {
	v, err := s.sum.add(m, g.Vals[s.a.SumCol])
	if err != nil {
		return 0, err
	}
	// Post-processing: a sum of values in [lower, upper] has that sign.
	if s.a.Lower >= 0 {
		v = math.Max(0, v)
	}
	if s.a.Upper <= 0 {
		v = math.Min(0, v)
	}
	return v, nil
}

func (s *sum) Bound(name string, m noise.Mechanism) string {
	return fmt.Sprintf("%s: ±%s (95%%)", name, barText(s.sum.errorBound(m)))
}

func (s *sum) Explain(name string, m noise.Mechanism) []string {
	return []string{explainPart(name, label(s.a, ""), m, s.sum)}
}
