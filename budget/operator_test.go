package budget

import (
	"context"
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

// TestOperatorChargeCountsAgainstTableBudgets (red team, issue 15/16):
// dpproxy bounds measures a table with DP and the bias it finds is shown
// to every analyst in the NOTICE and EXPLAIN DP, so the operator's ε is
// part of what everyone together learns about the table: it counts
// against the table's budget (never refused), under every accounting.
// Before, a table budget of ε = 2.5 admitted two analysts' queries at
// ε = 1 after a measurement at ε = 1: ε = 3 released about the table.
func TestOperatorChargeCountsAgainstTableBudgets(t *testing.T) {
	t.Parallel()
	for _, acct := range []string{conf.AccountingBasic, conf.AccountingRDP, conf.AccountingZCDP, conf.AccountingAdvanced} {
		t.Run(acct, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := newPool(t, newDB(t), 4, nil)
			l := openTablesLedger(t, pool, users("alice", 10.0, 1e-5, "bob", 10.0, 1e-5),
				map[string]conf.Budget{"public.orders": {Epsilon: 2.5, Delta: 1e-6}, "public.visits": {Epsilon: 2.5, Delta: 1e-6}}, acct)
			// The control: without the operator's charge both fit.
			for _, a := range []string{"alice", "bob"} {
				if _, err := l.Charge(ctx, Charge{Analyst: a, Epsilon: 1, Fingerprint: a + "v", Tables: []string{"public.visits"}}); err != nil {
					t.Fatalf("%s's query over public.visits: %v", a, err)
				}
			}
			if err := l.OperatorCharge(ctx, "bounds", 1, "dpproxy bounds public.orders", "public.orders"); err != nil {
				t.Fatal(err)
			}
			if got := tableSpent(t, pool, "public.orders"); got != "1" {
				t.Errorf("table spent ε = %s after the operator's ε = 1, want 1", got)
			}
			orders := []string{"public.orders"}
			if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "a1", Tables: orders}); err != nil {
				t.Fatal(err)
			}
			_, err := l.Charge(ctx, Charge{Analyst: "bob", Epsilon: 1, Fingerprint: "b1", Tables: orders})
			var te *TableExhaustedError
			if !errors.As(err, &te) || te.Table != "public.orders" {
				t.Errorf("bob's query after the operator's and alice's: %v, want the table's budget exhausted", err)
			}
		})
	}
}
