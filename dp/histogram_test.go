package dp

import (
	"math"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// quantilePlan is a plan with one GROUP BY key (column 0), the units
// (column 1) and one quantile of [0, 8] over 4 buckets (column 2), as
// rewrite/layout.go lays it out.
func quantilePlan(public []string) *rewrite.Plan {
	a := &rewrite.Aggregate{Kind: rewrite.AggQuantile, Func: "percentile_cont", Lower: 0, Upper: 8, Quantile: 0.5, Buckets: 4,
		HistCol: 2, CountCol: -1, SumCol: -1, SumSqCol: -1}
	p := &rewrite.Plan{Table: &conf.Table{Schema: "public", Name: "t", PrivacyUnit: "uid"}, Aggregates: []*rewrite.Aggregate{a},
		GroupKeys: []rewrite.GroupKey{{ResultCol: 0, PublicValues: public}}, UnitsCol: 1, MaxGroups: 1, MaxRows: 2, Limit: -1, SQL: "SELECT 1"}
	p.Outputs = []rewrite.Output{{GroupKey: 0}, {GroupKey: -1, Agg: a}}
	return p
}

func row(vals ...string) [][]byte {
	r := make([][]byte, len(vals))
	for i, v := range vals {
		if v != "NULL" {
			r[i] = []byte(v)
		}
	}
	return r
}

// TestSparseHistogramPairs: each group's {bucket, count} pairs fill its
// dense histogram of Buckets counts, 0 where no pair came, and a group
// without pairs (NULL) has Buckets zeros.
func TestSparseHistogramPairs(t *testing.T) {
	plan := quantilePlan(nil)
	rows := [][][]byte{
		row("a", "7", "{{1,0.5},{4,1.5}}"),
		row("b", "5", "NULL"),
		row("NULL", "2", "{{1,2}}"),
	}
	groups, err := parseGroups(plan, rows, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float64{"a": {0.5, 0, 0, 1.5}, "b": {0, 0, 0, 0}, "NULL": {2, 0, 0, 0}}
	units := map[string]float64{"a": 7, "b": 5, "NULL": 2}
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3", len(groups))
	}
	for _, g := range groups {
		k := "NULL"
		if g.Keys[0] != nil {
			k = string(g.Keys[0])
		}
		h := g.Hists[2]
		if len(h) != 4 || g.Units != units[k] || g.Vals[2] != 0 {
			t.Fatalf("group %s: units %v, histogram %v, value %v", k, g.Units, h, g.Vals[2])
		}
		for i := range h {
			if h[i] != want[k][i] {
				t.Errorf("group %s: histogram %v, want %v", k, h, want[k])
				break
			}
		}
	}
	// A bucket out of range and malformed pairs are internal errors.
	for _, bad := range []string{"{{5,1}}", "{{0,1}}", "{{1}}", "{{x,1}}", "{1,2}", "{{1,y}}"} {
		if _, err := parseGroups(plan, [][][]byte{row("a", "7", bad)}, 3); err == nil {
			t.Errorf("histogram %q accepted", bad)
		}
	}
}

// TestQuantileOfNoRowsUsesAllBuckets: a group without rows (no GROUP BY
// and an empty table, or a public key the database has no row of) has a
// histogram of Buckets zeros, so its quantile is the middle of a bucket
// chosen uniformly like any other, not the lower bound (which, never the
// middle of a bucket, told the analyst the group was empty).
func TestQuantileOfNoRowsUsesAllBuckets(t *testing.T) {
	for _, plan := range []*rewrite.Plan{noKeys(quantilePlan(nil)), quantilePlan([]string{"a", "b"})} {
		p, err := NewPrivacy(conf.Laplace, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSpec(plan, p)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[float64]bool{}
		for range 200 {
			cols := []Column{{Name: "k", Type: 25}, {Name: "percentile_cont", Type: 701}}
			if len(plan.GroupKeys) == 0 {
				cols = cols[1:]
			}
			a, err := s.Release(cols, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range a.Rows {
				v, err := strconv.ParseFloat(string(r[len(r)-1]), 64)
				if err != nil || math.Mod(v, 2) != 1 {
					t.Fatalf("quantile of no rows %q, want the middle of a bucket of width 2", r[len(r)-1])
				}
				seen[v] = true
			}
		}
		if len(seen) != 4 {
			t.Errorf("quantiles of no rows %v, want all 4 bucket middles", seen)
		}
	}
}

// noKeys is plan without its GROUP BY key: units in column 0, the
// quantile in 1.
func noKeys(plan *rewrite.Plan) *rewrite.Plan {
	plan.GroupKeys, plan.UnitsCol = nil, 0
	plan.Aggregates[0].HistCol = 1
	plan.Outputs = plan.Outputs[1:]
	return plan
}
