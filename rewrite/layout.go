package rewrite

// Phase layout: which column of the rewritten query's result holds which
// part. It runs once the keys and aggregates are planned and before the
// template (template.go), which prints each part in the column given here
// and changes none of it. The result is, in order:
//
//	g0 .. g<k-1>   the group keys (GroupKey.ResultCol), k = len(GroupKeys)
//	dp_units       the number of units of the group (Plan.UnitsCol)
//	a0, a1, ...    the bounded parts of the aggregates, in the order of
//	               Plan.Aggregates, each in the order of aggParts
//
// The proxy reads the noisy values from these columns (Aggregate.SumCol,
// CountCol, SumSqCol, HistCol).

// aggPart is one bounded part of an aggregate: one column of the result.
type aggPart int

const (
	partCount aggPart = iota // CountCol: a bounded count
	partSum                  // SumCol: a bounded sum of the clamped argument
	partSumSq                // SumSqCol: a bounded sum of centred squares
	partHist                 // HistCol: a sparse histogram (histogram.go)
)

// aggParts are the parts an aggregate of each kind releases, in the order
// of their columns.
func aggParts(k AggKind) []aggPart {
	switch k {
	case AggCount, AggCountDistinctUnit, AggCountDistinct:
		return []aggPart{partCount}
	case AggSum:
		return []aggPart{partSum}
	case AggAvg:
		return []aggPart{partSum, partCount}
	case AggVariance:
		return []aggPart{partCount, partSum, partSumSq}
	case AggQuantile:
		return []aggPart{partHist}
	}
	return nil
}

// col returns where an aggregate's part is: the field of Aggregate that
// holds its column.
func (a *Aggregate) col(part aggPart) *int {
	switch part {
	case partCount:
		return &a.CountCol
	case partSum:
		return &a.SumCol
	case partSumSq:
		return &a.SumSqCol
	}
	return &a.HistCol
}

// layout assigns the result columns: each key's ResultCol (and Expr, the
// key as the template prints it), UnitsCol, each aggregate's part columns
// (the others stay -1), and DistinctValues. It sets p.width, the number of
// result columns.
func (p *planner) layout(plan *Plan) error {
	for i := range p.keys {
		e, err := parenExpr(p.keys[i].sql)
		if err != nil {
			return err
		}
		p.keys[i].key.ResultCol = i
		p.keys[i].key.Expr = e
	}
	plan.UnitsCol = len(p.keys)
	next := len(p.keys) + 1
	plan.DistinctValues = false
	for _, a := range p.aggs {
		if a.agg.Kind == AggCountDistinct {
			plan.DistinctValues = true
		}
		if a.agg.Derived() {
			continue // derive.go: computed from other aggregates' released values
		}
		for _, part := range aggParts(a.agg.Kind) {
			if part == partCount && a.agg.SharedCount != nil {
				continue // derive.go: the COUNT's column
			}
			*a.agg.col(part) = next
			next++
		}
	}
	p.width = next
	return nil
}
