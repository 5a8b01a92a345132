package proxy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestClockSlotEnd: a response is released at the end of the slot it became
// ready in (at least the first), or at max_query_time if that comes first.
func TestClockSlotEnd(t *testing.T) {
	c := &privateClock{start: time.Unix(1000, 0), quantum: 100 * time.Millisecond, max: 450 * time.Millisecond}
	for _, tc := range []struct{ ready, want time.Duration }{
		{-time.Second, 100 * time.Millisecond},
		{0, 100 * time.Millisecond},
		{1 * time.Millisecond, 100 * time.Millisecond},
		{100 * time.Millisecond, 100 * time.Millisecond},
		{100*time.Millisecond + 1, 200 * time.Millisecond},
		{399 * time.Millisecond, 400 * time.Millisecond},
		{401 * time.Millisecond, 450 * time.Millisecond}, // the last slot ends at max_query_time
		{450 * time.Millisecond, 450 * time.Millisecond},
		{451 * time.Millisecond, 500 * time.Millisecond}, // late (a cancel took too long): still on the clock
	} {
		if got := c.slotEnd(c.start.Add(tc.ready)).Sub(c.start); got != tc.want {
			t.Errorf("slotEnd(start+%v) = start+%v, want start+%v", tc.ready, got, tc.want)
		}
	}
}

// TestClockRelease: release waits for the slot's end, never less, and for
// an earlier asker's release (notBefore); it acts once.
func TestClockRelease(t *testing.T) {
	q := 40 * time.Millisecond
	c := newClock(q, time.Minute, func() {})
	defer c.close()
	c.release(context.Background())
	if e := time.Since(c.start); e < q {
		t.Errorf("released after %v, want at least one quantum %v", e, q)
	}
	before := time.Now()
	c.release(context.Background())
	if e := time.Since(before); e > q/2 {
		t.Errorf("second release waited %v, want none", e)
	}

	c2 := newClock(q, time.Minute, func() {})
	defer c2.close()
	c2.after(c2.start.Add(2*q + q/2))
	c2.release(context.Background())
	if e := time.Since(c2.start); e < 3*q {
		t.Errorf("released after %v, want the end of the slot of notBefore (%v)", e, 3*q)
	}
}

// TestClockMaxQueryTime: the clock cancels a bounded query still running a
// guard before max_query_time; its error is the opaque one; a query not yet
// started when the time is up does not start.
func TestClockMaxQueryTime(t *testing.T) {
	q, max := 20*time.Millisecond, 100*time.Millisecond
	var cancels atomic.Int32
	var once sync.Once
	release := make(chan struct{})
	c := newClock(q, max, func() { cancels.Add(1); once.Do(func() { close(release) }) })
	defer c.close()
	err := c.run(context.Background(), func(context.Context) error {
		<-release // the "upstream" runs until cancelled
		return errors.New("canceling statement due to user request")
	})
	var e *Error
	if !errors.As(err, &e) || e.Message != privateFailedMessage {
		t.Errorf("run after the stop = %v, want the opaque error", err)
	}
	if n := cancels.Load(); n < 1 {
		t.Errorf("%d cancel requests, want one", n)
	}
	if e := time.Since(c.start); e < max-c.guard {
		t.Errorf("cancelled after %v, want not before max_query_time - guard (%v)", e, max-c.guard)
	}
	ran := false
	if err := c.run(context.Background(), func(context.Context) error { ran = true; return nil }); ran || !errors.As(err, &e) || e.Message != privateFailedMessage {
		t.Errorf("run after the stop: ran %v, err %v; want the opaque error without running", ran, err)
	}

	// A query the CancelRequests do not reach (between two statements, or
	// waiting for a slot) is ended through its context.
	var n atomic.Int32
	c2 := newClock(q, max, func() { n.Add(1) })
	defer c2.close()
	err = c2.run(context.Background(), func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.As(err, &e) || e.Message != privateFailedMessage {
		t.Errorf("run ended through its context = %v, want the opaque error", err)
	}
	if got := n.Load(); got != stopRetries {
		t.Errorf("%d cancel requests before the context ended, want %d", got, stopRetries)
	}
}

// TestClockCancelAtSlotEnd: a client's cancel takes effect a guard before
// the end of its slot, not when it arrives; a query that ends before that
// is answered.
func TestClockCancelAtSlotEnd(t *testing.T) {
	q := 100 * time.Millisecond
	var at atomic.Int64
	var once sync.Once
	release := make(chan struct{})
	c := newClock(q, time.Minute, func() {
		once.Do(func() { at.Store(int64(time.Since(time.Unix(0, 0)))); close(release) })
	})
	defer c.close()
	time.Sleep(5 * time.Millisecond)
	c.requestCancel()
	err := c.run(context.Background(), func(context.Context) error { <-release; return errors.New("canceled") })
	var e *Error
	if !errors.As(err, &e) || e.Message != privateFailedMessage {
		t.Errorf("run = %v, want the opaque error", err)
	}
	cancelled := time.Unix(0, at.Load())
	if d := cancelled.Sub(c.start); d < q-c.guard {
		t.Errorf("cancelled %v after the start, want not before the slot's end - guard (%v)", d, q-c.guard)
	}

	// An answer ready before the slot's cancel time is released as such.
	var n atomic.Int32
	c2 := newClock(q, time.Minute, func() { n.Add(1) })
	defer c2.close()
	c2.requestCancel()
	if err := c2.run(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Errorf("run = %v, want the answer", err)
	}
	time.Sleep(q)
	if n.Load() != 0 {
		t.Errorf("a cancel was sent for a query that had ended")
	}
}

// TestClockEndsWaitsBeforeCharge: a cancel that the clock takes before the
// query's charge ends the query's context (its waits: the upstream, the
// ledger claim) a guard before the end of its slot, not when it arrives,
// and the query is refused uncharged; the response still leaves at the
// slot's end. From the charge on (check), the context is left alone.
func TestClockEndsWaitsBeforeCharge(t *testing.T) {
	q := 100 * time.Millisecond
	parent, endSession := context.WithCancel(context.Background())
	defer endSession()
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	c := newClock(q, time.Minute, func() { t.Error("a cancel was sent upstream for a query not running") })
	defer c.close()
	c.before = beforeCharge{cancel: cancel, done: parent.Done()}
	time.Sleep(5 * time.Millisecond)
	c.requestCancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a cancel before the charge did not end the query's waits")
	}
	if d := time.Since(c.start); d < q-c.guard {
		t.Errorf("waits ended %v after the start, want not before the slot's end - guard (%v)", d, q-c.guard)
	}
	err := stoppedBeforeCharge(ctx, errors.New("the ledger claim's wait, cut short"))
	if !hasCode(err, pgerr.QueryCanceled) || !strings.Contains(err.Error(), "nothing was charged") {
		t.Errorf("the stopped query's error = %v, want 57014, uncharged", err)
	}
	if err := c.check(); !hasCode(err, pgerr.QueryCanceled) {
		t.Errorf("check after the stop = %v, want 57014", err)
	}
	c.release(ctx) // the context the clock ended does not hurry the response
	if d := time.Since(c.start); d < q {
		t.Errorf("released %v after the start, before the slot's end (%v)", d, q)
	}

	// Charged: a cancel stops the bounded run only.
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	c2 := newClock(q, time.Minute, func() {})
	defer c2.close()
	c2.before = beforeCharge{cancel: cancel2, done: parent.Done()}
	if err := c2.check(); err != nil {
		t.Fatalf("check = %v", err)
	}
	c2.requestCancel()
	time.Sleep(q + q/2)
	if ctx2.Err() != nil {
		t.Error("a cancel after the charge ended the query's context")
	}
	if err := stoppedBeforeCharge(ctx2, errors.New("x")); err == nil || err.Error() != "x" {
		t.Errorf("stoppedBeforeCharge of a query not stopped = %v, want its own error", err)
	}
}
