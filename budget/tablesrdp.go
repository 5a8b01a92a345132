package budget

import (
	"context"
	"slices"
)

// A table's Rényi sums, kept as an analyst's are (rdpfold.go): rdp_spent,
// rdp_orders and rdp_through in dpproxy.table_budgets, a fast path over
// the fold of every charge that read the table (dpproxy.charge_tables),
// recomputed when missing, on another grid, or behind the table's newest
// charge (charged under another accounting, which does not keep them).

// withTableRDP fills t.RDP for table name when l's accountant uses it. In
// a charge it runs after the table's row lock.
func (l *Ledger) withTableRDP(ctx context.Context, q querier, name string, t Totals) (Totals, error) {
	if !l.usesRDP() {
		return t, nil
	}
	var spent, orders []float64
	var through, last *int64
	if err := q.QueryRow(ctx, `
		SELECT rdp_spent, rdp_orders, rdp_through,
		       (SELECT max(c.id) FROM dpproxy.charge_tables ct JOIN dpproxy.charges c ON c.id = ct.charge_id
		        WHERE ct.table_name = $1 AND c.action = 'charge')
		FROM dpproxy.table_budgets WHERE table_name = $1`, name).Scan(&spent, &orders, &through, &last); err != nil {
		return t, err
	}
	fresh := spent != nil && len(spent) == len(rdpOrders)+1 && slices.Equal(orders, rdpGrid()) &&
		((last == nil && through == nil) || (last != nil && through != nil && *last == *through))
	if fresh {
		t.RDP = spent
		return t, nil
	}
	var err error
	t.RDP, err = foldReleases(ctx, q, `JOIN dpproxy.charge_tables ct ON ct.charge_id = c.id WHERE ct.table_name = $1 AND c.action = 'charge'`, name)
	return t, err
}
