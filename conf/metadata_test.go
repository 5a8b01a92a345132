package conf

import (
	"strings"
	"testing"
)

const biasBase = `
upstream: postgres://dp@127.0.0.1/shop
auth:
  method: trust
  users:
    - {name: alice, budget: {epsilon: 10, delta: 1.0e-6}}
tables:
  orders:
    privacy_unit: customer_id
    max_rows_per_unit: 16
    max_groups_per_unit: 1
    columns:
      amount: {lower: 0, upper: 500, bias: {lower: 0, upper: 500, sum_clamped: 0.007}}
      region: {public_values: [north, south]}
    bias: {measured: dp, epsilon: 1, at: 2026-11-24, max_rows_per_unit: 16, rows_dropped: 0.12, max_groups_per_unit: 1, groups_dropped: {Region: 0}}
`

func TestBiasMetadataAccepted(t *testing.T) {
	c, err := Parse("b.yaml", []byte(biasBase), env)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Table("public", "orders")
	if o.Bias == nil || *o.Bias.RowsDropped != 0.12 || o.Bias.Measured != BiasDP || o.Bias.GroupsDropped["region"] != 0 {
		t.Errorf("bias %+v", o.Bias)
	}
	if b := o.Columns["amount"].Bias; b == nil || *b.SumClamped != 0.007 {
		t.Errorf("column bias %+v", b)
	}
}

func TestBiasMetadataRefused(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{"rows_dropped: 0.12", "rows_dropped: 1.5", "rows_dropped: must lie in [0, 1]"},
		{"max_rows_per_unit: 16, rows", "max_rows_per_unit: 8, rows", "measured for 8 but the table has max_rows_per_unit 16: stale"},
		{"max_groups_per_unit: 1, groups", "max_groups_per_unit: 4, groups", "groups_dropped was measured for 4"},
		{"measured: dp", "measured: guess", `"guess" is not one of dp, exact`},
		{"measured: dp, epsilon: 1", "measured: dp", "must be a finite number > 0 when measured is dp"},
		{"measured: dp, epsilon: 1", "measured: exact, epsilon: 1", "an exact measurement spends no ε"},
		{"{Region: 0}", "{customer_id: 0}", "groups_dropped.customer_id: not a column name other than the privacy unit"},
		{"{Region: 0}", "{a-b: 0}", "groups_dropped.a-b: not a column name"},
		{"bias: {lower: 0, upper: 500, sum", "bias: {lower: 0, upper: 400, sum", "measured for bounds [0, 400] but the column has [0, 500]: stale"},
		{"sum_clamped: 0.007", "sum_clamped: -1", "sum_clamped: must lie in [0, 1]"},
		{"- {name: alice", "- {name: '@operator'", "names starting with @ are the ledger's own"},
	} {
		if !strings.Contains(biasBase, c.from) {
			t.Fatalf("base lacks %q", c.from)
		}
		_, err := Parse("b.yaml", []byte(strings.Replace(biasBase, c.from, c.to, 1)), env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: error %v, want %q", c.from, c.to, err, c.want)
		}
	}
}
