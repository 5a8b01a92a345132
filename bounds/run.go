package bounds

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
)

// Actor is the name the ledger records the operator's charge under.
const Actor = "bounds"

// Run measures the tables opts names, proposes bounds and prints them to
// out. In DP mode it first records opts.Epsilon against
// budget.OperatorSubject in the ledger of cfg (ledger_upstream); if that
// fails nothing is read. It returns the proposals (for Write).
func Run(ctx context.Context, cfg *conf.Config, opts Options, out io.Writer) ([]TableProposal, error) {
	if !(opts.GroupShare >= 0 && opts.GroupShare <= 1) {
		return nil, fmt.Errorf("bounds: -group-share must lie in (0, 1], got %v", opts.GroupShare)
	}
	ms, err := Plan(cfg, opts.Table, opts.GroupBy...)
	if err != nil {
		return nil, err
	}
	n95, err := NoiseAt(cfg)
	if err != nil {
		return nil, err
	}
	if opts.Exact {
		fmt.Fprintln(out, "WARNING: exact mode. These figures are computed from the private rows WITHOUT noise and are NOT")
		fmt.Fprintln(out, "protected by differential privacy: they describe real people's activity. Keep them to the operators")
		fmt.Fprintln(out, "who may see the raw data; bias metadata written from them is labelled measured: exact. Nothing is charged.")
	} else {
		if !conf.ValidEpsilon(opts.Epsilon) {
			return nil, fmt.Errorf("bounds: -epsilon must be a finite number > 0, got %v", opts.Epsilon)
		}
		if err := charge(ctx, cfg, opts.Epsilon, Fingerprint(ms), measuredTables(ms)); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "DP measurement: ε=%s of the operator's budget, recorded in the ledger (analyst %s, actor %s),\n",
			num(opts.Epsilon), budget.OperatorSubject, Actor)
		fmt.Fprintf(out, "split in %d Laplace-noised histograms of ε=%s each; every figure below is computed from them.\n",
			len(ms), num(round3(opts.Epsilon/float64(len(ms)))))
	}
	results, err := read(ctx, cfg, ms, opts)
	if err != nil {
		return nil, err
	}
	g := opts.GroupShare
	if g == 0 {
		g = DefaultGroupShare
	}
	props, err := Propose(results, n95, g)
	if err != nil {
		return nil, err
	}
	Print(out, cfg, props, g)
	return props, nil
}

// measuredTables is the tables ms read, qualified, each once.
func measuredTables(ms []Measurement) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range ms {
		if q := m.Table.QualifiedName(); !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	return out
}

// charge records eps for the operator, durably, before anything is read,
// against the budgets of the tables it reads too (budget.OperatorCharge).
func charge(ctx context.Context, cfg *conf.Config, eps float64, fingerprint string, tables []string) error {
	pcfg, err := pgxpool.ParseConfig(cfg.LedgerUpstream.Reveal())
	if err != nil {
		return errors.New("bounds: ledger_upstream: not a valid postgres:// URL or DSN")
	}
	pcfg.MaxConns = 2
	pcfg.ConnConfig.RuntimeParams["application_name"] = "dpproxy-bounds"
	pcfg.ConnConfig.RuntimeParams["search_path"] = "pg_catalog"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("bounds: ledger: %w", err)
	}
	defer pool.Close()
	// Open with no analysts: creates the ledger if missing, changes no limit.
	l, err := budget.Open(ctx, pool, nil, budget.Options{Accounting: cfg.Privacy.Accounting, AdvancedDelta: cfg.Privacy.AdvancedDelta})
	if err != nil {
		return err
	}
	if err := l.OperatorCharge(ctx, Actor, eps, fingerprint, tables...); err != nil {
		var ue *budget.UnavailableError
		if errors.As(err, &ue) && ue.Err != nil {
			return fmt.Errorf("bounds: ledger: %v: %w", err, ue.Err)
		}
		return fmt.Errorf("bounds: ledger: %w", err)
	}
	return nil
}

// read runs the measurements in one read-only snapshot of the query role.
func read(ctx context.Context, cfg *conf.Config, ms []Measurement, opts Options) ([]Result, error) {
	cc, err := pgx.ParseConfig(cfg.Upstream.Reveal())
	if err != nil {
		return nil, errors.New("bounds: upstream: not a valid postgres:// URL or DSN")
	}
	cc.RuntimeParams["application_name"] = "dpproxy-bounds"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("bounds: upstream: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("bounds: upstream: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return Measure(ctx, tx, ms, opts.Epsilon, opts.Exact)
}
