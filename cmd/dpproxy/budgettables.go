package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
)

// printTableBudgets lists every table budget in the ledger (budget/tables.go):
// what all analysts together spent on the table, in the configured
// accounting, and whether the configuration still sets it (a budget
// removed from the file is kept in the ledger but not enforced).
func printTableBudgets(ctx context.Context, l *budget.Ledger, cfg *conf.Config, out io.Writer) error {
	ts, err := l.TableBudgets(ctx)
	if err != nil {
		return logSafe(err)
	}
	if len(ts) == 0 {
		fmt.Fprintln(out, "table budgets: none")
		return nil
	}
	configured := cfg.TableBudgets()
	fmt.Fprintln(out, "table budgets (shared by all analysts):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "table\tepsilon_spent\tepsilon_remaining\tepsilon_limit\tdelta_spent\tdelta_remaining\tdelta_limit\taccounting\tenforced")
	for _, t := range ts {
		_, on := configured[t.Table]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Table, num(t.EpsilonSpent), num(t.EpsilonRemaining()), num(t.EpsilonLimit),
			num(t.DeltaSpent), num(t.DeltaRemaining()), num(t.DeltaLimit), t.Accounting, map[bool]string{true: "yes", false: "no (not configured)"}[on])
	}
	return tw.Flush()
}
