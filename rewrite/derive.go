package rewrite

// Phase derive: aggregates that are functions of other aggregates of the
// same query over the same rows are computed from those aggregates'
// released (noisy) values instead of being noised themselves. That is
// post-processing: it costs no budget, so the query's ε is split among
// fewer parts (each less noisy), and the released row cannot contradict
// itself (AVG = SUM/COUNT exactly).
//
//   - AVG(x) FILTER (f) is SUM(x) FILTER (f) / COUNT(x) FILTER (f) when
//     the query asks for both and x's bounds hold zero (lower ≤ 0 ≤
//     upper). COUNT(*) FILTER (f) qualifies only when x is a column of
//     the private table declared NOT NULL (Options.NotNull): otherwise it
//     also counts the rows where x is NULL, which AVG skips. The bounds: a noised AVG centres its sum
//     on the middle of the bounds (noise ∝ (upper − lower)/2), a SUM
//     cannot (noise ∝ max(|lower|, |upper|)); with lower ≤ 0 ≤ upper the
//     SUM's noise is at most twice the centred one's and, as the SUM and
//     COUNT each get the share the AVG would have split in two, the
//     derived AVG is never noisier than a noised one (and the SUM and
//     COUNT are less noisy). Over [1000, 1010] it would be a hundred
//     times noisier, so there AVG keeps its own share.
//   - An AVG(x) or VARIANCE(x) that is not derived shares the count of a
//     COUNT(x) of the same rows in the query (SharedCount): it divides by
//     the released COUNT instead of noising a count of its own, so its
//     other parts get its whole share.
//   - STDDEV(x) (and its _samp/_pop forms) is the square root of
//     VARIANCE(x) of the same form (var_samp for stddev_samp, var_pop for
//     stddev_pop) when the query asks for it.
//
// "The same argument" and "the same rows" are decided on the printed
// argument and FILTER, which also fix the clamping bounds.

// derive sets FromSum/FromCount and FromVariance. It runs before layout,
// which gives derived aggregates no result columns.
func (p *planner) derive() error {
	texts := make([]struct{ arg, filter string }, len(p.aggs))
	for i, a := range p.aggs {
		var err error
		if a.arg != nil {
			if texts[i].arg, err = deparseExpr(a.arg); err != nil {
				return err
			}
		}
		if a.filter != nil {
			if texts[i].filter, err = deparseExpr(a.filter); err != nil {
				return err
			}
		}
	}
	same := func(i, j int) bool {
		a, b := p.aggs[i], p.aggs[j]
		return a.arg != nil && b.arg != nil && texts[i] == texts[j] &&
			(a.filter == nil) == (b.filter == nil)
	}
	// countsSame reports whether aggregate j is a COUNT of the rows
	// aggregate i reads: COUNT(x) of the same argument and FILTER, or
	// COUNT(*) with the same FILTER when x is a column of the private
	// table declared NOT NULL (the private table is never on the nullable
	// side of a join, so its columns are never NULL-extended).
	countsSame := func(i, j int) bool {
		a, b := p.aggs[i], p.aggs[j]
		if b.agg.Kind != AggCount {
			return false
		}
		if same(i, j) {
			return true
		}
		if b.arg != nil || a.arg == nil || texts[i].filter != texts[j].filter || (a.filter == nil) != (b.filter == nil) {
			return false
		}
		ref := a.arg.GetColumnRef()
		if ref == nil {
			return false
		}
		c, err := p.column(ref)
		return err == nil && c.private && p.a.opts.NotNull[p.table.QualifiedName()+"."+c.name]
	}
	for i, a := range p.aggs {
		switch {
		case a.agg.Kind == AggVariance && a.agg.Stddev:
			for j, b := range p.aggs {
				if same(i, j) && b.agg.Kind == AggVariance && !b.agg.Stddev && b.agg.Sample == a.agg.Sample &&
					b.agg.Lower == a.agg.Lower && b.agg.Upper == a.agg.Upper {
					a.agg.FromVariance = b.agg
					break
				}
			}
		}
	}
	for i, a := range p.aggs {
		switch {
		case a.agg.Kind == AggAvg:
			var sum, count *Aggregate
			for j, b := range p.aggs {
				switch {
				case same(i, j) && b.agg.Kind == AggSum && b.agg.Lower == a.agg.Lower && b.agg.Upper == a.agg.Upper && sum == nil &&
					a.agg.Lower <= 0 && a.agg.Upper >= 0:
					sum = b.agg
				case countsSame(i, j) && count == nil:
					count = b.agg
				}
			}
			if sum != nil && count != nil {
				a.agg.FromSum, a.agg.FromCount = sum, count
			}
		}
		if a.agg.Derived() || (a.agg.Kind != AggAvg && a.agg.Kind != AggVariance) {
			continue
		}
		for j, b := range p.aggs {
			if countsSame(i, j) {
				a.agg.SharedCount = b.agg
				break
			}
		}
	}
	return nil
}

// NotNullSQL reads the columns declared NOT NULL of the tables named by
// $1 ("schema.table"), as Options.NotNull wants them: one row per column,
// "schema.table.column".
const NotNullSQL = `SELECT n.nspname || '.' || c.relname || '.' || a.attname
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname || '.' || c.relname = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped AND a.attnotnull`
