package proxy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// A private query's running time depends on the private rows (how many a
// person has, whether a predicate matches them), and the analyst sees it.
// So its response is released on a fixed clock (docs/threat-model.md,
// "Timing"): the answer or error goes out at the end of the time slot, a
// multiple of privacy.response_quantum since the query arrived, in which
// it became ready. What the analyst learns from the time is then only
// which slot that was.
//
// Three things could still tell a finer time, and are put on the same
// clock:
//
//   - A client cancel (or a disconnect that cancels) decides between an
//     answer and an error, depending on whether the answer was ready when
//     it arrived. It takes effect only at the end of the slot in which it
//     arrives: what is ready by then is released, else the query is
//     cancelled (a guard before the slot's end, so that the error is ready
//     at it) and the opaque error released.
//   - privacy.max_query_time: a query still running then is cancelled and
//     answered with the opaque error at that moment, charge kept.
//   - Another session asking the same question gets the first one's answer
//     from the cache, or waits on its ledger claim. The claim is released
//     after the answer (defer order in privateResult), and an answer in the
//     in-memory cache carries the time it was released at (notBefore), so
//     a repeat is never answered before the first asker was.
//
// Refusals and cache hits inside privateResult are released on the clock
// too: that costs at most one quantum, and keeps one simple rule, "every
// response to a query over a private table leaves at a slot's end".

// privateClock times one private query. The session goroutine calls its
// methods, except requestCancel and the timer's stop, which other
// goroutines call; mu guards the fields below it.
type privateClock struct {
	start   time.Time
	quantum time.Duration
	max     time.Duration
	// guard is how long before a slot's end a cancel is sent, so that the
	// cancelled query's error is ready when the slot ends.
	guard time.Duration
	// cancel asks the upstream to cancel the statement it runs for this
	// session (a CancelRequest); set by the session.
	cancel func()
	// notBefore is the earliest release (an answer another query released).
	notBefore time.Time
	released  bool
	// lend, if set, gives the session's pooled backend back when release
	// has waited for the slot's end (pool.go).
	lend func()

	mu         sync.Mutex
	running    bool               // the bounded query runs (run)
	ended      chan struct{}      // closed when it ends
	endRun     context.CancelFunc // ends its context
	stopped    bool               // a stop came: run must not start, its error is opaque
	inflight   chan struct{}      // closed when stop is done cancelling
	stopTimer  *time.Timer        // max_query_time
	cancelTime *time.Timer        // a client's cancel, at a slot's end
	// before ends the query's context until its charge (privateQuery);
	// charging is true from check on, when stop no longer ends it.
	before   beforeCharge
	charging bool
}

// beforeCharge is the context of a private query until its charge
// (privateQuery): the clock ends it (cancel, with errStopped) when it stops
// the query before then, so that the query's waits before the charge end
// too; release waits on done, the statement's context's, instead.
type beforeCharge struct {
	cancel context.CancelCauseFunc
	done   <-chan struct{}
}

// errStopped is the cause of the opaque error of a query cancelled by the
// clock before its bounded query started.
var errStopped = errors.New("private query stopped by the clock (privacy.max_query_time or a cancel) before it ran")

// newClock starts the clock of a private query that arrived now; cancel
// sends the upstream a CancelRequest. Callers must call close.
func newClock(quantum, max time.Duration, cancel func()) *privateClock {
	c := &privateClock{start: time.Now(), quantum: quantum, max: max, guard: min(quantum/2, 50*time.Millisecond), cancel: cancel}
	c.stopTimer = time.AfterFunc(max-c.guard, c.stop)
	return c
}

// close stops the timers.
func (c *privateClock) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopTimer.Stop()
	if c.cancelTime != nil {
		c.cancelTime.Stop()
	}
}

// slotEnd is when a response ready at t is released: the end of its slot
// (at least the first), or max_query_time when that comes first.
func (c *privateClock) slotEnd(t time.Time) time.Time {
	d := max(t.Sub(c.start), 0)
	k := max((d+c.quantum-1)/c.quantum, 1)
	end := c.start.Add(k * c.quantum)
	if limit := c.start.Add(c.max); end.After(limit) && !t.After(limit) {
		end = limit
	}
	return end
}

// deadline bounds the bounded query's context: by then the clock's stop
// has cancelled it upstream; the context ends it for good if the upstream
// did not react (and ends a wait for a slot, which a cancel cannot reach).
func (c *privateClock) deadline() time.Time {
	return c.start.Add(c.max + time.Second)
}

// after makes the response wait at least until t (zero: no effect).
func (c *privateClock) after(t time.Time) {
	if t.After(c.notBefore) {
		c.notBefore = t
	}
}

// release waits until the end of the slot in which the response became
// ready (now). It acts once; later calls return at once. A session whose
// context ends stops waiting (nobody is left to answer); the clock's own
// end of the context before the charge does not count (beforeCharge).
func (c *privateClock) release(ctx context.Context) {
	if c.released {
		return
	}
	c.released = true
	done := ctx.Done()
	c.mu.Lock()
	if c.before.done != nil {
		done = c.before.done
	}
	c.mu.Unlock()
	ready := time.Now()
	if c.notBefore.After(ready) {
		ready = c.notBefore
	}
	t := time.NewTimer(time.Until(c.slotEnd(ready)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
	// The pooled backend goes back when the response leaves, not when it
	// was ready: a statement of another session waiting for it would
	// otherwise start at the moment the query ended, and its latency
	// would show the running time the slot hides (red team, issue 17:
	// TestPoolBackendFollowsTheClock).
	if c.lend != nil {
		c.lend()
	}
}

// run runs the bounded query f, which the clock may stop. An error after a
// stop is the opaque one (the charge is kept: run is called after the
// charge).
func (c *privateClock) run(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithDeadline(ctx, c.deadline())
	defer cancel()
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return privateFailed(errStopped)
	}
	c.running, c.ended, c.endRun = true, make(chan struct{}), cancel
	c.mu.Unlock()
	err := f(ctx)
	c.mu.Lock()
	c.running = false
	close(c.ended)
	stopped, inflight := c.stopped, c.inflight
	c.mu.Unlock()
	if inflight != nil {
		// A cancel that reaches the upstream after f ended could cancel
		// the session's next statement: wait until it was delivered, and
		// a little more for the backend to take the signal while idle.
		<-inflight
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil && stopped {
		err = privateFailed(err)
	}
	return err
}

// check is called before the charge: a query stopped by then (a cancel, or
// max_query_time spent waiting for another session's answer to the same
// question) ends uncharged, as nothing private was read. From then on, a
// stop no longer ends the query's context (beforeCharge).
func (c *privateClock) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return stoppedUncharged()
	}
	c.charging = true
	return nil
}

// stoppedUncharged is the error of a private query the clock stopped
// before its charge.
func stoppedUncharged() error {
	return &Error{Code: pgerr.QueryCanceled, Message: "canceling statement due to user request or privacy.max_query_time; nothing was charged", Cause: errStopped}
}

// stopRetries and stopRetry: stop sends the upstream a CancelRequest up to
// stopRetries times, stopRetry apart, until the query ends (PostgreSQL
// drops a cancel that arrives between two statements, such as the BEGIN
// before the query and the query), then ends the query's context, which
// also ends a wait for a slot (pgconn then cancels upstream too, but waits
// 100 ms more before it returns, so it is the fallback).
const (
	stopRetries = 3
	stopRetry   = 10 * time.Millisecond
)

// stop cancels the bounded query if it runs, or keeps it from starting,
// and ends what the query waits for before its charge.
func (c *privateClock) stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	if !c.running {
		if !c.charging && c.before.cancel != nil {
			c.before.cancel(errStopped)
		}
		c.mu.Unlock()
		return
	}
	done, ended, endRun := make(chan struct{}), c.ended, c.endRun
	c.inflight = done
	c.mu.Unlock()
	defer close(done)
	for range stopRetries {
		c.cancel()
		select {
		case <-ended:
			return
		case <-time.After(stopRetry):
		}
	}
	endRun()
}

// requestCancel is a client's cancel (or a disconnect): it takes effect a
// guard before the end of the slot it arrives in (or of the next, if that
// is too close), when stop cancels the query if it still runs.
func (c *privateClock) requestCancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelTime != nil || c.stopped {
		return
	}
	at := c.slotEnd(time.Now().Add(c.guard)).Add(-c.guard)
	c.cancelTime = time.AfterFunc(time.Until(at), c.stop)
}

// startClock puts the session's private query on the clock; a
// CancelRequest for the session goes to it from now on (deferCancel).
func (ss *session) startClock() *privateClock {
	pr := ss.srv.cfg.Privacy
	// The backend is read here, on the session's goroutine: in
	// transaction mode ss.upstream changes between statements (pool.go).
	var pc *pgconn.PgConn
	if ss.upstream != nil {
		pc = ss.upstream.Conn().PgConn()
	}
	// cancelMu is held while a cancel is sent: lendBackend takes it to
	// stop cancels before the backend may serve another session.
	var cancelMu sync.Mutex
	c := newClock(pr.ResponseQuantum, pr.MaxQueryTime, func() {
		cancelMu.Lock()
		defer cancelMu.Unlock()
		if pc == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := pc.CancelRequest(ctx); err != nil {
			ss.log.Warn("cancel request of a private query failed", "err", err)
		}
	})
	if ss.pooled() {
		c.lend = func() {
			cancelMu.Lock()
			pc = nil
			cancelMu.Unlock()
			ss.giveBackBackend(context.Background()) // pool.go
		}
	}
	c.mu.Lock()
	c.before, ss.beforeCharge = ss.beforeCharge, beforeCharge{}
	c.mu.Unlock()
	ss.mu.Lock()
	ss.clock = c
	ss.mu.Unlock()
	return c
}

// privateQuery answers a private query (privateResult, private.go) under
// a context of its own until the charge, which its clock ends when it
// stops the query before then: a cancel (a CancelRequest, the client gone,
// the server's shutdown) at the end of the slot it arrived in, or
// privacy.max_query_time. The query's waits before the charge (the
// upstream's description and checks, the ledger claim that another
// session asking the same question holds) then end too, and the query is
// refused uncharged, as check would refuse it. From the charge on, the
// clock stops the bounded run alone (run): a cancel does not cut the rest
// short (deferCancel), and the response still leaves at a slot's end
// (release).
func (ss *session) privateQuery(ctx context.Context, st *rewrite.Statement, p *params, paramOIDs []uint32) (*result, error) {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ss.beforeCharge = beforeCharge{cancel: cancel, done: ctx.Done()}
	defer func() { ss.beforeCharge = beforeCharge{} }()
	r, err := ss.privateResult(pctx, st, p, paramOIDs)
	return r, stoppedBeforeCharge(pctx, err)
}

// stoppedBeforeCharge is err, or the refusal of a query its clock stopped
// before the charge (whatever wait that cut short failed with).
func stoppedBeforeCharge(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errStopped) {
		return stoppedUncharged()
	}
	return err
}

// stopClock takes the query off the clock.
func (ss *session) stopClock(c *privateClock) {
	ss.mu.Lock()
	ss.clock = nil
	ss.mu.Unlock()
	c.close()
}

// deferCancel hands a client's cancel to the private query on the clock,
// if one runs, and reports whether it did. It is called from another
// goroutine.
func (ss *session) deferCancel() bool {
	ss.mu.Lock()
	c := ss.clock
	ss.mu.Unlock()
	if c == nil {
		return false
	}
	c.requestCancel()
	return true
}
