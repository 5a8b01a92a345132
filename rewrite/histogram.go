package rewrite

import (
	"strconv"
	"strings"
)

// Sparse histograms: a quantile's histogram in the rewritten query
// (layout.go, template.go).
//
// A quantile's histogram is released by the exponential mechanism over
// Buckets equal buckets of [Lower, Upper] (dp/quantile.go). The database
// computes it sparse: beside the groups' rows (assemble), a UNION ALL arm
// per distinct bucket expression returns one row per group and non-empty
// bucket, with the bucket's bounded count
//
//	H(g, b) = Σ over units u that keep g: c(u, g, b) · least(1, R / n(u, g))
//
// where c(u, g, b) is u's number of rows of g whose value falls in b, n(u,
// g) all of u's rows of g (those with a NULL value or outside the
// aggregate's FILTER included, as in the groups' rows) and R is
// max_rows_per_unit. A last GROUP BY of the keys over the arms merges each
// group's rows into one (withHistograms): the group's bounded parts, and
// for each quantile a numeric[][] of {bucket, count} pairs of its
// non-empty buckets, at most Buckets of them. Groups are matched by the
// keys' equality in the database, never by their text in the proxy (equal
// numerics such as 1.0 and 1.00 print differently). The proxy puts the
// pairs into a dense histogram of Buckets counts, 0 where no pair came
// (dp/groups.go), so the mechanism sees exactly the histogram the former
// dense form (one count(*) FILTER per bucket) computed, at a cost that
// grows with the non-empty buckets instead of with Buckets.
//
// Why this bounds one unit as the exponential mechanism assumes. The
// weights are the per-unit scaling of every other aggregate: Σ_b c(u, g,
// b) ≤ n(u, g), so one unit adds at most least(1, R/n)·n ≤ R to the
// histogram of g in total (sensitivity.QuantileUtility's R), whatever the
// buckets its rows fall in. Which groups a unit keeps is decided as in the
// groups' rows: dense_rank over the unit's groups by the same seeded hash
// and keys (groupOrder) gives each (unit, group) the rank that row_number
// gives it there, and groups beyond max_groups_per_unit are dropped
// before the sum, so a unit touches at most L0 histograms. This holds in
// the histogram's arm by itself, even where the two arms' ranks could
// differ (a key whose equal values print differently hashes differently):
// dense_rank gives each of a unit's groups at least one rank, so ranks up
// to max_groups_per_unit cover at most that many groups, and a group's
// rows weigh at most R together. The histogram never leaves the proxy.

// clampSQL is x clamped to [lo, hi], written as a CASE so that
// postgres_fdw can push it down to a shard (it does not ship LEAST and
// GREATEST). It means what least(greatest(x, lo), hi) meant for every
// non-NULL x: the same result type (CASE and LEAST/GREATEST resolve their
// arguments' common type alike), NaN (larger than every number in
// PostgreSQL's ordering of numeric and float8) and +Infinity clamp to hi,
// -Infinity to lo. A NULL x compares to nothing and falls to ELSE x: NULL
// in, NULL out, as nullclamp.go requires of every clamp.
func clampSQL(x string, lo, hi float64) string {
	return "CASE WHEN " + x + " > " + numLit(hi) + " THEN " + numLit(hi) +
		" WHEN " + x + " < " + numLit(lo) + " THEN " + numLit(lo) + " ELSE " + x + " END"
}

// bucketSQL is the bucket (1 .. n) of x's value clamped to [lo, hi], or
// NULL when x is NULL: least(width_bucket(clamp(x), lo, hi, n), n), the
// upper bound in the last bucket, written as a CASE (clampSQL).
func bucketSQL(x string, lo, hi float64, n int) string {
	v := "(" + x + ")::numeric"
	b := strconv.Itoa(n)
	return "CASE WHEN " + v + " >= " + numLit(hi) + " THEN " + b +
		" WHEN " + v + " <= " + numLit(lo) + " THEN 1" +
		" ELSE width_bucket(" + v + ", " + numLit(lo) + ", " + numLit(hi) + ", " + b + ") END"
}

// hashOf is the seeded hash by which a unit orders its groups (and
// values).
func (t *template) hashOf(cols []string) string {
	return "hashtextextended(concat_ws('|', " + strings.Join(cols, ", ") + "), " + t.seed + ")"
}

// groupOrder is the order in which each unit ranks its groups: the seeded
// hash of the unit and keys, then the keys (assemble).
func (t *template) groupOrder() string {
	hash := t.hashOf(append([]string{"dp_u"}, t.keyCols...))
	if len(t.keyCols) > 0 {
		hash += ", " + strings.Join(t.keyCols, ", ")
	}
	return hash
}

// histogramBucket is the bucket expression of a quantile's rows: NULL
// for a NULL value or a row outside the aggregate's FILTER.
func histogramBucket(pa plannedAgg) (string, error) {
	agg := pa.agg
	col, err := deparseExpr(pa.arg)
	if err != nil {
		return "", err
	}
	bucket := "CASE WHEN (" + col + ") IS NULL THEN NULL ELSE " + bucketSQL(col, agg.Lower, agg.Upper, agg.Buckets) + " END"
	if pa.filter != nil {
		f, err := deparseExpr(pa.filter)
		if err != nil {
			return "", err
		}
		bucket = "CASE WHEN (" + f + ") THEN " + bucket + " END"
	}
	return bucket, nil
}

// histograms prints the rows of the quantiles' sparse histograms, one
// SELECT per distinct bucket expression (quantiles of one column, FILTER
// and bounds share their rows), each with the result's columns, NULL but
// the keys, the bucket and each of its quantiles' bounded count of the
// bucket (see the top of this file).
func (t *template) histograms(from string) ([]string, error) {
	var order []string
	share := map[string][]*Aggregate{}
	for _, i := range t.quantiles {
		pa := t.p.aggs[i]
		b, err := histogramBucket(pa)
		if err != nil {
			return nil, err
		}
		if _, ok := share[b]; !ok {
			order = append(order, b)
		}
		share[b] = append(share[b], pa.agg)
	}
	var out []string
	for _, b := range order {
		out = append(out, t.histogram(from, b, share[b]))
	}
	return out, nil
}

// histogram prints the rows of the histogram of bucket, for aggs.
func (t *template) histogram(from, bucket string, aggs []*Aggregate) string {
	nk := len(t.keyCols)
	// The per-(unit, group, bucket) rows: the unit, the keys, the WHERE
	// and public values of the group's rows (perUnit).
	inner := append(append([]string{}, t.inner[:1+nk]...), bucket+" AS dp_b", "count(*) AS dp_c")
	group := append(append([]string{}, t.innerGroup[:1+nk]...), bucket)
	var b strings.Builder
	outer := make([]string, t.p.width+1)
	for i := range outer {
		outer[i] = "NULL"
	}
	copy(outer, t.keyCols)
	for _, a := range aggs {
		outer[a.HistCol] = "sum(dp_c * least(1, " + t.r + "::numeric / dp_n))"
	}
	outer[t.p.width] = "dp_b"
	part := strings.Join(append([]string{"dp_u"}, t.keyCols...), ", ")
	mid := append(append([]string{"dp_u"}, t.keyCols...), "dp_b", "dp_c", "sum(dp_c) OVER (PARTITION BY "+part+") AS dp_n")
	if nk > 0 {
		// dense_rank: a unit's rows of one group (one per bucket) share
		// the rank row_number gives the group in the group's rows.
		mid = append(mid, "dense_rank() OVER (PARTITION BY dp_u ORDER BY "+t.groupOrder()+") AS dp_rank")
	}
	b.WriteString("SELECT " + strings.Join(outer, ", ") + "\nFROM (\n")
	b.WriteString("  SELECT " + strings.Join(mid, ", ") + "\n  FROM (\n")
	b.WriteString("    SELECT " + strings.Join(inner, ", ") + "\n    FROM " + from + "\n")
	if len(t.where) > 0 {
		b.WriteString("    WHERE " + strings.Join(t.where, " AND ") + "\n")
	}
	b.WriteString("    GROUP BY " + strings.Join(group, ", ") + "\n")
	b.WriteString("  ) AS dp_per_unit\n) AS dp_ranked\n")
	if nk > 0 {
		b.WriteString("WHERE dp_b IS NOT NULL AND dp_rank <= " + intLit(t.p.table.MaxGroupsPerUnit) + "\n")
		b.WriteString("GROUP BY " + strings.Join(t.keyCols, ", ") + ", dp_b")
	} else {
		b.WriteString("WHERE dp_b IS NOT NULL AND " + t.seed + " IS NOT NULL\n")
		b.WriteString("GROUP BY dp_b")
	}
	return b.String()
}

// withHistograms prints the rewritten query of a plan with quantiles: the
// groups' rows (assemble) and the histograms' rows (histograms), each arm
// with one more column, dp_bucket (NULL in the groups' rows), merged by a
// last GROUP BY of the keys into one row per group in the layout's
// columns: the bounded parts (max of the one non-NULL value), and each
// quantile's {bucket, count} pairs.
func (t *template) withHistograms(from string) (string, error) {
	hists, err := t.histograms(from)
	if err != nil {
		return "", err
	}
	main := append([]string{}, t.outer...)
	t.outer = append(t.outer, "NULL::integer AS dp_bucket")
	arms := t.assemble(from)
	t.outer = main
	for _, h := range hists {
		arms += "\nUNION ALL\n" + h
	}
	hist := map[int]bool{}
	for _, i := range t.quantiles {
		hist[t.p.aggs[i].agg.HistCol] = true
	}
	cols := make([]string, t.p.width)
	for col := range cols {
		// The arms' column names are the groups' rows' (assemble, put).
		var name string
		switch {
		case col < len(t.keyCols):
			name = t.keyCols[col]
		case col == len(t.keyCols):
			name = "dp_units"
		default:
			name = "a" + strconv.Itoa(col-len(t.keyCols)-1)
		}
		switch {
		case col < len(t.keyCols):
			cols[col] = name
		case hist[col]:
			cols[col] = "array_agg(ARRAY[dp_bucket, " + name + "] ORDER BY dp_bucket) FILTER (WHERE " + name + " IS NOT NULL) AS " + name
		default:
			cols[col] = "max(" + name + ") AS " + name
		}
	}
	var b strings.Builder
	b.WriteString("SELECT " + strings.Join(cols, ", ") + "\nFROM (\n" + arms + "\n) AS dp_rows")
	if len(t.keyCols) > 0 {
		// Only the groups of the groups' rows: where the arms' ranks could
		// differ (see the top of this file), a group that only a histogram
		// has is left out, not released with no units.
		b.WriteString("\nGROUP BY " + strings.Join(t.keyCols, ", ") + "\nHAVING count(dp_units) > 0")
	}
	return b.String(), nil
}
