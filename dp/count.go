package dp

import (
	"fmt"
	"io"
	"math"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// COUNT(*) and COUNT(col): one noisy count, L∞ = max_rows_per_unit.

func init() {
	register(rewrite.AggCount, false, func(a *rewrite.Aggregate, p Params) (Aggregator, error) {
		return newCounter(a, p, sensitivity.Count(p.L0, p.MaxRows))
	})
}

// counter releases one noisy count (CountCol), clamped at 0: COUNT and the
// two COUNT(DISTINCT ...) (countdistinct.go) differ only in sensitivity.
type counter struct {
	a     *rewrite.Aggregate
	count Part
}

func newCounter(a *rewrite.Aggregate, p Params, b sensitivity.Bound) (*counter, error) {
	if a.CountCol < 0 {
		return nil, internal("%s: the plan has no count column", a.Func)
	}
	c := &counter{a: a, count: Part{b, p.Share}}
	if err := checkParts(p.Mech, c.count); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *counter) Parts() []Part { return []Part{c.count} }

func (c *counter) integral() {}

func (c *counter) Release(m noise.Mechanism, _ io.Reader, g *Group) (float64, error) {
	v, err := c.count.add(m, g.Vals[c.a.CountCol])
	return math.Max(0, v), err
}

func (c *counter) Bound(name string, m noise.Mechanism) string {
	return fmt.Sprintf("%s: ±%s (95%%)", name, barText(c.bar(m)))
}

// bar is the 95% bound of the released count: the noise's, plus 0.5 for
// the rounding to an integer (the bounded count itself need not be an
// integer: rows above max_rows_per_unit are scaled down).
func (c *counter) bar(m noise.Mechanism) float64 {
	return c.count.errorBound(m) + 0.5
}

func (c *counter) Explain(name string, m noise.Mechanism) []string {
	return []string{explainPart(name, label(c.a, ""), m, c.count)}
}
