package proxy

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// This file turns the exact, bounded aggregates the rewritten query returns
// into the released answer: the budget split, partition selection (or the
// public keys), noise, post-processing (ORDER BY, LIMIT) and encoding.

// part is one noised quantity: its sensitivity and its share of the budget.
type part struct {
	bound sensitivity.Bound
	share sensitivity.Share
}

// aggSpec says how one aggregate is released. AVG uses both parts; COUNT
// uses count; SUM uses sum.
type aggSpec struct {
	count, sum part
}

// releaseSpec is everything needed to noise a plan's result, computed
// before the charge so that a bad parameter fails without charging.
type releaseSpec struct {
	mech  noise.Mechanism
	total sensitivity.Share
	aggs  []aggSpec
	// Partition selection: a group is released when its noisy number of
	// units reaches threshold.
	sel       part
	selDelta  float64 // δ of the selection: noise and threshold together
	noiseDel  float64
	threshold float64
}

func (ss *session) releaseSpec(plan *rewrite.Plan) (*releaseSpec, error) {
	mech, err := noise.ByName(ss.mechanism)
	if err != nil {
		return nil, newError(codeInvalidParameter, "%v", err)
	}
	gaussian := ss.mechanism == conf.Gaussian
	perAgg, sel, total := sensitivity.Split(ss.epsilon, ss.delta, len(plan.Aggregates), plan.PartitionSelection, gaussian)
	spec := &releaseSpec{mech: mech, total: total}
	l0, r := plan.MaxGroups, plan.MaxRows
	half := sensitivity.Share{Epsilon: perAgg.Epsilon / 2, Delta: perAgg.Delta / 2}
	for _, a := range plan.Aggregates {
		var as aggSpec
		switch a.Kind {
		case rewrite.AggCount:
			as.count = part{sensitivity.Count(l0, r), perAgg}
		case rewrite.AggCountDistinctUnit:
			as.count = part{sensitivity.DistinctUnits(l0), perAgg}
		case rewrite.AggSum:
			as.sum = part{sensitivity.Sum(l0, r, a.Lower, a.Upper), perAgg}
		case rewrite.AggAvg:
			// Half of the aggregate's share for the count, half for the
			// sum centred on the middle of the bounds (sequential composition).
			as.count = part{sensitivity.Count(l0, r), half}
			as.sum = part{sensitivity.CenteredSum(l0, r, a.Lower, a.Upper), half}
		default:
			return nil, newError(codeInternal, "unknown aggregate kind %d", a.Kind)
		}
		spec.aggs = append(spec.aggs, as)
	}
	if plan.PartitionSelection {
		// The selection's δ pays for the threshold (the chance that a group
		// of one person passes it); Gaussian noise takes half of it.
		thresholdDelta := sel.Delta
		if gaussian {
			spec.noiseDel, thresholdDelta = sel.Delta/2, sel.Delta/2
		}
		spec.sel = part{sensitivity.DistinctUnits(l0), sensitivity.Share{Epsilon: sel.Epsilon, Delta: spec.noiseDel}}
		spec.selDelta = sel.Delta
		spec.threshold, err = mech.Threshold(l0, 1, sel.Epsilon, spec.noiseDel, thresholdDelta)
		if err != nil {
			return nil, newError(codeInvalidParameter, "partition selection: %v", err)
		}
	}
	return spec, nil
}

func (p part) add(m noise.Mechanism, x float64) (float64, error) {
	if p.bound.LInf == 0 {
		// Degenerate bounds (e.g. lower = upper): the value cannot depend
		// on any person, so it needs no noise.
		return x, nil
	}
	return m.Add(x, p.bound.L0, p.bound.LInf, p.share.Epsilon, p.share.Delta)
}

func (p part) errorBound(m noise.Mechanism) float64 {
	if p.bound.LInf == 0 {
		return 0
	}
	t, err := m.ErrorBound(p.bound.L0, p.bound.LInf, p.share.Epsilon, p.share.Delta, confidence)
	if err != nil {
		return math.NaN()
	}
	return t
}

// group is one result row of the rewritten query, parsed.
type group struct {
	keys  [][]byte // raw text of each group key (nil = NULL)
	units float64
	vals  []float64 // by result column index
}

// release turns the exact bounded aggregates into the released answer:
// partition selection (or public keys), noise, post-processing, encoding.
func release(plan *rewrite.Plan, spec *releaseSpec, fields []pgproto3.FieldDescription, rows [][][]byte) (*answer, error) {
	ncols := plan.UnitsCol + 1
	for _, a := range plan.Aggregates {
		ncols = max(ncols, a.SumCol+1, a.CountCol+1)
	}
	var groups []group
	for _, r := range rows {
		if len(r) < ncols {
			return nil, newError(codeInternal, "rewritten query returned %d columns, want %d", len(r), ncols)
		}
		g := group{vals: make([]float64, len(r))}
		for _, k := range plan.GroupKeys {
			g.keys = append(g.keys, r[k.ResultCol])
		}
		for i, v := range r {
			if v == nil {
				continue // an aggregate over no rows: 0
			}
			if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				g.vals[i] = f
			}
		}
		g.units = g.vals[plan.UnitsCol]
		groups = append(groups, g)
	}

	switch {
	case len(plan.GroupKeys) == 0:
		if len(groups) == 0 {
			groups = []group{{vals: make([]float64, ncols)}}
		}
		groups = groups[:1]
	case !plan.PartitionSelection:
		groups = fillPublicKeys(plan, groups, ncols)
	default:
		kept := groups[:0]
		for _, g := range groups {
			nu, err := spec.sel.add(spec.mech, g.units)
			if err != nil {
				return nil, err
			}
			if nu >= spec.threshold {
				kept = append(kept, g)
			}
		}
		groups = kept
	}
	// Order released groups by their keys, so that row order reflects
	// nothing but the released keys.
	sort.SliceStable(groups, func(i, j int) bool { return compareKeys(groups[i].keys, groups[j].keys) < 0 })

	type outRow struct {
		vals [][]byte
		nums []float64
	}
	out := make([]outRow, 0, len(groups))
	for _, g := range groups {
		noisy := make([]float64, len(plan.Aggregates))
		for i, a := range plan.Aggregates {
			v, err := releaseAggregate(a, spec.aggs[i], spec.mech, g.vals)
			if err != nil {
				return nil, err
			}
			noisy[i] = v
		}
		row := outRow{vals: make([][]byte, len(plan.Outputs)), nums: make([]float64, len(plan.Outputs))}
		for i, o := range plan.Outputs {
			if o.GroupKey >= 0 {
				row.vals[i] = g.keys[o.GroupKey]
				if f, err := strconv.ParseFloat(string(g.keys[o.GroupKey]), 64); err == nil {
					row.nums[i] = f
				} else {
					row.nums[i] = math.NaN()
				}
				continue
			}
			idx := aggIndex(plan, o.Agg)
			row.vals[i], row.nums[i] = encodeNoisy(noisy[idx], fields[i].DataTypeOID, o.Agg)
		}
		out = append(out, row)
	}
	if len(plan.OrderBy) > 0 {
		sort.SliceStable(out, func(i, j int) bool {
			for _, k := range plan.OrderBy {
				c := compareOut(out[i].vals[k.Output], out[j].vals[k.Output], out[i].nums[k.Output], out[j].nums[k.Output], k.NullsFirst)
				if c == 0 {
					continue
				}
				if k.Descending {
					return c > 0
				}
				return c < 0
			}
			return false
		})
	}
	start := min(int(max(plan.Offset, 0)), len(out))
	out = out[start:]
	if plan.Limit >= 0 && int64(len(out)) > plan.Limit {
		out = out[:plan.Limit]
	}
	a := &answer{fields: fields, charged: spec.total, bounds: describeBounds(plan, spec, fields)}
	for _, r := range out {
		a.rows = append(a.rows, r.vals)
	}
	return a, nil
}

func aggIndex(plan *rewrite.Plan, agg *rewrite.Aggregate) int {
	for i, a := range plan.Aggregates {
		if a == agg {
			return i
		}
	}
	return 0
}

// releaseAggregate noises one aggregate of one group.
func releaseAggregate(a *rewrite.Aggregate, as aggSpec, m noise.Mechanism, vals []float64) (float64, error) {
	switch a.Kind {
	case rewrite.AggCount, rewrite.AggCountDistinctUnit:
		v, err := as.count.add(m, vals[a.CountCol])
		return math.Max(0, v), err
	case rewrite.AggSum:
		v, err := as.sum.add(m, vals[a.SumCol])
		if err != nil {
			return 0, err
		}
		// Post-processing: a sum of values in [lower, upper] has that sign.
		if a.Lower >= 0 {
			v = math.Max(0, v)
		}
		if a.Upper <= 0 {
			v = math.Min(0, v)
		}
		return v, nil
	case rewrite.AggAvg:
		mid := (a.Lower + a.Upper) / 2
		n, err := as.count.add(m, vals[a.CountCol])
		if err != nil {
			return 0, err
		}
		c, err := as.sum.add(m, vals[a.SumCol]-mid*vals[a.CountCol])
		if err != nil {
			return 0, err
		}
		return math.Min(a.Upper, math.Max(a.Lower, mid+c/math.Max(n, 1))), nil
	}
	return 0, fmt.Errorf("unknown aggregate kind %d", a.Kind)
}

// encodeNoisy formats a released value in the text format of the type
// PostgreSQL gives the original aggregate. Integer types are rounded.
func encodeNoisy(v float64, oid uint32, a *rewrite.Aggregate) ([]byte, float64) {
	switch oid {
	case oidInt8, oidInt4, oidInt2:
		r := math.Round(v)
		return []byte(strconv.FormatFloat(r, 'f', 0, 64)), r
	case oidFloat8:
		return []byte(strconv.FormatFloat(v, 'g', -1, 64)), v
	case oidFloat4:
		return []byte(strconv.FormatFloat(v, 'g', -1, 32)), v
	default: // numeric, and anything else that reads a plain decimal
		if a != nil && (a.Kind == rewrite.AggCount || a.Kind == rewrite.AggCountDistinctUnit) {
			v = math.Round(v)
		}
		return []byte(formatNum(v)), v
	}
}

// fillPublicKeys returns one group for every combination of public key
// values, with zeros where the database had no rows, and none other.
func fillPublicKeys(plan *rewrite.Plan, groups []group, ncols int) []group {
	byKey := make(map[string]group, len(groups))
	for _, g := range groups {
		byKey[joinKeys(g.keys)] = g
	}
	combos := [][][]byte{nil}
	for _, k := range plan.GroupKeys {
		var next [][][]byte
		for _, c := range combos {
			for _, v := range k.PublicValues {
				next = append(next, append(append([][]byte(nil), c...), []byte(v)))
			}
		}
		combos = next
	}
	out := make([]group, 0, len(combos))
	for _, c := range combos {
		if g, ok := byKey[joinKeys(c)]; ok {
			out = append(out, g)
			continue
		}
		out = append(out, group{keys: c, vals: make([]float64, ncols)})
	}
	return out
}

func joinKeys(keys [][]byte) string {
	var b strings.Builder
	for _, k := range keys {
		if k == nil {
			b.WriteString("\x00N")
		} else {
			b.WriteString("\x00V")
			b.Write(k)
		}
	}
	return b.String()
}

func compareKeys(a, b [][]byte) int {
	for i := range min(len(a), len(b)) {
		switch {
		case a[i] == nil && b[i] == nil:
			continue
		case a[i] == nil:
			return 1
		case b[i] == nil:
			return -1
		}
		if c := bytes.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// compareOut orders two output values: numerically when both parse as
// numbers, byte-wise otherwise; NULLs as PostgreSQL's defaults say.
func compareOut(a, b []byte, an, bn float64, nullsFirst bool) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		if nullsFirst {
			return -1
		}
		return 1
	case b == nil:
		if nullsFirst {
			return 1
		}
		return -1
	}
	if !math.IsNaN(an) && !math.IsNaN(bn) {
		switch {
		case an < bn:
			return -1
		case an > bn:
			return 1
		}
		return 0
	}
	return bytes.Compare(a, b)
}

// describeBounds words the 95% error bound of each noisy column.
func describeBounds(plan *rewrite.Plan, spec *releaseSpec, fields []pgproto3.FieldDescription) string {
	var parts []string
	for i, o := range plan.Outputs {
		if o.Agg == nil {
			continue
		}
		as := spec.aggs[aggIndex(plan, o.Agg)]
		name := string(fields[i].Name)
		switch o.Agg.Kind {
		case rewrite.AggCount, rewrite.AggCountDistinctUnit:
			parts = append(parts, fmt.Sprintf("%s: ±%s", name, roundBound(as.count.errorBound(spec.mech))))
		case rewrite.AggSum:
			parts = append(parts, fmt.Sprintf("%s: ±%s", name, roundBound(as.sum.errorBound(spec.mech))))
		case rewrite.AggAvg:
			parts = append(parts, fmt.Sprintf("%s: ±%s/n (n = rows in the group; count ±%s)", name,
				roundBound(as.sum.errorBound(spec.mech)), roundBound(as.count.errorBound(spec.mech))))
		}
	}
	return strings.Join(parts, ", ")
}

func roundBound(v float64) string {
	if math.IsNaN(v) {
		return "?"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
