package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/conf"
)

// preReleasesDDL is the ledger's schema before dpproxy.releases, the
// Rényi sums and per-table budgets (budget/schema.go at commit 3a1a505,
// the advanced accountant), frozen so that the migration tests
// (TestMigrationFromOldLedgerKeepsEveryCharge, TestTableMigrationKeepsCharges)
// start from a ledger that version created.
func preReleasesDDL() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS dpproxy.budgets (
			analyst       text PRIMARY KEY,
			epsilon_limit numeric NOT NULL,
			delta_limit   numeric NOT NULL,
			epsilon_spent numeric NOT NULL DEFAULT 0,
			delta_spent   numeric NOT NULL DEFAULT 0,
			updated_at    timestamptz
		)`,
		// rho_spent and delta_approx_spent: zCDP totals. *_granted: what
		// operators added with "dpproxy budget grant"; the limit is the
		// configured budget plus the grants, so a restart keeps grants.
		`ALTER TABLE dpproxy.budgets
			ADD COLUMN IF NOT EXISTS rho_spent          numeric NOT NULL DEFAULT 0,
			ADD COLUMN IF NOT EXISTS delta_approx_spent numeric NOT NULL DEFAULT 0,
			ADD COLUMN IF NOT EXISTS epsilon_granted    numeric NOT NULL DEFAULT 0,
			ADD COLUMN IF NOT EXISTS delta_granted      numeric NOT NULL DEFAULT 0`,
		`CREATE TABLE IF NOT EXISTS dpproxy.charges (
			id          bigserial PRIMARY KEY,
			analyst     text NOT NULL,
			at          timestamptz NOT NULL DEFAULT now(),
			fingerprint text NOT NULL,
			epsilon     numeric NOT NULL,
			delta       numeric NOT NULL
		)`,
		// action: charge (ε, δ spent by a query), grant (added to the
		// limits by an operator), limit (the limits set from the
		// configuration). actor: the analyst, operator or "config".
		`ALTER TABLE dpproxy.charges
			ADD COLUMN IF NOT EXISTS action       text NOT NULL DEFAULT 'charge',
			ADD COLUMN IF NOT EXISTS actor        text NOT NULL DEFAULT '',
			ADD COLUMN IF NOT EXISTS rho          numeric NOT NULL DEFAULT 0,
			ADD COLUMN IF NOT EXISTS delta_approx numeric NOT NULL DEFAULT 0`,
		// epsilon_sq_spent: Σε², the advanced accountant's filter
		// (advanced.go). Added after the others: migrateEpsilonSq fills it
		// for rows that predate it.
		`ALTER TABLE dpproxy.budgets
			ADD COLUMN IF NOT EXISTS epsilon_sq_spent numeric NOT NULL DEFAULT 0`,
		`CREATE INDEX IF NOT EXISTS charges_analyst_at ON dpproxy.charges (analyst, at)`,
		`CREATE OR REPLACE FUNCTION dpproxy.append_only() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN RAISE EXCEPTION 'dpproxy.% is append-only', TG_TABLE_NAME; END$$`,
		`CREATE OR REPLACE TRIGGER charges_append_only BEFORE UPDATE OR DELETE ON dpproxy.charges
			FOR EACH ROW EXECUTE FUNCTION dpproxy.append_only()`,
		`CREATE OR REPLACE TRIGGER charges_no_truncate BEFORE TRUNCATE ON dpproxy.charges
			FOR EACH STATEMENT EXECUTE FUNCTION dpproxy.append_only()`,
		// The released answers: one per question (key is a hash of the
		// analyst, normalized query, parameters, ε, δ and mechanism), each
		// paid for by exactly one charge.
		`CREATE TABLE IF NOT EXISTS dpproxy.answers (
			analyst    text NOT NULL,
			key        text NOT NULL,
			answer     bytea NOT NULL,
			charge_id  bigint NOT NULL UNIQUE REFERENCES dpproxy.charges (id),
			created_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (analyst, key)
		)`,
	}
}

// oldCharge records c as the old ledger did: the running sums and a row of
// dpproxy.charges, no releases.
func oldCharge(t *testing.T, pool *pgxpool.Pool, c Charge) {
	t.Helper()
	ctx := context.Background()
	rho, dApprox := c.zcdpPart()
	if _, err := pool.Exec(ctx, `
		UPDATE dpproxy.budgets SET epsilon_spent = epsilon_spent + $2::numeric, delta_spent = delta_spent + $3::numeric,
		       rho_spent = rho_spent + $4::numeric, delta_approx_spent = delta_approx_spent + $5::numeric,
		       epsilon_sq_spent = epsilon_sq_spent + $2::numeric * $2::numeric
		WHERE analyst = $1`, c.Analyst, decimal(c.Epsilon), decimal(c.Delta), decimal(rho), decimal(dApprox)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, rho, delta_approx, action, actor)
		VALUES ($1, 'old', $2::numeric, $3::numeric, $4::numeric, $5::numeric, 'charge', $1)`,
		c.Analyst, decimal(c.Epsilon), decimal(c.Delta), decimal(rho), decimal(dApprox)); err != nil {
		t.Fatal(err)
	}
}

// storedRDP is the analyst's rdp_spent and rdp_through as stored.
func storedRDP(t *testing.T, pool *pgxpool.Pool, analyst string) ([]float64, *int64) {
	t.Helper()
	var s []float64
	var through *int64
	if err := pool.QueryRow(context.Background(), `SELECT rdp_spent, rdp_through FROM dpproxy.budgets WHERE analyst = $1`, analyst).Scan(&s, &through); err != nil {
		t.Fatal(err)
	}
	return s, through
}

// TestMigrationFromOldLedgerKeepsEveryCharge: a ledger created by the
// previous schema, with charges, opened by this version: every charge is
// kept, each old charge is read as one conservative release, and the
// Rényi sums are those of that reading (then kept by the fast path); a
// charge written by an older binary afterwards, or a grid change, makes
// them stale and they are recomputed, never forgiven.
func TestMigrationFromOldLedgerKeepsEveryCharge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, newDB(t), 4, nil)
	if _, err := pool.Exec(ctx, `CREATE SCHEMA dpproxy`); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range preReleasesDDL() {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO dpproxy.budgets (analyst, epsilon_limit, delta_limit) VALUES ('alice', 10, 0.000001)`); err != nil {
		t.Fatal(err)
	}
	old := []Charge{
		{Analyst: "alice", Epsilon: 0.5},
		{Analyst: "alice", Epsilon: 0.25, Delta: 1e-8},
		{Analyst: "alice", Epsilon: 1, Delta: 1e-9, Rho: 0.02},
	}
	var want Totals
	for _, c := range old {
		oldCharge(t, pool, c)
		want = want.plus(c)
	}
	l, err := Open(ctx, pool, users("alice", 10.0, 1e-6), Options{Accounting: conf.AccountingRDP})
	if err != nil {
		t.Fatal(err)
	}
	if got := chargeCount(t, pool, "alice"); got != "3" {
		t.Fatalf("%s charges after the migration, want 3", got)
	}
	if got := queryText(t, pool, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = 'alice'`); !numEq(t, got, "1.75") {
		t.Errorf("epsilon_spent = %s, want 1.75", got)
	}
	got, err := loadRDP(ctx, pool, "alice")
	if err != nil || !slices.Equal(got, want.RDP) {
		t.Fatalf("sums after the migration = %v, %v\nwant %v", got, err, want.RDP)
	}
	// The conservative reading: each old charge is min(ε, αε²/2) at α.
	if a := rdpOrders[0]; math.Abs(got[0]-(a*0.125+a*0.03125+a*0.5)) > 1e-12 {
		t.Errorf("sum at α=%v = %v", a, got[0])
	}
	spend, err := l.Spent(ctx, "alice")
	if err != nil || spend.Accounting != conf.AccountingRDP || spend.EpsilonSpent != 1.75 {
		t.Errorf("Spent = %+v, %v", spend, err)
	}

	// A new charge: releases recorded, the sums kept in the fast path.
	c := laplaceCharge(0.1)
	c.Analyst = "alice"
	if _, err := l.Charge(ctx, c); err != nil {
		t.Fatal(err)
	}
	want = want.plus(c)
	s, through := storedRDP(t, pool, "alice")
	lastID := queryText(t, pool, `SELECT max(id)::text FROM dpproxy.charges WHERE analyst = 'alice'`)
	if !slices.Equal(s, want.RDP) || through == nil || fmt.Sprint(*through) != lastID {
		t.Errorf("stored sums %v through %v (last charge %s)\nwant %v", s, through, lastID, want.RDP)
	}
	if n := queryText(t, pool, `SELECT count(*)::text FROM dpproxy.releases r JOIN dpproxy.charges c ON c.id = r.charge_id WHERE r.mechanism = 'laplace' AND c.analyst = 'alice'`); n != "1" {
		t.Errorf("%s Laplace releases recorded, want 1", n)
	}

	// An older binary charges behind this one's back: stale, recomputed.
	c2 := Charge{Analyst: "alice", Epsilon: 2}
	oldCharge(t, pool, c2)
	want = want.plus(c2)
	if got, err := loadRDP(ctx, pool, "alice"); err != nil || !slices.Equal(got, want.RDP) {
		t.Errorf("after an old binary's charge: %v, %v\nwant %v", got, err, want.RDP)
	}
	// A grid change: stale, recomputed.
	if _, err := pool.Exec(ctx, `UPDATE dpproxy.budgets SET rdp_orders = '{2,Infinity}', rdp_through = (SELECT max(id) FROM dpproxy.charges)`); err != nil {
		t.Fatal(err)
	}
	if got, err := loadRDP(ctx, pool, "alice"); err != nil || !slices.Equal(got, want.RDP) {
		t.Errorf("after a grid change: %v, %v\nwant %v", got, err, want.RDP)
	}
	// dpproxy.releases is append-only.
	if _, err := pool.Exec(ctx, `DELETE FROM dpproxy.releases`); err == nil {
		t.Error("DELETE FROM dpproxy.releases succeeded")
	}
}

// replay reads the analyst's charges and their releases in the order they
// were charged.
func replay(t *testing.T, pool *pgxpool.Pool, analyst string) []Charge {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.id, c.epsilon::float8, c.delta::float8, c.rho::float8, c.delta_approx::float8,
		       r.mechanism, r.l0, r.sensitivity, r.scale, r.epsilon, r.delta
		FROM dpproxy.charges c LEFT JOIN dpproxy.releases r ON r.charge_id = c.id
		WHERE c.analyst = $1 AND c.action = 'charge' ORDER BY c.id, r.ordinal`, analyst)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []Charge
	last := int64(-1)
	for rows.Next() {
		var id int64
		var c Charge
		var r Release
		var mech string
		if err := rows.Scan(&id, &c.Epsilon, &c.Delta, &c.Rho, &c.DeltaApprox, &mech, &r.L0, &r.Sensitivity, &r.Scale, &r.Epsilon, &r.Delta); err != nil {
			t.Fatal(err)
		}
		r.Mechanism = Mechanism(mech)
		if id != last {
			c.Analyst = analyst
			out = append(out, c)
			last = id
		}
		out[len(out)-1].Releases = append(out[len(out)-1].Releases, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConcurrentChargesEveryAccountant: for each accounting, 16 pools (as
// if separate proxy processes) race to spend one budget with Laplace,
// Gaussian and partition-selection charges. Replaying the recorded charges
// through the accountant admits every one of them (no overspend, whatever
// the interleaving), the stored totals are the replay's, and the budget
// ends used up for the smallest charge.
func TestConcurrentChargesEveryAccountant(t *testing.T) {
	for _, a := range accountants() {
		t.Run(a.Name(), func(t *testing.T) {
			t.Parallel()
			dbURL := newDB(t)
			admin := newPool(t, dbURL, 2, nil)
			mustOpenWith(t, admin, users("alice", 1.0, 1e-6), a.Name())
			charges := []Charge{laplaceCharge(0.05), laplaceCharge(0.02), gaussianCharge(t, 0.1), laplaceCharge(0.1),
				{Epsilon: 0.03, Delta: 2e-8, DeltaApprox: 2e-8, Rho: PureRho(0.03), Releases: []Release{
					{Mechanism: MechLaplace, L0: 1, Sensitivity: 1, Scale: 1 / 0.03, Epsilon: 0.03},
					{Mechanism: MechSelection, L0: 1, Delta: 2e-8}}}}
			smallest := laplaceCharge(0.02)
			const workers, tries = 16, 12
			var mu sync.Mutex
			var failures []error
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := range workers {
				pool := newPool(t, dbURL, 1, nil)
				l := mustOpenWith(t, pool, nil, a.Name())
				wg.Go(func() {
					<-start
					for i := range tries {
						c := charges[(w+i)%len(charges)]
						c.Analyst, c.Fingerprint = "alice", fmt.Sprintf("w%d-%d", w, i)
						_, err := l.Charge(context.Background(), c)
						var ex *ExhaustedError
						if err != nil && !errors.As(err, &ex) {
							mu.Lock()
							failures = append(failures, err)
							mu.Unlock()
						}
					}
				})
			}
			close(start)
			wg.Wait()
			for _, err := range failures {
				t.Errorf("charge failed other than by exhaustion: %v", err)
			}
			lim := Limits{Epsilon: numericOf(1), Delta: numericOf(1e-6)}
			var tot Totals
			recorded := replay(t, admin, "alice")
			for i, c := range recorded {
				next, ok := a.Compose(tot, lim, c)
				if !ok {
					t.Fatalf("charge %d of %d (%+v) overspends under %s", i+1, len(recorded), c, a.Name())
				}
				tot = next
			}
			if _, ok := a.Compose(tot, lim, smallest); ok {
				t.Errorf("%d charges admitted and the smallest still fits: demand should have used the budget up", len(recorded))
			}
			if got := queryText(t, admin, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = 'alice'`); got != tot.Epsilon.String() {
				t.Errorf("epsilon_spent = %s, replay %s", got, tot.Epsilon.String())
			}
			if a.Name() == conf.AccountingRDP {
				if s, _ := storedRDP(t, admin, "alice"); !slices.Equal(s, tot.RDP) {
					t.Errorf("rdp_spent = %v, replay %v", s, tot.RDP)
				}
			}
			t.Logf("%s: %d charges admitted", a.Name(), len(recorded))
		})
	}
}
