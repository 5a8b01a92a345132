package dp

import (
	"math"
	"sort"
	"strconv"

	"github.com/dpproxy/dpproxy/sensitivity"
)

// This file turns the exact, bounded aggregates the rewritten query returns
// into the released answer: partition selection (or the public keys),
// noise, post-processing (ORDER BY, LIMIT) and encoding.

// Column is one output column of the original query as the database
// describes it.
type Column struct {
	Name string
	Type uint32 // type OID
}

// Answer is a released (noised) result.
type Answer struct {
	Rows    [][][]byte // text format, one value per output column
	Charged sensitivity.Share
	Bounds  string // the per-column error bounds, for the NOTICE
	// Detail is the contribution bounds and their known bias, for the
	// NOTICE's DETAIL (BiasText).
	Detail string
}

// Group is one result row of the rewritten query, parsed.
type Group struct {
	Keys  [][]byte // raw text of each group key (nil = NULL)
	Units float64
	Vals  []float64 // by result column index
	// Hists are the quantile histograms, by result column index, each
	// of the aggregate's Buckets counts.
	Hists map[int][]float64
}

// Release turns the exact bounded aggregates (rows, the rewritten query's
// result as text) into the released answer: partition selection (or public
// keys), noise, post-processing, encoding. cols describes the plan's
// outputs.
func (s *Spec) Release(cols []Column, rows [][][]byte) (*Answer, error) {
	plan := s.plan
	ncols := plan.UnitsCol + 1
	for _, a := range plan.Aggregates {
		ncols = max(ncols, a.SumCol+1, a.CountCol+1, a.SumSqCol+1, a.HistCol+1)
	}
	groups, err := parseGroups(plan, rows, ncols)
	if err != nil {
		return nil, err
	}
	switch {
	case len(plan.GroupKeys) == 0:
		if len(groups) == 0 {
			groups = []Group{{Vals: make([]float64, ncols)}}
			withHists(plan, &groups[0])
		}
		groups = groups[:1]
	case s.sel == nil:
		groups = fillPublicKeys(plan, groups, ncols)
	default:
		kept := groups[:0]
		for _, g := range groups {
			ok, err := s.sel.keep(s.mech, s.rnd, g.Units)
			if err != nil {
				return nil, err
			}
			if ok {
				kept = append(kept, g)
			}
		}
		groups = kept
	}
	// Order released groups by their keys, so that row order reflects
	// nothing but the released keys.
	sort.SliceStable(groups, func(i, j int) bool { return compareKeys(groups[i].Keys, groups[j].Keys) < 0 })

	type outRow struct {
		vals [][]byte
		nums []float64
	}
	out := make([]outRow, 0, len(groups))
	for gi := range groups {
		g := &groups[gi]
		noisy, err := s.noisyRow(g, cols) // derived.go
		if err != nil {
			return nil, err
		}
		row := outRow{vals: make([][]byte, len(plan.Outputs)), nums: make([]float64, len(plan.Outputs))}
		for i, o := range plan.Outputs {
			if o.GroupKey >= 0 {
				row.vals[i] = g.Keys[o.GroupKey]
				if f, err := strconv.ParseFloat(string(g.Keys[o.GroupKey]), 64); err == nil {
					row.nums[i] = f
				} else {
					row.nums[i] = math.NaN()
				}
				continue
			}
			idx := aggIndex(plan, o.Agg)
			if math.IsNaN(noisy[idx]) { // NULL: an AVG over a released count of 0
				row.nums[i] = math.NaN()
				continue
			}
			_, count := s.aggs[idx].(integral)
			row.vals[i], row.nums[i] = encodeNoisy(noisy[idx], cols[i].Type, count)
		}
		out = append(out, row)
	}
	if len(plan.OrderBy) > 0 && plan.Post == nil {
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
	if plan.Post == nil { // else LIMIT and OFFSET are applied by the post-processing query
		start := min(int(max(plan.Offset, 0)), len(out))
		out = out[start:]
		if plan.Limit >= 0 && int64(len(out)) > plan.Limit {
			out = out[:plan.Limit]
		}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	a := &Answer{Charged: s.total, Bounds: s.Bounds(names), Detail: s.BiasText()}
	for _, r := range out {
		a.Rows = append(a.Rows, r.vals)
	}
	return a, nil
}

// Type OIDs of the numeric results (pg_type).
const (
	oidInt8   = 20
	oidInt2   = 21
	oidInt4   = 23
	oidFloat4 = 700
	oidFloat8 = 701
)

// encodeNoisy formats a released value in the text format of the type
// PostgreSQL gives the original aggregate. Integer types are rounded, and
// so are counts (count) in any type.
func encodeNoisy(v float64, oid uint32, count bool) ([]byte, float64) {
	switch oid {
	case oidInt8, oidInt4, oidInt2:
		r := math.Round(v)
		return []byte(strconv.FormatFloat(r, 'f', 0, 64)), r
	case oidFloat8:
		return []byte(strconv.FormatFloat(v, 'g', -1, 64)), v
	case oidFloat4:
		return []byte(strconv.FormatFloat(v, 'g', -1, 32)), v
	default: // numeric, and anything else that reads a plain decimal
		if count {
			v = math.Round(v)
		}
		return []byte(formatNum(v)), v
	}
}
