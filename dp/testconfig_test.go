package dp_test

import (
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// The rewrite tests' configuration (rewrite/rewrite_test.go testConfig,
// rewrite/joins_test.go testRelations, rewrite/totality_test.go
// testColumnTypes), copied until one shared testdata file holds it.

const testConfig = `
upstream: postgres://dp_reader@127.0.0.1:5432/shop
auth:
  method: trust
  users:
    - name: alice
      budget: {epsilon: 10, delta: 1.0e-6}
tables:
  public.orders:
    privacy_unit: customer_id
    max_groups_per_unit: 4
    max_rows_per_unit: 8
    columns:
      amount: {lower: 0, upper: 500}
      discount: {lower: -2.5, upper: 1000}
      region: {public_values: [north, south, east, west]}
      channel: {public_values: [web, "shop's", 'back\slash']}
  public.products: {public: true}
  sales.visits:
    privacy_unit: user_id
    max_groups_per_unit: 2
    max_rows_per_unit: 3
    columns:
      duration: {lower: 0, upper: 3600}
`

var testRelations = map[string]*rewrite.Relation{
	"public.orders": {Columns: map[string]string{
		"order_id": "bigint", "customer_id": "integer", "product_id": "integer", "region": "text", "channel": "text",
		"quantity": "integer", "amount": "numeric", "discount": "numeric", "ordered_at": "timestamp with time zone",
		"score": "double precision", "sku": "text",
	}},
	"public.products": {
		Columns: map[string]string{
			"product_id": "integer", "id": "integer", "name": "text", "category": "text", "price": "numeric",
			"sku": "text", "weight": "double precision",
		},
		UniqueKeys: [][]string{{"product_id"}, {"id"}, {"name", "category"}},
	},
	"sales.visits": {Columns: map[string]string{"user_id": "integer", "duration": "integer", "product_id": "integer"}},
}

var testColumnTypes = map[string]string{
	"public.orders.order_id": "int8", "public.orders.customer_id": "int4", "public.orders.product_id": "int4",
	"public.orders.region": "text", "public.orders.channel": "text", "public.orders.quantity": "int4",
	"public.orders.amount": "numeric", "public.orders.discount": "numeric", "public.orders.ordered_at": "timestamptz",
	"public.orders.score": "float8", "public.orders.sku": "text", "public.orders.created_at": "date",
	"public.orders.shipped_on": "date", "public.orders.local_time": "timestamp", "public.orders.status": "enum",
	"public.orders.paid": "bool", "public.orders.note": "varchar", "public.orders.email": "text", "public.orders.Weird Col": "text",
	"public.orders.tags":         "_text",
	"public.products.product_id": "int4", "public.products.id": "int4", "public.products.name": "text",
	"public.products.category": "text", "public.products.price": "numeric", "public.products.sku": "text",
	"public.products.weight": "float8",
	"sales.visits.user_id":   "int4", "sales.visits.duration": "int4", "sales.visits.product_id": "int4",
	"sales.visits.visit_date": "date", "sales.visits.started": "timestamp", "sales.visits.page": "text",
}

func newTestAnalyzer(t testing.TB) *rewrite.Analyzer {
	t.Helper()
	cfg, err := conf.Parse("test.yaml", []byte(testConfig), func(string) string { return "" })
	if err != nil {
		t.Fatalf("conf.Parse: %v", err)
	}
	return rewrite.New(cfg, rewrite.Options{Relations: testRelations, ColumnTypes: testColumnTypes})
}
