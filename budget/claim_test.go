package budget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func question(q string) CacheKey {
	return CacheKey{Analyst: "alice", Query: q, Epsilon: 1, Delta: 1e-7, Mechanism: "laplace"}
}

func TestCacheKeyHash(t *testing.T) {
	base := question("SELECT count(*) FROM t")
	seen := map[string]string{base.Hash(): "base"}
	for name, k := range map[string]CacheKey{
		"analyst":   {Analyst: "bob", Query: base.Query, Epsilon: 1, Delta: 1e-7, Mechanism: "laplace"},
		"query":     question("SELECT count(*) FROM u"),
		"epsilon":   {Analyst: "alice", Query: base.Query, Epsilon: 0.5, Delta: 1e-7, Mechanism: "laplace"},
		"delta":     {Analyst: "alice", Query: base.Query, Epsilon: 1, Delta: 1e-8, Mechanism: "laplace"},
		"mechanism": {Analyst: "alice", Query: base.Query, Epsilon: 1, Delta: 1e-7, Mechanism: "gaussian"},
		"params":    {Analyst: "alice", Query: base.Query, Epsilon: 1, Delta: 1e-7, Mechanism: "laplace", Params: "$1=3"},
		// Length prefixes keep field boundaries apart.
		"shifted": {Analyst: "alic", Query: "e" + base.Query, Epsilon: 1, Delta: 1e-7, Mechanism: "laplace"},
	} {
		h := k.Hash()
		if prev, dup := seen[h]; dup {
			t.Errorf("%s and %s hash alike", name, prev)
		}
		seen[h] = name
	}
	if base.Hash() != question("SELECT count(*) FROM t").Hash() {
		t.Error("Hash is not deterministic")
	}
}

// TestClaimOneAnswerPerQuestion: 20 askers of one new question, each on its
// own pool (as if in separate processes), race. One is charged and stores
// its answer; every other gets that answer and pays nothing.
func TestClaimOneAnswerPerQuestion(t *testing.T) {
	t.Parallel()
	dbURL := newDB(t)
	mustOpen(t, newPool(t, dbURL, 1, nil), users("alice", 100.0, 0.0))
	const askers = 20
	answers := make([][]byte, askers)
	charged := make([]bool, askers)
	errs := make([]error, askers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range askers {
		l := mustOpen(t, newPool(t, dbURL, 1, nil), nil)
		wg.Go(func() {
			<-start
			answers[i], charged[i], errs[i] = ask(l, question("q"), []byte(fmt.Sprintf("answer of asker %d", i)))
		})
	}
	close(start)
	wg.Wait()
	nCharged := 0
	for i := range askers {
		if errs[i] != nil {
			t.Fatalf("asker %d: %v", i, errs[i])
		}
		if charged[i] {
			nCharged++
		}
		if !bytes.Equal(answers[i], answers[0]) {
			t.Errorf("asker %d got %q, asker 0 got %q", i, answers[i], answers[0])
		}
	}
	pool := newPool(t, dbURL, 1, nil)
	if nCharged != 1 || chargeCount(t, pool, "alice") != "1" {
		t.Errorf("%d askers charged, %s charges recorded; want 1", nCharged, chargeCount(t, pool, "alice"))
	}
	if got := queryText(t, pool, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = 'alice'`); got != "1" {
		t.Errorf("epsilon_spent = %s, want 1", got)
	}
}

// ask answers q the way the proxy does: claim; reuse, or charge, compute
// (fresh is the new answer) and store.
func ask(l *Ledger, q CacheKey, fresh []byte) (answer []byte, charged bool, err error) {
	ctx := context.Background()
	c, err := l.Claim(ctx, q)
	if err != nil {
		return nil, false, err
	}
	defer c.Release()
	if a, ok := c.Cached(); ok {
		return a, false, nil
	}
	if _, err := c.Charge(ctx, Charge{Analyst: q.Analyst, Epsilon: q.Epsilon, Fingerprint: "fp"}); err != nil {
		return nil, false, err
	}
	time.Sleep(5 * time.Millisecond) // the query runs
	if err := c.Store(ctx, fresh); err != nil {
		return nil, true, err
	}
	return fresh, true, nil
}

// TestClaimSurvivesRestart: an answer stored through one pool is found by
// a ledger opened later on another (a restarted proxy), at no charge.
func TestClaimSurvivesRestart(t *testing.T) {
	t.Parallel()
	dbURL := newDB(t)
	p1 := newPool(t, dbURL, 1, nil)
	l1 := mustOpen(t, p1, users("alice", 10.0, 0.0))
	if a, charged, err := ask(l1, question("q"), []byte("first")); err != nil || !charged || string(a) != "first" {
		t.Fatalf("first ask = %q, charged %v, %v", a, charged, err)
	}
	p1.Close()
	p2 := newPool(t, dbURL, 1, nil)
	l2 := mustOpen(t, p2, users("alice", 10.0, 0.0))
	a, charged, err := ask(l2, question("q"), []byte("second"))
	if err != nil || charged || string(a) != "first" {
		t.Errorf("after restart: ask = %q, charged %v, %v; want the first answer, no charge", a, charged, err)
	}
	// Another question, or the same at another ε, is new.
	other := question("q")
	other.Epsilon = 0.5
	if a, charged, err := ask(l2, other, []byte("third")); err != nil || !charged || string(a) != "third" {
		t.Errorf("same query at another ε = %q, charged %v, %v; want a fresh charged answer", a, charged, err)
	}
	if got := chargeCount(t, p2, "alice"); got != "2" {
		t.Errorf("charges = %s, want 2", got)
	}
}

// TestClaimHolderDies: a holder whose connection drops (its process was
// killed) releases the question; the next asker is charged and answers.
func TestClaimHolderDies(t *testing.T) {
	t.Parallel()
	dbURL := newDB(t)
	p1 := newPool(t, dbURL, 1, nil)
	l1 := mustOpen(t, p1, users("alice", 10.0, 0.0))
	ctx := context.Background()
	c, err := l1.Claim(ctx, question("q"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "fp"}); err != nil {
		t.Fatal(err)
	}
	// The holder's session ends without unlocking, as on kill -9.
	c.conn.Conn().Close(ctx)
	c.conn.Release()
	c.conn = nil

	l2 := mustOpen(t, newPool(t, dbURL, 1, nil), nil)
	done := make(chan error, 1)
	go func() {
		a, charged, err := ask(l2, question("q"), []byte("second"))
		if err == nil && (!charged || string(a) != "second") {
			err = fmt.Errorf("ask = %q, charged %v; want a fresh, charged answer", a, charged)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the question stayed locked after its holder's connection died")
	}
	// The dead holder's charge is kept (a charge is never refunded), and
	// no answer is paid by two charges.
	pool := newPool(t, dbURL, 1, nil)
	if got := chargeCount(t, pool, "alice"); got != "2" {
		t.Errorf("charges = %s, want 2", got)
	}
	if got := queryText(t, pool, `SELECT count(DISTINCT charge_id)::text FROM dpproxy.answers`); got != "1" {
		t.Errorf("answers = %s, want 1", got)
	}
}

func TestClaimMisuse(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	l := mustOpen(t, pool, users("alice", 10.0, 0.0))
	ctx := context.Background()
	c, err := l.Claim(ctx, question("q"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Store(ctx, []byte("x")); err == nil {
		t.Error("Store before Charge succeeded")
	}
	if _, err := c.Charge(ctx, Charge{Analyst: "bob", Epsilon: 1, Fingerprint: "fp"}); err == nil {
		t.Error("Charge for another analyst succeeded")
	}
	var ex *ExhaustedError
	if _, err := c.Charge(ctx, Charge{Analyst: "alice", Epsilon: 11, Fingerprint: "fp"}); !errors.As(err, &ex) {
		t.Errorf("Charge over budget: %v, want ExhaustedError", err)
	}
	if _, err := c.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "fp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "fp"}); err == nil {
		t.Error("second Charge on one claim succeeded")
	}
	if err := c.Store(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	c.Release()
	c.Release()
	if _, err := c.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "fp"}); err == nil {
		t.Error("Charge after Release succeeded")
	}
	// Released claims give their connections back to the pool (it has 2).
	for range 3 {
		c, err := l.Claim(ctx, question("q"))
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := c.Cached(); !ok || string(a) != "x" {
			t.Errorf("Cached = %q, %v", a, ok)
		}
		if _, err := c.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1, Fingerprint: "fp"}); err == nil {
			t.Error("Charge of an answered question succeeded")
		}
		c.Release()
	}
}
