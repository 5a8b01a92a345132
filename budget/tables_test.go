package budget

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/conf"
)

func TestLockOrder(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"public.orders"}, []string{"public.orders"}},
		{[]string{"s.b", "public.a", "s.b", "public.a"}, []string{"public.a", "s.b"}},
	} {
		if got := lockOrder(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("lockOrder(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func openTablesLedger(t *testing.T, pool *pgxpool.Pool, us []conf.User, tables map[string]conf.Budget, acct string) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), pool, us, Options{Accounting: acct, TableBudgets: tables})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func tableSpent(t *testing.T, pool *pgxpool.Pool, table string) string {
	t.Helper()
	return queryText(t, pool, `SELECT epsilon_spent::text FROM dpproxy.table_budgets WHERE table_name = $1`, table)
}

// TestTableBudgetPooled: two analysts, each with ample budget of their
// own, share a table budget that two of their queries exhaust: the third
// is refused for either of them, naming the table, and nothing of it is
// recorded; a query over another table still runs.
func TestTableBudgetPooled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, newDB(t), 4, nil)
	l := openTablesLedger(t, pool, users("alice", 10.0, 1e-5, "bob", 10.0, 1e-5),
		map[string]conf.Budget{"public.orders": {Epsilon: 2.5, Delta: 1e-6}}, conf.AccountingBasic)
	orders := []string{"public.orders"}
	if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "a1", Tables: orders}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, Charge{Analyst: "bob", Epsilon: 1, Fingerprint: "b1", Tables: orders}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"alice", "bob"} {
		_, err := l.Charge(ctx, Charge{Analyst: a, Epsilon: 1, Fingerprint: "x", Tables: orders})
		var te *TableExhaustedError
		if !errors.As(err, &te) {
			t.Fatalf("%s's third query over public.orders: err = %v, want TableExhaustedError", a, err)
		}
		if te.SQLState() != "53400" || te.Table != "public.orders" {
			t.Errorf("refusal = %+v (SQLSTATE %s)", te, te.SQLState())
		}
		want := "privacy budget of table public.orders exceeded: this query needs ε=1, δ=0; the table, shared by all analysts, has ε=0.5, δ=1e-06 remaining"
		if err.Error() != want {
			t.Errorf("message = %q, want %q", err.Error(), want)
		}
	}
	if got := chargeCount(t, pool, "alice") + "/" + chargeCount(t, pool, "bob"); got != "1/1" {
		t.Errorf("charges recorded alice/bob = %s, want 1/1 (refusals record nothing)", got)
	}
	if got := queryText(t, pool, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = 'alice'`); !numEq(t, got, "1") {
		t.Errorf("alice's epsilon_spent = %s, want 1 (a refused charge costs the analyst nothing)", got)
	}
	if got := tableSpent(t, pool, "public.orders"); !numEq(t, got, "2") {
		t.Errorf("public.orders epsilon_spent = %s, want 2", got)
	}
	// A query over a table without a budget, or over none, still runs,
	// and the table it read is recorded.
	if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "c", Tables: []string{"public.customers"}}); err != nil {
		t.Fatal(err)
	}
	if got := queryText(t, pool, `SELECT string_agg(table_name, ',' ORDER BY charge_id) FROM dpproxy.charge_tables`); got != "public.orders,public.orders,public.customers" {
		t.Errorf("charge_tables = %s", got)
	}
	// The table's remaining budget fits a smaller query.
	if _, err := l.Charge(ctx, Charge{Analyst: "bob", Epsilon: 0.5, Fingerprint: "b2", Tables: orders}); err != nil {
		t.Errorf("0.5 within the table's remaining 0.5: %v", err)
	}
	ts, err := l.TableBudgets(ctx, l.ConfiguredTables()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Table != "public.orders" || ts[0].EpsilonSpent != 2.5 || ts[0].EpsilonRemaining() != 0 || ts[0].DeltaRemaining() != 1e-6 {
		t.Errorf("TableBudgets = %+v", ts)
	}
	// The analyst's own budget is refused first, with its own error.
	if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 9, Fingerprint: "big", Tables: orders}); !errors.As(err, new(*ExhaustedError)) {
		t.Errorf("over alice's own budget: err = %v, want ExhaustedError", err)
	}
}

// TestTableBudgetUnderEveryAccountant: the configured accountant decides
// on the table's row as on the analyst's, for every accountant
// privacy.accounting can name: queries by two analysts over a table are
// admitted exactly as many times as the accountant, as a pure function,
// admits the same charge in a row (Fits), and the table's budget then
// reads as the accountant reports those totals. An accountant whose state
// the table's row does not keep (a column of dpproxy.budgets missing from
// dpproxy.table_budgets, or a fold the table's charges are not read into)
// fails here.
func TestTableBudgetUnderEveryAccountant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admitted := map[string]int{}
	lim := Limits{Epsilon: numericOf(2), Delta: numericOf(1e-5)}
	for _, acct := range accountants() {
		name := acct.Name()
		pool := newPool(t, newDB(t), 2, nil)
		l := openTablesLedger(t, pool, users("alice", 100.0, 1e-3, "bob", 100.0, 1e-3),
			map[string]conf.Budget{"public.orders": {Epsilon: 2, Delta: 1e-5}}, name)
		c := Charge{Epsilon: 0.05, Fingerprint: "q", Tables: []string{"public.orders"}}
		n := 0
		for i := range 2 * MaxFits {
			c.Analyst = []string{"alice", "bob"}[i%2]
			_, err := l.Charge(ctx, c)
			if errors.As(err, new(*TableExhaustedError)) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			n++
		}
		admitted[name] = n
		if want := Fits(acct, Totals{}, lim, c); n != want {
			t.Errorf("%s: %d queries of ε=0.05 by two analysts admitted within the table budget (2, 1e-5), want %d (the accountant alone)", name, n, want)
		}
		tot := Totals{}
		for range n {
			tot, _ = acct.Compose(tot, lim, c)
		}
		want := acct.Report(tot, lim)
		ts, err := l.TableBudgets(ctx, "public.orders")
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 || ts[0].EpsilonSpent != want.EpsilonSpent || ts[0].DeltaSpent != want.DeltaSpent ||
			ts[0].EpsilonRemaining() != want.EpsilonRemaining() || ts[0].DeltaRemaining() != want.DeltaRemaining() {
			t.Errorf("%s: table budget reads %+v, want %+v", name, ts, want)
		}
	}
	if admitted[conf.AccountingBasic] != 40 {
		t.Errorf("basic admitted %d queries of ε=0.05 within a table budget of 2, want 40", admitted[conf.AccountingBasic])
	}
	for name, n := range admitted {
		if n < admitted[conf.AccountingBasic] {
			t.Errorf("%s admitted %d, fewer than basic's %d", name, n, admitted[conf.AccountingBasic])
		}
	}
	t.Logf("queries of ε=0.05 by two analysts within the table budget (2, 1e-5): %v", admitted)
}

// TestTableBudgetConcurrent: several analysts charging at once over two
// budgeted tables, each charge naming them in either order, never
// overspend either table (nor deadlock: every charge locks its analyst,
// then the tables sorted), and every admitted charge is counted on both.
func TestTableBudgetConcurrent(t *testing.T) {
	t.Parallel()
	dbURL := newDB(t)
	admin := newPool(t, dbURL, 2, nil)
	budgets := map[string]conf.Budget{"public.a": {Epsilon: 3, Delta: 1e-5}, "public.b": {Epsilon: 4, Delta: 1e-5}}
	analysts := []string{"ann", "bob", "cy", "dee"}
	var us []conf.User
	for _, a := range analysts {
		us = append(us, conf.User{Name: a, Budget: conf.Budget{Epsilon: 100, Delta: 1e-3}})
	}
	openTablesLedger(t, admin, us, budgets, conf.AccountingBasic)
	const workers, tries = 24, 8
	amounts := []float64{0.1, 0.2, 0.05, 0.3}
	var mu sync.Mutex // guards okA, okB, failures
	okA, okB := new(big.Rat), new(big.Rat)
	var failures []error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		pool := newPool(t, dbURL, 1, nil)
		l := openTablesLedger(t, pool, nil, budgets, conf.AccountingBasic)
		wg.Go(func() {
			<-start
			for i := range tries {
				tables := []string{"public.a", "public.b"}
				switch (w + i) % 3 {
				case 1:
					tables = []string{"public.b", "public.a"}
				case 2:
					tables = []string{"public.b"}
				}
				c := Charge{Analyst: analysts[w%len(analysts)], Epsilon: amounts[(w+i)%len(amounts)], Fingerprint: fmt.Sprintf("w%d-%d", w, i), Tables: tables}
				_, err := l.Charge(context.Background(), c)
				mu.Lock()
				switch {
				case err == nil:
					for _, tb := range tables {
						if tb == "public.a" {
							okA.Add(okA, ratOf(c.Epsilon))
						} else {
							okB.Add(okB, ratOf(c.Epsilon))
						}
					}
				case !errors.As(err, new(*TableExhaustedError)):
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range failures {
		t.Errorf("charge failed other than by the table's exhaustion: %v", err)
	}
	for _, tc := range []struct {
		table string
		ok    *big.Rat
		limit int64
	}{{"public.a", okA, 3}, {"public.b", okB, 4}} {
		spent := tableSpent(t, admin, tc.table)
		recorded := queryText(t, admin, `SELECT coalesce(sum(c.epsilon), 0)::text FROM dpproxy.charges c JOIN dpproxy.charge_tables t ON t.charge_id = c.id WHERE t.table_name = $1`, tc.table)
		sum := tc.ok.FloatString(10)
		if !numEq(t, spent, sum) || !numEq(t, recorded, sum) {
			t.Errorf("%s: admitted charges sum to %s, epsilon_spent = %s, recorded %s; want all equal", tc.table, sum, spent, recorded)
		}
		if tc.ok.Cmp(big.NewRat(tc.limit, 1)) > 0 {
			t.Errorf("%s overspent: %s > %d", tc.table, sum, tc.limit)
		}
		// Every charge reads public.b, so demand exhausts it (public.a
		// may keep what only charges that also need public.b could use).
		if tc.table == "public.b" && new(big.Rat).Sub(big.NewRat(tc.limit, 1), tc.ok).Cmp(big.NewRat(5, 100)) >= 0 {
			t.Errorf("%s: only %s of %d spent although demand exceeds it", tc.table, sum, tc.limit)
		}
		t.Logf("%s: spent %s of %d", tc.table, spent, tc.limit)
	}
	// Analysts' own rows agree with their records.
	if got := queryText(t, admin, `SELECT (sum(epsilon_spent) = (SELECT sum(epsilon) FROM dpproxy.charges WHERE action = 'charge'))::text FROM dpproxy.budgets`); got != "true" {
		t.Errorf("analysts' totals disagree with dpproxy.charges")
	}
}

// TestTableMigrationKeepsCharges: a ledger created by the previous
// version's DDL, with charges made by the previous code (through Charge,
// which then recorded no tables), opened by this version with a table
// budget: every charge, total and stored answer is kept, the table budget
// starts at what recorded history attributes to it (nothing from before
// this version), and charging continues on both rows. A second Open, with
// the budget raised, changes only the limit.
func TestTableMigrationKeepsCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, newDB(t), 2, nil)
	for _, s := range append([]string{createSchema}, preReleasesDDL()...) {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if queryText(t, pool, `SELECT (`+schemaCurrent+`)::text`) != "false" {
		t.Fatal("the previous schema counts as current")
	}
	// Charges as the previous version wrote them: rows in budgets and
	// charges, a stored answer.
	if _, err := pool.Exec(ctx, `INSERT INTO dpproxy.budgets (analyst, epsilon_limit, delta_limit, epsilon_spent, delta_spent, rho_spent, epsilon_sq_spent)
		VALUES ('ann', 10, 0.00001, 1.5, 0.0000001, 1.125, 1.25)`); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, rho, action, actor)
		VALUES ('ann', 'f1', 1, 0.0000001, 0.5, 'charge', 'ann'), ('ann', 'f2', 0.5, 0, 0.125, 'charge', 'ann') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO dpproxy.answers (analyst, key, answer, charge_id) VALUES ('ann', 'k', 'a', $1)`, id); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		return queryText(t, pool, `SELECT string_agg(concat_ws('/', id, analyst, fingerprint, epsilon, delta, rho, action), ',' ORDER BY id) FROM dpproxy.charges WHERE action = 'charge'`) +
			" " + queryText(t, pool, `SELECT concat_ws('/', epsilon_spent, delta_spent, rho_spent, epsilon_sq_spent) FROM dpproxy.budgets WHERE analyst = 'ann'`) +
			" " + queryText(t, pool, `SELECT count(*)::text FROM dpproxy.answers`)
	}
	before := snapshot()

	budgets := map[string]conf.Budget{"public.orders": {Epsilon: 2, Delta: 1e-6}}
	l := openTablesLedger(t, pool, users("ann", 10.0, 1e-5), budgets, conf.AccountingBasic)
	if after := snapshot(); after != before {
		t.Errorf("ledger before the migration:\n%s\nafter:\n%s", before, after)
	}
	if got := tableSpent(t, pool, "public.orders"); !numEq(t, got, "0") {
		t.Errorf("public.orders starts with epsilon_spent %s, want 0 (no recorded charge read it)", got)
	}
	sp, err := l.Charge(ctx, Charge{Analyst: "ann", Epsilon: 1.5, Fingerprint: "f3", Tables: []string{"public.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	if sp.EpsilonSpent != 3 {
		t.Errorf("ann spent %v after the migration and 1.5 more, want 3", sp.EpsilonSpent)
	}
	if _, err := l.Charge(ctx, Charge{Analyst: "ann", Epsilon: 1, Fingerprint: "f4", Tables: []string{"public.orders"}}); !errors.As(err, new(*TableExhaustedError)) {
		t.Errorf("1.5 + 1 over a table budget of 2: err = %v, want TableExhaustedError", err)
	}
	// Raising the table's budget keeps its spend.
	budgets["public.orders"] = conf.Budget{Epsilon: 3, Delta: 1e-6}
	openTablesLedger(t, pool, users("ann", 10.0, 1e-5), budgets, conf.AccountingBasic)
	if got := queryText(t, pool, `SELECT concat_ws('/', epsilon_limit, epsilon_spent) FROM dpproxy.table_budgets`); got != "3/1.5" {
		t.Errorf("table_budgets after raising the limit = %s, want 3/1.5", got)
	}
	if got := queryText(t, pool, `SELECT string_agg(concat_ws('/', fingerprint, epsilon, actor), ',' ORDER BY id) FROM dpproxy.charges WHERE action = 'table_limit'`); got != "public.orders/2/config,public.orders/3/config" {
		t.Errorf("table limit audit = %s", got)
	}
}

// TestTableBudgetAddedLater: a table budget configured after queries read
// the table starts from their recorded spend, so adding a budget forgives
// nothing released since this version.
func TestTableBudgetAddedLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, newDB(t), 2, nil)
	us := users("ann", 10.0, 1e-5, "bob", 10.0, 1e-5)
	l := openTablesLedger(t, pool, us, nil, conf.AccountingBasic)
	for _, a := range []string{"ann", "bob", "ann"} {
		if _, err := l.Charge(ctx, Charge{Analyst: a, Epsilon: 0.7, Delta: 1e-7, Fingerprint: "q", Tables: []string{"public.orders"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Charge(ctx, Charge{Analyst: "bob", Epsilon: 5, Fingerprint: "other", Tables: []string{"public.customers"}}); err != nil {
		t.Fatal(err)
	}
	l = openTablesLedger(t, pool, us, map[string]conf.Budget{"public.orders": {Epsilon: 2.5, Delta: 1e-6}}, conf.AccountingBasic)
	got := queryText(t, pool, `SELECT concat_ws('/', epsilon_spent, delta_spent, epsilon_sq_spent) FROM dpproxy.table_budgets WHERE table_name = 'public.orders'`)
	if got != "2.1/3E-7/1.47" && !strings.HasPrefix(got, "2.1/0.0000003/1.47") {
		t.Errorf("public.orders after adding its budget = %s, want 2.1/0.0000003/1.47 (the three recorded charges)", got)
	}
	if _, err := l.Charge(ctx, Charge{Analyst: "bob", Epsilon: 0.5, Fingerprint: "q2", Tables: []string{"public.orders"}}); !errors.As(err, new(*TableExhaustedError)) {
		t.Errorf("2.1 + 0.5 over 2.5: err = %v, want TableExhaustedError", err)
	}
}

// TestFitsThroughTheLedger: after a charge, the claim says how many more
// queries like it fit, and which budget binds; Outlook (EXPLAIN DP) says
// how many fit before one is charged, this one included, and charges
// nothing.
func TestFitsThroughTheLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, newDB(t), 4, nil)
	l := openTablesLedger(t, pool, users("alice", 10.0, 1e-5),
		map[string]conf.Budget{"public.orders": {Epsilon: 2.5, Delta: 1e-6}}, conf.AccountingBasic)
	c := Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "q", Tables: []string{"public.orders"}}
	o, err := l.Outlook(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if o.Fits != (FitCount{N: 2, LimitedBy: "public.orders"}) || o.Analyst.EpsilonRemaining() != 10 ||
		len(o.Tables) != 1 || o.Tables[0].Table != "public.orders" || o.Tables[0].EpsilonRemaining() != 2.5 {
		t.Errorf("Outlook = %+v, want 2 fitting, limited by public.orders", o)
	}
	if o, err := l.Outlook(ctx, Charge{Analyst: "alice", Epsilon: 1, Tables: []string{"public.other"}}); err != nil || o.Fits != (FitCount{N: 10}) || len(o.Tables) != 0 {
		t.Errorf("Outlook over an unbudgeted table = %+v, %v; want 10 fitting, limited by the analyst", o, err)
	}
	if got := chargeCount(t, pool, "alice"); got != "0" {
		t.Errorf("Outlook charged: %s charges", got)
	}
	cl, err := l.Claim(ctx, CacheKey{Analyst: "alice", Query: "q", Epsilon: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Release()
	if _, err := cl.Charge(ctx, c); err != nil {
		t.Fatal(err)
	}
	if f := cl.Fits(); f != (FitCount{N: 1, LimitedBy: "public.orders"}) {
		t.Errorf("Claim.Fits after one charge = %+v, want 1 more, limited by public.orders", f)
	}
	if _, err := l.Outlook(ctx, Charge{Analyst: "nobody", Epsilon: 1}); !errors.As(err, new(*UnknownAnalystError)) {
		t.Errorf("Outlook of an unknown analyst: %v", err)
	}
}
