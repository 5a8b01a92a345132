package dp

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/rewrite"
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
}

// Group is one result row of the rewritten query, parsed.
type Group struct {
	Keys  [][]byte // raw text of each group key (nil = NULL)
	Units float64
	Vals  []float64 // by result column index
	// Hists are the quantile histograms, by result column index.
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
		}
		groups = groups[:1]
	case s.sel == nil:
		groups = fillPublicKeys(plan, groups, ncols)
	default:
		kept := groups[:0]
		for _, g := range groups {
			ok, err := s.sel.keep(s.mech, g.Units)
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
		noisy := make([]float64, len(plan.Aggregates))
		for i, ag := range s.aggs {
			v, err := ag.Release(s.mech, s.rnd, g)
			if err != nil {
				return nil, err
			}
			noisy[i] = v
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
	a := &Answer{Charged: s.total, Bounds: s.Bounds(names)}
	for _, r := range out {
		a.Rows = append(a.Rows, r.vals)
	}
	return a, nil
}

// parseGroups reads the rewritten query's rows: keys, unit count, exact
// bounded aggregates and histograms.
func parseGroups(plan *rewrite.Plan, rows [][][]byte, ncols int) ([]Group, error) {
	var groups []Group
	for _, r := range rows {
		if len(r) < ncols {
			return nil, newError(codeInternal, "rewritten query returned %d columns, want %d", len(r), ncols)
		}
		g := Group{Vals: make([]float64, len(r))}
		for _, k := range plan.GroupKeys {
			g.Keys = append(g.Keys, r[k.ResultCol])
		}
		for i, v := range r {
			if v == nil {
				continue // an aggregate over no rows: 0
			}
			if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				g.Vals[i] = f
			}
		}
		g.Units = g.Vals[plan.UnitsCol]
		for _, a := range plan.Aggregates {
			if a.HistCol < 0 {
				continue
			}
			h, err := parseNumArray(r[a.HistCol])
			if err != nil || len(h) != a.Buckets {
				return nil, newError(codeInternal, "rewritten query returned a malformed histogram")
			}
			if g.Hists == nil {
				g.Hists = map[int][]float64{}
			}
			g.Hists[a.HistCol] = h
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// parseNumArray reads the text form of a one-dimensional numeric array
// ("{1,2.5,NULL}"); NULL counts as 0.
func parseNumArray(b []byte) ([]float64, error) {
	s := strings.TrimSpace(string(b))
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, newError(codeInternal, "not an array")
	}
	s = s[1 : len(s)-1]
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f == "NULL" {
			out = append(out, 0)
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
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

// fillPublicKeys returns one group for every combination of public key
// values, with zeros where the database had no rows, and none other.
func fillPublicKeys(plan *rewrite.Plan, groups []Group, ncols int) []Group {
	byKey := make(map[string]Group, len(groups))
	for _, g := range groups {
		byKey[joinKeys(g.Keys)] = g
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
	out := make([]Group, 0, len(combos))
	for _, c := range combos {
		if g, ok := byKey[joinKeys(c)]; ok {
			out = append(out, g)
			continue
		}
		out = append(out, Group{Keys: c, Vals: make([]float64, ncols)})
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
