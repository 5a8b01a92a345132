package dp

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/rewrite"
)

// The groups of the rewritten query's result: parsed, completed with the
// public keys, ordered.

// parseGroups reads the rewritten query's rows, one per group: keys, unit
// count, exact bounded aggregates and, with quantiles, each quantile's
// sparse histogram ({bucket, count} pairs of its non-empty buckets,
// rewrite/histogram.go), put into a dense histogram of Buckets counts, 0
// where no pair came. Every group, and every group added later
// (fillPublicKeys, or the one group of a query without GROUP BY and
// without rows), has every quantile's histogram at full length
// (withHists), so the exponential mechanism always chooses among all of
// its buckets.
func parseGroups(plan *rewrite.Plan, rows [][][]byte, ncols int) ([]Group, error) {
	var groups []Group
	hist := map[int]bool{}
	for _, a := range plan.Aggregates {
		if a.HistCol >= 0 {
			hist[a.HistCol] = true
		}
	}
	for _, r := range rows {
		if len(r) < ncols {
			return nil, internal("rewritten query returned %d columns, want %d", len(r), ncols)
		}
		g := Group{Vals: make([]float64, len(r))}
		for _, k := range plan.GroupKeys {
			g.Keys = append(g.Keys, r[k.ResultCol])
		}
		for i, v := range r {
			if v == nil || hist[i] {
				continue // an aggregate over no rows: 0
			}
			if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				g.Vals[i] = f
			}
		}
		g.Units = g.Vals[plan.UnitsCol]
		withHists(plan, &g)
		for _, a := range plan.Aggregates {
			if a.HistCol < 0 || r[a.HistCol] == nil {
				continue
			}
			if err := addPairs(g.Hists[a.HistCol], r[a.HistCol]); err != nil {
				return nil, err
			}
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// addPairs adds to hist the text form of a numeric[][] of {bucket, count}
// pairs ("{{1,0.5},{4,2}}"), buckets from 1 to len(hist).
func addPairs(hist []float64, b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) < 4 || !strings.HasPrefix(s, "{{") || !strings.HasSuffix(s, "}}") {
		return internal("rewritten query returned a malformed histogram")
	}
	for _, pair := range strings.Split(s[2:len(s)-2], "},{") {
		bs, cs, ok := strings.Cut(pair, ",")
		if !ok {
			return internal("rewritten query returned a malformed histogram")
		}
		bucket, err1 := strconv.Atoi(bs)
		c, err2 := strconv.ParseFloat(cs, 64)
		if err1 != nil || err2 != nil || bucket < 1 || bucket > len(hist) {
			return internal("rewritten query returned a malformed histogram")
		}
		hist[bucket-1] += c
	}
	return nil
}

// withHists gives g a histogram of zeros of full length for every
// quantile of plan.
func withHists(plan *rewrite.Plan, g *Group) {
	for _, a := range plan.Aggregates {
		if a.HistCol < 0 {
			continue
		}
		if g.Hists == nil {
			g.Hists = map[int][]float64{}
		}
		if len(g.Hists[a.HistCol]) != a.Buckets {
			g.Hists[a.HistCol] = make([]float64, a.Buckets)
		}
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
		g := Group{Keys: c, Vals: make([]float64, ncols)}
		withHists(plan, &g)
		out = append(out, g)
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
