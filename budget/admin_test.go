package budget

import (
	"context"
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

func TestGrantSurvivesRestartAndIsAudited(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	ctx := context.Background()
	l := mustOpen(t, pool, users("alice", 1.0, 1e-6, "bob", 1.0, 0.0))
	laplace := Release{Mechanism: MechLaplace, L0: 1, Sensitivity: 8, Scale: 8 / 0.5, Epsilon: 0.5}
	selection := Release{Mechanism: MechSelection, L0: 1, Sensitivity: 1, Scale: 4, Epsilon: 0.25, Delta: 0}
	if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 0.75, Fingerprint: "fp1", Releases: []Release{laplace, selection}}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Grant(ctx, "alice", 2, 1e-6, "operator-ann")
	if err != nil {
		t.Fatal(err)
	}
	if s.EpsilonLimit != 3 || s.DeltaLimit != 2e-6 || s.EpsilonSpent != 0.75 || s.EpsilonRemaining() != 2.25 {
		t.Errorf("after grant: %+v", s)
	}
	// A restart with a changed configured budget: limit = config + grants,
	// spend kept.
	l = mustOpen(t, pool, users("alice", 1.5, 1e-6, "bob", 1.0, 0.0))
	s, err = l.Spent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if s.EpsilonLimit != 3.5 || s.DeltaLimit != 2e-6 || s.EpsilonSpent != 0.75 {
		t.Errorf("after restart with budget 1.5: %+v, want limit 3.5 (1.5 + 2 granted), δ 2e-6, spent 0.75", s)
	}
	hist, err := l.History(ctx, "alice", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range hist {
		got = append(got, r.Action+"/"+r.Actor+"/"+r.Fingerprint+"/"+decimal(r.Epsilon)+"/"+decimal(r.Delta))
	}
	want := []string{"limit/config//3.5/2e-06", "grant/operator-ann//2/1e-06", "charge/alice/fp1/0.75/0", "limit/config//1/1e-06"}
	if len(got) != len(want) {
		t.Fatalf("history = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("history[%d] = %q, want %q", i, got[i], want[i])
		}
	}
	// "dpproxy budget show" lists each charge's releases, as recorded.
	if r := hist[2].Releases; len(r) != 2 || r[0] != laplace || r[1] != selection {
		t.Errorf("releases of the charge = %+v, want %+v then %+v", r, laplace, selection)
	}
	if r := hist[1].Releases; len(r) != 0 {
		t.Errorf("a grant has releases: %+v", r)
	}
	accts, err := l.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(accts) != 2 || accts[0].Analyst != "alice" || accts[0].EpsilonSpent != 0.75 || accts[1].Analyst != "bob" || accts[1].EpsilonLimit != 1 {
		t.Errorf("List = %+v", accts)
	}
}

func TestGrantRefusals(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 1e-6))
	ctx := context.Background()
	var ua *UnknownAnalystError
	if _, err := l.Grant(ctx, "mallory", 1, 0, "op"); !errors.As(err, &ua) {
		t.Errorf("grant to unknown analyst: %v", err)
	}
	for _, g := range [][2]float64{{-1, 0}, {0, 1}, {0, -2e-6}, {0, 0}, {nan(), 0}} {
		var ic *InvalidChargeError
		if _, err := l.Grant(ctx, "alice", g[0], g[1], "op"); !errors.As(err, &ic) {
			t.Errorf("Grant(ε=%v, δ=%v): %v, want InvalidChargeError", g[0], g[1], err)
		}
	}
	if s, err := l.Grant(ctx, "alice", -0.5, 0, "op"); err != nil || s.EpsilonLimit != 0.5 {
		t.Errorf("taking 0.5 away: %+v, %v", s, err)
	}
}

func nan() float64 { var z float64; return z / z }

func TestAuditIsAppendOnly(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 0.0))
	if _, err := l.Charge(context.Background(), Charge{Analyst: "alice", Epsilon: 0.5, Fingerprint: "fp"}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE dpproxy.charges SET epsilon = 0`,
		`DELETE FROM dpproxy.charges`,
		`TRUNCATE dpproxy.charges CASCADE`,
	} {
		if _, err := pool.Exec(context.Background(), stmt); err == nil {
			t.Errorf("%s succeeded on the audit log", stmt)
		}
	}
	if got := chargeCount(t, pool, "alice"); got != "1" {
		t.Errorf("charges = %s, want 1", got)
	}
}

func TestAttach(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	ctx := context.Background()
	if _, err := Attach(ctx, pool, Options{}); err == nil {
		t.Error("Attach to a database without a ledger succeeded")
	}
	mustOpen(t, pool, users("alice", 1.0, 0.0))
	l, err := Attach(ctx, pool, Options{Accounting: conf.AccountingZCDP})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := l.Spent(ctx, "alice"); err != nil || s.EpsilonLimit != 1 {
		t.Errorf("Spent = %+v, %v", s, err)
	}
	if _, err := Attach(ctx, pool, Options{Accounting: "rdp-someday"}); err == nil {
		t.Error("Attach with an unknown accounting succeeded")
	}
}
