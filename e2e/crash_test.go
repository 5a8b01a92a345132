package e2e

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"
)

// questions is how many distinct questions the kill test asks.
const questions = 60

// TestKillNineKeepsTheLedgerConsistent kills a proxy process with SIGKILL
// at random moments while six clients keep asking (a mix of new and
// repeated questions), 20 times, restarting it after each kill. After
// every kill, with no process running, and at the end it checks that
//
//   - every answer a client received is the answer stored in the ledger
//     for that question (so it was charged, and a later ask returns it);
//   - no question has two different answers, and no charge pays for two
//     answers (dpproxy.answers.charge_id is unique, and each is a charge);
//   - ε spent equals the sum of the recorded charges, and every charge
//     either paid for a stored answer or was in flight at a kill (at most
//     one per client per kill): nothing is charged twice for one answer.
//
// Finally the restarted proxy returns every earlier answer again with no
// new charge.
func TestKillNineKeepsTheLedgerConsistent(t *testing.T) {
	const (
		analyst = "e2e_crash"
		clients = 6
		kills   = 20
	)
	p := startProc(t, buildDpproxy(t), analyst, 10000)

	var mu sync.Mutex               // guards received
	received := map[int]string{}    // question -> value a client got
	conflicts := map[int][]string{} // question -> differing values
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			for {
				select {
				case <-stop:
					return
				default:
				}
				conn, err := dialAt(p.addr, analyst, procPassword)
				if err != nil {
					time.Sleep(5 * time.Millisecond) // the proxy is down
					continue
				}
				for {
					q := rng.IntN(questions)
					var v int64
					if err := conn.QueryRow(ctx, question(q)).Scan(&v); err != nil {
						break // killed mid-query: reconnect
					}
					s := strconv.FormatInt(v, 10)
					mu.Lock()
					if prev, ok := received[q]; ok && prev != s {
						conflicts[q] = append(conflicts[q], prev, s)
					}
					received[q] = s
					mu.Unlock()
					select {
					case <-stop:
						conn.Close(ctx)
						return
					default:
					}
				}
				conn.Close(ctx)
			}
		})
	}

	rng := rand.New(rand.NewPCG(7, 7))
	for k := range kills {
		time.Sleep(time.Duration(20+rng.IntN(130)) * time.Millisecond)
		p.kill()
		mu.Lock()
		snapshot := make(map[int]string, len(received))
		for q, v := range received {
			snapshot[q] = v
		}
		mu.Unlock()
		checkLedger(t, analyst, snapshot, (k+1)*clients)
		if t.Failed() {
			break
		}
		p.start()
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for q, vs := range conflicts {
		t.Errorf("question %d was answered with different values: %v", q, vs)
	}
	if p.cmd == nil {
		p.start()
	}
	checkLedger(t, analyst, received, kills*clients)

	// Every earlier answer again, from the restarted proxy, for free.
	before := ledgerText(t, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = $1`, analyst)
	conn, err := dialAt(p.addr, analyst, procPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for q, want := range received {
		var v int64
		if err := conn.QueryRow(ctx, question(q)).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if strconv.FormatInt(v, 10) != want {
			t.Errorf("question %d after the kills: %d, a client got %s before", q, v, want)
		}
	}
	if after := ledgerText(t, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = $1`, analyst); after != before {
		t.Errorf("asking answered questions again charged: ε spent %s -> %s", before, after)
	}
	charges := ledgerText(t, `SELECT count(*)::text FROM dpproxy.charges WHERE analyst = $1 AND action = 'charge'`, analyst)
	t.Logf("%d kills; %d questions answered; %s charges", kills, len(received), charges)
}

// checkLedger checks the ledger of analyst against the answers clients
// received; maxOrphans bounds the charges that paid for no stored answer
// (queries in flight at a kill).
func checkLedger(t *testing.T, analyst string, received map[int]string, maxOrphans int) {
	t.Helper()
	all := storedAnswers(t, analyst, questions)
	for q, v := range received {
		stored, ok := all[q]
		if !ok {
			t.Errorf("question %d: a client received %s, but no answer is stored (not charged?)", q, v)
		} else if stored != v {
			t.Errorf("question %d: a client received %s, the ledger stores %s", q, v, stored)
		}
	}
	var spent, sum string
	var charges, answers, paid, orphans int
	err := direct(t).QueryRow(ctx, `
		SELECT (SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = $1),
		       (SELECT coalesce(sum(epsilon), 0)::text FROM dpproxy.charges WHERE analyst = $1 AND action = 'charge'),
		       (SELECT count(*) FROM dpproxy.charges WHERE analyst = $1 AND action = 'charge'),
		       (SELECT count(*) FROM dpproxy.answers WHERE analyst = $1),
		       (SELECT count(*) FROM dpproxy.answers a JOIN dpproxy.charges c ON c.id = a.charge_id
		         WHERE a.analyst = $1 AND c.analyst = $1 AND c.action = 'charge'),
		       (SELECT count(*) FROM dpproxy.charges c WHERE c.analyst = $1 AND c.action = 'charge'
		         AND NOT EXISTS (SELECT 1 FROM dpproxy.answers a WHERE a.charge_id = c.id))`,
		analyst).Scan(&spent, &sum, &charges, &answers, &paid, &orphans)
	if err != nil {
		t.Fatal(err)
	}
	if spent != sum {
		t.Errorf("ε spent %s, but the charges add up to %s", spent, sum)
	}
	if paid != answers {
		t.Errorf("%d stored answers, %d of them paid by a charge of this analyst", answers, paid)
	}
	if len(received) > answers {
		t.Errorf("clients received answers to %d questions, %d are stored", len(received), answers)
	}
	if orphans > maxOrphans {
		t.Errorf("%d charges = %d answers + %d in flight at kills (at most %d)", charges, answers, orphans, maxOrphans)
	}
	if spent != fmt.Sprint(charges) {
		t.Errorf("ε spent %s for %d charges of ε = 1", spent, charges)
	}
}
