package budget

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Per-table budgets (issue 15, item 3). An analyst's budget bounds what
// that analyst learns; two analysts who pool their answers learn what the
// sum of their budgets allows. A table's budget (tables.<t>.budget) bounds
// what every analyst together learns about the table's rows: each charge
// counts against the analyst's row in dpproxy.budgets and against the row
// in dpproxy.table_budgets of every budgeted table the query reads, and a
// query is admitted only if the configured accountant keeps every one of
// those rows within its limits.
//
// One transaction: Ledger.charge locks the analyst's row, then the rows of
// the touched tables in sorted order (lockOrder), asks the accountant on
// each, and writes them all with the charge's record, or nothing. Every
// charge takes its locks in the same global order (analyst first, then
// tables by name; an analyst charge holds exactly one analyst row), so two
// concurrent charges cannot wait for each other in a cycle, and each reads
// what the one before it on the same row wrote: the table's limit holds
// against any number of analysts, connections and proxy processes.
//
// History: dpproxy.charge_tables records which private tables each charge
// touched (budgeted or not), append-only like dpproxy.charges. A table
// whose budget is configured after queries already read it starts from the
// spend those recorded charges add up to (Open), so adding a budget never
// forgives what was released since this version; charges made before this
// version recorded no tables and are not counted against any table.
//
// The answer cache: a cached answer is the same release, paid for once;
// returning it again costs neither the analyst nor the table anything.
// (Answers are cached per analyst: a second analyst asking the same
// question gets fresh noise and pays, and so does the table.)

// tableDDL creates the ledger's per-table tables (every statement is
// idempotent). Open runs it after schemaDDL, since charge_tables refers
// to dpproxy.charges.
func tableDDL() []string {
	return []string{
		// The same totals as dpproxy.budgets (budgetColumns reads both),
		// keyed by the table's qualified name. An accountant's new total
		// gets a column here as well as there.
		`CREATE TABLE IF NOT EXISTS dpproxy.table_budgets (
			table_name         text PRIMARY KEY,
			epsilon_limit      numeric NOT NULL,
			delta_limit        numeric NOT NULL,
			epsilon_spent      numeric NOT NULL DEFAULT 0,
			delta_spent        numeric NOT NULL DEFAULT 0,
			rho_spent          numeric NOT NULL DEFAULT 0,
			delta_approx_spent numeric NOT NULL DEFAULT 0,
			epsilon_sq_spent   numeric NOT NULL DEFAULT 0,
			updated_at         timestamptz
		)`,
		`CREATE TABLE IF NOT EXISTS dpproxy.charge_tables (
			charge_id  bigint NOT NULL REFERENCES dpproxy.charges (id),
			table_name text NOT NULL,
			PRIMARY KEY (charge_id, table_name)
		)`,
		`CREATE INDEX IF NOT EXISTS charge_tables_table ON dpproxy.charge_tables (table_name)`,
		// The Rényi accountant's sums of the table, as in dpproxy.budgets
		// (rdpfold.go, tablesrdp.go).
		`ALTER TABLE dpproxy.table_budgets
			ADD COLUMN IF NOT EXISTS rdp_spent   float8[],
			ADD COLUMN IF NOT EXISTS rdp_orders  float8[],
			ADD COLUMN IF NOT EXISTS rdp_through bigint`,
		`CREATE OR REPLACE TRIGGER charge_tables_append_only BEFORE UPDATE OR DELETE ON dpproxy.charge_tables
			FOR EACH ROW EXECUTE FUNCTION dpproxy.append_only()`,
		`CREATE OR REPLACE TRIGGER charge_tables_no_truncate BEFORE TRUNCATE ON dpproxy.charge_tables
			FOR EACH STATEMENT EXECUTE FUNCTION dpproxy.append_only()`,
	}
}

// tablesCurrent is the part of schemaCurrent for the per-table tables.
const tablesCurrent = `to_regclass('dpproxy.table_budgets') IS NOT NULL AND to_regclass('dpproxy.charge_tables') IS NOT NULL
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dpproxy.table_budgets') AND attname = 'rdp_through' AND NOT attisdropped)`

// openTables sets each configured table's limits in tx (Open's
// transaction, under the schema lock), in sorted order. A table new to the
// ledger starts with the spend of the recorded charges that touched it.
// Limit changes are recorded in dpproxy.charges (action "table_limit",
// analyst "", the table's name as fingerprint, actor "config"). Tables in
// the ledger but no longer configured are left alone (and not enforced).
func openTables(ctx context.Context, tx pgx.Tx, budgets map[string]conf.Budget) error {
	for _, name := range sortedKeys(budgets) {
		b := budgets[name]
		if !conf.ValidEpsilon(b.Epsilon) || !conf.ValidDelta(b.Delta) {
			return fmt.Errorf("table %q: invalid budget ε=%v, δ=%v", name, b.Epsilon, b.Delta)
		}
		var eps, delta string
		err := tx.QueryRow(ctx, `
			INSERT INTO dpproxy.table_budgets AS b (table_name, epsilon_limit, delta_limit,
				epsilon_spent, delta_spent, rho_spent, delta_approx_spent, epsilon_sq_spent, updated_at)
			SELECT $1, $2::numeric, $3::numeric,
				coalesce(sum(c.epsilon), 0), coalesce(sum(c.delta), 0), coalesce(sum(c.rho), 0),
				coalesce(sum(c.delta_approx), 0), coalesce(sum(c.epsilon * c.epsilon), 0), now()
			FROM dpproxy.charge_tables t JOIN dpproxy.charges c ON c.id = t.charge_id
			WHERE t.table_name = $1 AND c.action = 'charge'
			ON CONFLICT (table_name) DO UPDATE
			SET epsilon_limit = EXCLUDED.epsilon_limit, delta_limit = EXCLUDED.delta_limit, updated_at = now()
			WHERE b.epsilon_limit IS DISTINCT FROM EXCLUDED.epsilon_limit
			   OR b.delta_limit IS DISTINCT FROM EXCLUDED.delta_limit
			RETURNING epsilon_limit::text, delta_limit::text`,
			name, decimal(b.Epsilon), decimal(b.Delta)).Scan(&eps, &delta)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // unchanged
		}
		if err != nil {
			return fmt.Errorf("set limits of table %q: %w", name, err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, action, actor)
			VALUES ('', $1, $2::numeric, $3::numeric, 'table_limit', 'config')`, name, eps, delta); err != nil {
			return fmt.Errorf("audit limits of table %q: %w", name, err)
		}
	}
	return nil
}

// lockOrder is the tables of a charge in the order their rows are locked:
// sorted, each once.
func lockOrder(tables []string) []string {
	out := append([]string(nil), tables...)
	sort.Strings(out)
	j := 0
	for i, t := range out {
		if i == 0 || t != out[j-1] {
			out[j] = t
			j++
		}
	}
	return out[:j]
}

// tableState is one budgeted table's row as a charge found it and what the
// charge makes of it.
type tableState struct {
	name          string
	totals, next  Totals
	limits        Limits
	budgetedTable bool
}

// composeTables locks the row of every budgeted table c touches, in
// lockOrder, and asks the accountant whether c fits each. It runs in the
// charge's transaction, after the analyst's row is locked. Tables without
// a configured budget (budgeted) are returned unbudgeted: the charge records that it touched
// them, and that is all. A table whose budget c would exceed refuses the
// whole charge with *TableExhaustedError.
func (l *Ledger) composeTables(ctx context.Context, tx pgx.Tx, c Charge) ([]tableState, error) {
	var out []tableState
	for _, name := range lockOrder(c.Tables) {
		if !l.budgeted(name) {
			out = append(out, tableState{name: name})
			continue
		}
		var r budgetRow
		err := tx.QueryRow(ctx, `SELECT `+budgetColumns+` FROM dpproxy.table_budgets WHERE table_name = $1 FOR UPDATE`,
			name).Scan(r.dest()...)
		if errors.Is(err, pgx.ErrNoRows) {
			// Open creates the row of every configured budget: without
			// it the limit is unknown, so nothing runs.
			return nil, unavailable(fmt.Errorf("no row for the budget of table %q in dpproxy.table_budgets", name))
		}
		if err != nil {
			return nil, unavailable(err)
		}
		t, lim, err := r.parse()
		if err != nil {
			return nil, unavailable(err)
		}
		if t, err = l.withTableRDP(ctx, tx, name, t); err != nil { // tablesrdp.go
			return nil, unavailable(err)
		}
		next, ok := l.acct.Compose(t, lim, c)
		if !ok {
			return nil, &TableExhaustedError{Table: name, Requested: c, Remaining: l.acct.Report(t, lim)}
		}
		out = append(out, tableState{name: name, totals: t, next: next, limits: lim, budgetedTable: true})
	}
	return out, nil
}

// budgeted reports whether the ledger was opened with a budget for table
// name: only configured budgets are enforced, so that removing a table's
// budget from the configuration lifts it (its row and spend stay, and
// count again if it is configured again). Proxies sharing a ledger share
// their configuration, as they do for analysts' budgets.
func (l *Ledger) budgeted(name string) bool {
	i := sort.SearchStrings(l.tables, name)
	return i < len(l.tables) && l.tables[i] == name
}

// writeTables writes the new totals of every budgeted table and records
// which tables charge id touched, in the charge's transaction.
func (l *Ledger) writeTables(ctx context.Context, tx pgx.Tx, id int64, ts []tableState) error {
	for _, s := range ts {
		if s.budgetedTable && l.usesRDP() {
			if _, err := tx.Exec(ctx, `UPDATE dpproxy.table_budgets SET rdp_spent = $2, rdp_orders = $3, rdp_through = $4 WHERE table_name = $1`,
				s.name, s.next.rdp(), rdpGrid(), id); err != nil {
				return unavailable(err)
			}
		}
		if s.budgetedTable {
			if _, err := tx.Exec(ctx, `
				UPDATE dpproxy.table_budgets
				SET epsilon_spent = $2::numeric,
				    delta_spent = $3::numeric,
				    rho_spent = $4::numeric,
				    delta_approx_spent = $5::numeric,
				    epsilon_sq_spent = $6::numeric,
				    updated_at = now()
				WHERE table_name = $1`,
				s.name, s.next.Epsilon.String(), s.next.Delta.String(), s.next.Rho.String(), s.next.DeltaApprox.String(),
				s.next.EpsilonSq.String()); err != nil {
				return unavailable(err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO dpproxy.charge_tables (charge_id, table_name) VALUES ($1, $2)`, id, s.name); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// TableSpend is one table's budget, spent by every analyst together, in
// the figures of the ledger's accountant.
type TableSpend struct {
	Table string
	Spend
}

// TableBudgets returns the budgets of the given tables that the ledger
// holds, by name; with no names, every table budget in the ledger (for
// operators: also tables no longer configured). It returns
// *UnavailableError when the ledger cannot be read.
func (l *Ledger) TableBudgets(ctx context.Context, names ...string) ([]TableSpend, error) {
	q := `SELECT table_name, ` + budgetColumns + ` FROM dpproxy.table_budgets`
	args := []any{}
	if len(names) > 0 {
		q += ` WHERE table_name = ANY($1)`
		args = append(args, names)
	}
	rows, err := l.pool.Query(ctx, q+` ORDER BY table_name`, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []TableSpend
	for rows.Next() {
		var ts TableSpend
		var r budgetRow
		if err := rows.Scan(append([]any{&ts.Table}, r.dest()...)...); err != nil {
			return nil, unavailable(err)
		}
		t, lim, err := r.parse()
		if err != nil {
			return nil, unavailable(err)
		}
		if t, err = l.withTableRDP(ctx, l.pool, ts.Table, t); err != nil { // tablesrdp.go
			return nil, unavailable(err)
		}
		ts.Spend = l.acct.Report(t, lim)
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// ConfiguredTables is the table budgets the ledger was opened with, by
// name (TableBudgets(ctx, l.ConfiguredTables()...) reads them).
func (l *Ledger) ConfiguredTables() []string { return l.tables }

// TableExhaustedError refuses a charge that would exceed the budget of a
// table the query reads: the budget every analyst's queries over the table
// share. Nothing was recorded.
type TableExhaustedError struct {
	Table     string
	Requested Charge
	// Remaining is the table's budget as the refusal found it.
	Remaining Spend
}

func (e *TableExhaustedError) Error() string {
	return fmt.Sprintf("privacy budget of table %s exceeded: this query needs ε=%v, δ=%v; the table, shared by all analysts, has ε=%v, δ=%v remaining",
		e.Table, e.Requested.Epsilon, e.Requested.Delta, e.Remaining.EpsilonRemaining(), e.Remaining.DeltaRemaining())
}

// SQLState is configuration_limit_exceeded (pgerr.BudgetExhausted), as
// for the analyst's own budget.
func (e *TableExhaustedError) SQLState() string { return string(pgerr.BudgetExhausted) }

// Refused is true: the charge was refused, nothing ran.
func (e *TableExhaustedError) Refused() bool { return true }

func sortedKeys(m map[string]conf.Budget) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
