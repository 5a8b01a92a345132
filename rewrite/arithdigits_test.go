package rewrite

import (
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestArithmeticDigitBudget (issue 14): the configured bounds do not bound
// what the rows hold, so arithmetic in aggregate arguments and keys is
// also checked with each operand's type bound (numeric(p,s): 10^(p−s);
// unbounded types are clamped): a product of numeric(1000,0) columns
// configured within [0, 1] stays within ±1e100 by the configured bounds
// but reaches 10^101000 for values the type allows, past numeric's range
// less a margin (maxArithDigits), and is refused; 99 factors are not.
func TestArithmeticDigitBudget(t *testing.T) {
	y := strings.Replace(testConfig, "discount: {lower: -2.5, upper: 1000}", "discount: {lower: 0, upper: 1}", 1)
	if y == testConfig {
		t.Fatal("the test configuration no longer bounds discount as expected")
	}
	cfg, err := conf.Parse("test.yaml", []byte(y), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := New(cfg, Options{Relations: testRelations, ColumnTypes: testColumnTypes, Database: "shop",
		NumericTypmods: map[string][2]int{"public.orders.amount": {10, 2}, "public.orders.discount": {1000, 0}}})
	product := func(n int) string {
		return strings.TrimSuffix(strings.Repeat("discount * ", n), " * ")
	}
	for _, q := range []string{
		"SELECT sum(" + product(101) + ") FROM orders",
		"SELECT floor(" + product(101) + ") AS k, count(*) FROM orders GROUP BY 1",
	} {
		_, err := a.Analyze(q)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != pgerr.InsufficientPrivilege || !strings.Contains(re.Message, "numeric's range") {
			t.Errorf("Analyze(%.60q...) = %v, want a 42501 refusal for numeric's range", q, err)
		}
	}
	st, err := a.Analyze("SELECT sum(" + product(99) + ") FROM orders")
	if err != nil {
		t.Fatalf("99 factors of numeric(1000,0): %v", err)
	}
	if strings.Contains(st[0].Plan.SQL, "LEAST(GREATEST(discount") {
		t.Errorf("a column bounded by its type is clamped before the arithmetic: %s", st[0].Plan.SQL)
	}
}
