package conf

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestPublicValuesFromTable: public_values may name a public table's
// column; it is checked (a configured public table, a column name) and
// a literal list still reads as before.
func TestPublicValuesFromTable(t *testing.T) {
	withRegion := func(spec string) string {
		return strings.Replace(good, "region: {public_values: [north, south]}", "region: {public_values: "+spec+"}", 1) +
			"  sales.regions: {public: true}\n"
	}
	c, err := Parse("t.yaml", []byte(withRegion("{table: Sales.Regions, column: name}")), env)
	if err != nil {
		t.Fatal(err)
	}
	col := c.Table("public", "orders").Columns["region"]
	if col.PublicValues != nil || col.PublicValuesFrom == nil || *col.PublicValuesFrom != (PublicValuesFrom{Table: "sales.regions", Column: "name"}) {
		t.Errorf("region = values %q, from %+v; want from sales.regions.name", col.PublicValues, col.PublicValuesFrom)
	}
	c, err = Parse("t.yaml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	if col := c.Table("public", "orders").Columns["region"]; !slices.Equal(col.PublicValues, []string{"north", "south"}) || col.PublicValuesFrom != nil {
		t.Errorf("a literal list reads as %q, %+v", col.PublicValues, col.PublicValuesFrom)
	}
	for _, tc := range []struct{ spec, want string }{
		{"{table: public.orders, column: region}", "public.orders is not configured as a public table"},
		{"{table: nowhere, column: name}", "public.nowhere is not configured as a public table"},
		{"{column: name}", "public_values.table: missing"},
		{"{table: sales.regions, column: 'a b'}", `public_values.column: "a b" is not a column name`},
		{"{table: sales.regions, column: name, where: x}", `unknown key "where"`},
		{"north", "give a list of values, or table and column"},
		{"[]", "public_values: empty list"},
	} {
		_, err := Parse("t.yaml", []byte(withRegion(tc.spec)), env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("public_values: %s: error %v, want one containing %q", tc.spec, err, tc.want)
		}
	}
}

// TestPublicValuesMarshal: a column written back keeps public_values as
// it was written, and none when it had none.
func TestPublicValuesMarshal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{public_values: [a, b]}", "lower: null\nupper: null\npublic_values:\n    - a\n    - b\n"},
		{"{public_values: {table: t, column: c}}", "lower: null\nupper: null\npublic_values:\n    column: c\n    table: t\n"},
		{"{lower: 1, upper: 2}", "lower: 1\nupper: 2\n"},
	} {
		var c Column
		if err := yaml.Unmarshal([]byte(tc.in), &c); err != nil {
			t.Fatal(err)
		}
		out, err := yaml.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != tc.want {
			t.Errorf("%s written back = %q, want %q", tc.in, out, tc.want)
		}
	}
}
