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

// parseGroups reads the rewritten query's rows: keys, unit count, exact
// bounded aggregates and histograms.
func parseGroups(plan *rewrite.Plan, rows [][][]byte, ncols int) ([]Group, error) {
	var groups []Group
	for _, r := range rows {
		if len(r) < ncols {
			return nil, internal("rewritten query returned %d columns, want %d", len(r), ncols)
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
				return nil, internal("rewritten query returned a malformed histogram")
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
		return nil, internal("not an array")
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
