package proxy

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

func TestPlanTables(t *testing.T) {
	orders := &conf.Table{Schema: "public", Name: "orders", PrivacyUnit: "customer_id"}
	visits := &conf.Table{Schema: "sales", Name: "visits", PrivacyUnit: "user_id"}
	products := &conf.Table{Schema: "public", Name: "products", Public: true}
	for _, tc := range []struct {
		name string
		plan *rewrite.Plan
		want []string
	}{
		{"one table", &rewrite.Plan{Table: orders}, []string{"public.orders"}},
		{"public only", &rewrite.Plan{Table: products}, nil},
		{"union of branches, each once, sorted", &rewrite.Plan{Table: visits, Branches: []*rewrite.Plan{
			{Table: visits}, {Table: orders}, {Table: visits},
		}}, []string{"public.orders", "sales.visits"}},
	} {
		if got := planTables(tc.plan); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: planTables = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFitsText(t *testing.T) {
	for _, tc := range []struct {
		f    budget.FitCount
		more bool
		want string
	}{
		{budget.FitCount{N: 9}, true, "9 more queries like this one fit"},
		{budget.FitCount{N: 1}, true, "1 more query like this one fits"},
		{budget.FitCount{N: 0, LimitedBy: "public.orders"}, true, "0 more queries like this one fit (the budget of table public.orders, shared by all analysts, allows the fewest)"},
		{budget.FitCount{N: budget.MaxFits}, false, "at least 500 queries like this one fit"},
	} {
		if got := fitsText(tc.f, tc.more); got != tc.want {
			t.Errorf("fitsText(%+v, %v) = %q, want %q", tc.f, tc.more, got, tc.want)
		}
	}
	if got := insertLines([]string{"a", "d"}, 1, []string{"b", "c"}); strings.Join(got, "") != "abcd" {
		t.Errorf("insertLines = %q", got)
	}
}
