package budget

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// MaxFits bounds Fits: more than this many queries like one are reported
// as "at least MaxFits", so that the count costs at most MaxFits calls of
// Compose (2 to 3 ms when that many fit, BenchmarkFits; about 60 µs for ten).
const MaxFits = 500

// Fits is how many charges like c, one after another, the accountant
// admits from totals t within limits l, up to MaxFits: it repeats c until
// Compose refuses. A pure function: the same answer the ledger would give
// to that many queries asked in a row, under any accountant (the zCDP and
// advanced bounds are not additive, so no division would do).
func Fits(a Accountant, t Totals, l Limits, c Charge) int {
	if validate(c) != nil {
		return 0
	}
	n := 0
	for n < MaxFits {
		next, ok := a.Compose(t, l, c)
		if !ok {
			break
		}
		t, n = next, n+1
	}
	return n
}

// FitCount is how many queries like one fit the budgets it is charged to.
type FitCount struct {
	// N is the count, at most MaxFits.
	N int
	// LimitedBy is the table whose budget allows the fewest, or "" when
	// the analyst's own budget does.
	LimitedBy string
}

// afterCharge is what a charge left, kept so that how many more charges
// like it fit is counted only when asked (Claim.Fits): the count costs up
// to MaxFits calls of Compose per budget, which only the NOTICE needs.
type afterCharge struct {
	acct   Accountant // nil: nothing was charged
	t      Totals
	lim    Limits
	c      Charge
	tables []tableState
}

// fits is how many more charges like c fit the analyst's totals and every
// budgeted table's, after c.
func (a afterCharge) fits() FitCount {
	if a.acct == nil {
		return FitCount{}
	}
	f := FitCount{N: Fits(a.acct, a.t, a.lim, a.c)}
	for _, ts := range a.tables {
		if !ts.budgetedTable {
			continue
		}
		if n := Fits(a.acct, ts.next, ts.limits, a.c); n < f.N {
			f = FitCount{N: n, LimitedBy: ts.name}
		}
	}
	return f
}

// Outlook is the budget a query would find, for EXPLAIN DP: the
// analyst's, the budgets of the tables it reads, and how many queries
// like it fit, itself included.
type Outlook struct {
	Analyst Spend
	// Tables are the budgets of the tables the query reads that have one.
	Tables []TableSpend
	// Fits is how many queries like this one fit (this one included).
	Fits FitCount
}

// Outlook reads the budgets charge c would be decided on, without locking
// or changing them (EXPLAIN DP charges nothing), and counts how many
// charges like c they admit. Errors: *UnknownAnalystError,
// *UnavailableError.
func (l *Ledger) Outlook(ctx context.Context, c Charge) (Outlook, error) {
	var r budgetRow
	err := l.pool.QueryRow(ctx, `SELECT `+budgetColumns+` FROM dpproxy.budgets WHERE analyst = $1`, c.Analyst).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Outlook{}, &UnknownAnalystError{Analyst: c.Analyst}
	}
	if err != nil {
		return Outlook{}, unavailable(err)
	}
	t, lim, err := r.parse()
	if err != nil {
		return Outlook{}, unavailable(err)
	}
	if t, err = l.withRDP(ctx, l.pool, c.Analyst, t); err != nil {
		return Outlook{}, unavailable(err)
	}
	o := Outlook{Analyst: l.acct.Report(t, lim), Fits: FitCount{N: Fits(l.acct, t, lim, c)}}
	for _, name := range lockOrder(c.Tables) {
		if !l.budgeted(name) {
			continue
		}
		var r budgetRow
		err := l.pool.QueryRow(ctx, `SELECT `+budgetColumns+` FROM dpproxy.table_budgets WHERE table_name = $1`, name).Scan(r.dest()...)
		if err != nil {
			return Outlook{}, unavailable(err) // ErrNoRows too: Open creates every configured table's row
		}
		t, lim, err := r.parse()
		if err != nil {
			return Outlook{}, unavailable(err)
		}
		if t, err = l.withTableRDP(ctx, l.pool, name, t); err != nil { // tablesrdp.go
			return Outlook{}, unavailable(err)
		}
		o.Tables = append(o.Tables, TableSpend{Table: name, Spend: l.acct.Report(t, lim)})
		if n := Fits(l.acct, t, lim, c); n < o.Fits.N {
			o.Fits = FitCount{N: n, LimitedBy: name}
		}
	}
	return o, nil
}
