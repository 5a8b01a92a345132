package bounds

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

const editIn = `# shop
upstream: postgres://x@127.0.0.1/shop
auth:
  method: trust
  users:
    - {name: alice, budget: {epsilon: 1, delta: 1.0e-6}}
tables:
  Orders:   # the orders
    privacy_unit: customer_id
    max_rows_per_unit: 8 # old
    columns:
      amount: {lower: 0, upper: 500}
      region: {public_values: [north, south]}
  public.products: {public: true}
`

func TestEditKeepsCommentsAndLoads(t *testing.T) {
	cfg, err := conf.Parse("in.yaml", []byte(editIn), nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl := cfg.Table("public", "orders")
	props := []TableProposal{{
		Table: tbl, MaxRows: Row{Bound: 16, DroppedShare: 0.123456}, MaxGroups: 1,
		Groups:  []GroupProposal{{Column: "region", GroupTrade: []Row{{Bound: 1, DroppedShare: 0.02}, {Bound: 2}}}},
		Columns: []ColumnProposal{{Column: "amount", Chosen: Row{Lower: 0, Bound: 630, DroppedShare: 0.001}}},
	}}
	out, err := Edit([]byte(editIn), props, Provenance{Epsilon: 1, At: "2026-11-24"})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"# shop", "# the orders", "max_rows_per_unit: 16 # old", "max_groups_per_unit: 1",
		"amount: {lower: 0, upper: 630, bias: {lower: 0, upper: 630, sum_clamped: 0.001}}",
		"measured: dp", "epsilon: 1", "rows_dropped: 0.1235", "groups_dropped: {region: 0.02}"} {
		if !strings.Contains(s, want) {
			t.Errorf("edited file lacks %q:\n%s", want, s)
		}
	}
	got, err := conf.Parse("out.yaml", out, nil)
	if err != nil {
		t.Fatalf("edited file does not load: %v\n%s", err, s)
	}
	o := got.Table("public", "orders")
	if o.MaxRowsPerUnit != 16 || o.MaxGroupsPerUnit != 1 || o.Bias.Epsilon != 1 || o.Bias.GroupsDropped["region"] != 0.02 || *o.Columns["amount"].Upper != 630 {
		t.Errorf("loaded %+v, bias %+v", o, o.Bias)
	}
}
