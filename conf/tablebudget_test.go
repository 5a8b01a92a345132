package conf

import (
	"strings"
	"testing"
)

func TestTableBudget(t *testing.T) {
	withBudget := strings.Replace(good, "    privacy_unit: Customer_ID\n", "    privacy_unit: Customer_ID\n    budget: {epsilon: 50, delta: 1.0e-5}\n", 1)
	c, err := Parse("good.yaml", []byte(withBudget), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := c.TableBudgets()
	if len(got) != 1 || got["public.orders"] != (Budget{Epsilon: 50, Delta: 1e-5}) {
		t.Errorf("TableBudgets() = %v, want public.orders (50, 1e-5) only", got)
	}
	c, err = Parse("good.yaml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.TableBudgets(); len(got) != 0 {
		t.Errorf("TableBudgets() without budgets = %v, want none", got)
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"epsilon 0", strings.Replace(withBudget, "epsilon: 50", "epsilon: 0", 1), "tables.Public.Orders.budget.epsilon: must be a finite number > 0"},
		{"delta 1", strings.Replace(withBudget, "delta: 1.0e-5}", "delta: 1}", 1), "tables.Public.Orders.budget.delta: must lie in [0, 1)"},
		{"public", strings.Replace(good, "products: {public: true}", "products: {public: true, budget: {epsilon: 1, delta: 0}}", 1), "tables.products.budget: a public table takes no budget"},
		{"unknown key", strings.Replace(withBudget, "delta: 1.0e-5}", "delta: 1.0e-5, rho: 1}", 1), "rho"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("good.yaml", []byte(tc.yaml), env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
