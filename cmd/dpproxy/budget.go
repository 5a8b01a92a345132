package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
)

const budgetUsage = `usage:
  dpproxy budget [-config FILE] list                    every analyst's budget, then the table budgets
  dpproxy budget [-config FILE] [-n N] show USER        one analyst's budget, newest N audit records, the table budgets
  dpproxy budget [-config FILE] [-by NAME] grant USER EPS DELTA
                                                        add EPS and DELTA to USER's limits (negative takes away);
                                                        recorded in the audit log with NAME (default: the OS user)
`

// budgetCmd is the operator's view of the ledger named by the
// configuration (ledger_upstream, the ledger role). It reads the ledger as
// it is (budget.Attach): it never applies the configured budgets, which
// only serve does.
func budgetCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("budget", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "dpproxy.yaml", "configuration file")
	n := fs.Int("n", 20, "audit records shown by show")
	by := fs.String("by", "", "operator name recorded by grant (default: the OS user)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%v\n%s", err, budgetUsage)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return errors.New("budget: missing action\n" + budgetUsage)
	}
	want := map[string]int{"list": 1, "show": 2, "grant": 4}[rest[0]]
	if want == 0 || len(rest) != want {
		return fmt.Errorf("budget: bad arguments %q\n%s", rest, budgetUsage)
	}
	cfg, err := conf.Load(*path)
	if err != nil {
		return fmt.Errorf("configuration is invalid:\n%w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The ledger role's DSN: the query role cannot read the ledger.
	pcfg, err := pgxpool.ParseConfig(cfg.LedgerUpstream.Reveal())
	if err != nil {
		return errors.New("budget: ledger_upstream: not a valid postgres:// URL or DSN")
	}
	pcfg.MaxConns = 2
	pcfg.ConnConfig.RuntimeParams["application_name"] = "dpproxy-budget"
	pcfg.ConnConfig.RuntimeParams["search_path"] = "pg_catalog" // as the proxy's ledger pool
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("budget: connect: %w", err)
	}
	defer pool.Close()
	l, err := budget.Attach(ctx, pool, budget.Options{Accounting: cfg.Privacy.Accounting, AdvancedDelta: cfg.Privacy.AdvancedDelta, RDPDeltaShare: cfg.Privacy.RDPDeltaShare})
	if err != nil {
		return err
	}
	switch rest[0] {
	case "list":
		if err := budgetList(ctx, l, out); err != nil {
			return err
		}
		return printTableBudgets(ctx, l, cfg, out) // budgettables.go
	case "show":
		if err := budgetShow(ctx, l, rest[1], *n, out); err != nil {
			return err
		}
		return printTableBudgets(ctx, l, cfg, out) // budgettables.go
	default:
		eps, err1 := strconv.ParseFloat(rest[2], 64)
		delta, err2 := strconv.ParseFloat(rest[3], 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("budget: grant: EPS and DELTA must be numbers: %w", err)
		}
		actor := *by
		if actor == "" {
			actor = osUser()
		}
		s, err := l.Grant(ctx, rest[1], eps, delta, actor)
		if err != nil {
			return fmt.Errorf("budget: grant: %w", logSafe(err))
		}
		fmt.Fprintf(out, "granted %s ε=%s δ=%s (recorded as by %s)\n", rest[1], num(eps), num(delta), actor)
		printSpend(out, s)
		return nil
	}
}

// logSafe unwraps the cause of a ledger failure: an operator may see it.
func logSafe(err error) error {
	var ue *budget.UnavailableError
	if errors.As(err, &ue) && ue.Err != nil {
		return fmt.Errorf("%v: %w", err, ue.Err)
	}
	return err
}

func budgetList(ctx context.Context, l *budget.Ledger, out io.Writer) error {
	accts, err := l.List(ctx)
	if err != nil {
		return logSafe(err)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "analyst\tepsilon_spent\tepsilon_remaining\tepsilon_limit\tdelta_spent\tdelta_remaining\tdelta_limit\taccounting\tanswers")
	for _, a := range accts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", a.Analyst, num(a.EpsilonSpent), num(a.EpsilonRemaining()), num(a.EpsilonLimit),
			num(a.DeltaSpent), num(a.DeltaRemaining()), num(a.DeltaLimit), a.Accounting, a.Answers)
	}
	return tw.Flush()
}

func budgetShow(ctx context.Context, l *budget.Ledger, analyst string, n int, out io.Writer) error {
	s, err := l.Spent(ctx, analyst)
	if err != nil {
		return logSafe(err)
	}
	fmt.Fprintf(out, "analyst %s\n", analyst)
	printSpend(out, s)
	recs, err := l.History(ctx, analyst, n)
	if err != nil {
		return logSafe(err)
	}
	fmt.Fprintf(out, "newest %d audit records:\n", len(recs))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tat\taction\tactor\tfingerprint\tepsilon\tdelta\trho\tdelta_approx")
	for _, r := range recs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.At.UTC().Format(time.RFC3339), r.Action, r.Actor, r.Fingerprint,
			num(r.Epsilon), num(r.Delta), num(r.Rho), num(r.DeltaApprox))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Each charge's releases, as the accountants read them.
	fmt.Fprintln(out, "their releases (what the accountants compose):")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tmechanism\tL0\tsensitivity\tscale\tepsilon\tdelta")
	for _, r := range recs {
		for _, rel := range r.Releases {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, rel.Mechanism, rel.L0, num(rel.Sensitivity), num(rel.Scale), num(rel.Epsilon), num(rel.Delta))
		}
	}
	return tw.Flush()
}

func printSpend(out io.Writer, s budget.Spend) {
	fmt.Fprintf(out, "  ε: spent %s, remaining %s, limit %s\n", num(s.EpsilonSpent), num(s.EpsilonRemaining()), num(s.EpsilonLimit))
	fmt.Fprintf(out, "  δ: spent %s, remaining %s, limit %s\n", num(s.DeltaSpent), num(s.DeltaRemaining()), num(s.DeltaLimit))
	fmt.Fprintf(out, "  reported in %s accounting; zCDP totals: ρ=%s, approximate δ=%s\n", s.Accounting, num(s.Rho), num(s.DeltaApprox))
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
