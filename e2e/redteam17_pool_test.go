package e2e

// Red team, issue 17: what one session leaves on a shared backend must
// not change what another session's statements mean.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPoolTwinsKeepEachSessionsMeaning: PostgreSQL converts a literal of
// a date/time type when it parses a statement, under the session's
// DateStyle, IntervalStyle and TimeZone, and 'now', 'today', ... at that
// moment. The proxy's upstream twins of pass-through statements were
// shared by text alone, on a pooled backend by every session it served: a
// session with other settings, or later, got the meaning the first
// session's settings and clock gave the text (and learnt that session's
// time zone and when it ran the text). Each session's extended-protocol
// answer must be the one the simple protocol (parsed afresh) gives it.
func TestPoolTwinsKeepEachSessionsMeaning(t *testing.T) {
	addr := poolProxy(t, "pool_twin", 1, "")
	const q = "SELECT extract(epoch FROM '2024-01-02 03:04:05'::timestamptz)::text, extract(doy FROM '01/02/2024'::date)::text, extract(epoch FROM '-1 2:03:04'::interval)::text"
	const qNow = "SELECT extract(epoch FROM 'now'::timestamptz)::float8"
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		a := connectAt(t, addr, "pool_twin_a", "pw", mode)
		b := connectAt(t, addr, "pool_twin_b", "pw", mode)
		for _, s := range []string{"SET TimeZone = 'Asia/Kolkata'", "SET DateStyle = 'ISO, DMY'", "SET IntervalStyle = 'sql_standard'"} {
			if _, err := a.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		answer := func(c *pgx.Conn, m pgx.QueryExecMode) [3]string {
			t.Helper()
			var r [3]string
			if err := c.QueryRow(ctx, q, m).Scan(&r[0], &r[1], &r[2]); err != nil {
				t.Fatal(err)
			}
			return r
		}
		// a prepares the text first, under its settings.
		if got, want := answer(a, mode), answer(a, pgx.QueryExecModeSimpleProtocol); got != want {
			t.Errorf("%v: a's extended answer %v, its simple one %v", mode, got, want)
		}
		if got, want := answer(b, mode), answer(b, pgx.QueryExecModeSimpleProtocol); got != want {
			t.Errorf("%v: b's extended answer %v is a's meaning of the text; parsed under b's settings it is %v", mode, got, want)
		}
		// 'now' is the time the text is parsed.
		var first, then float64
		if err := a.QueryRow(ctx, qNow).Scan(&first); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		before := float64(time.Now().Add(-500*time.Millisecond).UnixMicro()) / 1e6
		// (pgx's statement cache keeps a's own named statement, whose
		// 'now' is its Parse's, as PostgreSQL's would be: a parses the
		// text again only in the exec mode.)
		later := []*pgx.Conn{b}
		if mode == pgx.QueryExecModeExec {
			later = append(later, a)
		}
		for _, c := range later {
			if err := c.QueryRow(ctx, qNow).Scan(&then); err != nil {
				t.Fatal(err)
			}
			if then < before {
				t.Errorf("%v: 'now' parsed %.1fs ago (when a first ran the text at %.3f): %.3f", mode, before+0.5-then, first, then)
			}
		}
	}
}

// TestTwinsParseNowAfresh: without pooling too, a session's twin of a
// text was reused by every Parse of it, so an unnamed statement's 'now'
// stayed the time of its first Parse; PostgreSQL parses each afresh.
func TestTwinsParseNowAfresh(t *testing.T) {
	c := connectMode(t, "alice", pwAlice, pgx.QueryExecModeExec)
	const qNow = "SELECT extract(epoch FROM 'now'::timestamptz)::float8"
	var first, later float64
	if err := c.QueryRow(ctx, qNow).Scan(&first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if err := c.QueryRow(ctx, qNow).Scan(&later); err != nil {
		t.Fatal(err)
	}
	if later-first < 0.5 {
		t.Errorf("'now' of a second Parse %.3fs after the first: %.3f then %.3f", 0.6, first, later)
	}
}

// TestPoolRestoredTwinNotShared: a session's named statement is prepared
// again on each backend that serves it, under the session's settings of
// that moment. When they are not the settings it was first prepared
// under (the session SET others since), that twin must serve no other
// session: one with the first settings would get the text's meaning
// under the second.
func TestPoolRestoredTwinNotShared(t *testing.T) {
	addr := poolProxy(t, "pool_rtwin", 1, "")
	const q = "SELECT extract(epoch FROM '2024-01-02 03:04:05'::timestamptz)::text"
	a := connectApp(t, addr, "pool_rtwin_a", "pool_rtwin_victim", pgx.QueryExecModeCacheStatement)
	b := connectApp(t, addr, "pool_rtwin_b", "pool_rtwin_other", pgx.QueryExecModeExec)
	for _, c := range []*pgx.Conn{a, b} {
		if _, err := c.Exec(ctx, "SET TimeZone = 'Asia/Kolkata'"); err != nil {
			t.Fatal(err)
		}
	}
	var s string
	if err := a.QueryRow(ctx, q).Scan(&s); err != nil { // a's named statement
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	// The one backend goes away; a's next statement takes a new one and
	// prepares its statement there, now under UTC.
	admin := direct(t)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pool_rtwin_victim'"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a's statement on a new backend", func() error {
		return a.QueryRow(ctx, q).Scan(&s)
	})
	var got, want string
	if err := b.QueryRow(ctx, q).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("b (Asia/Kolkata) got %s, the text's meaning under a's new UTC; parsed under its own settings it is %s", got, want)
	}
}

// TestPoolSettingsLeaveNoTrace: a session that takes a backend another
// session served must not see what that session set, not even that it
// set something: pg_settings' source of a setting this session never
// set is what a fresh connection shows, not 'session'.
func TestPoolSettingsLeaveNoTrace(t *testing.T) {
	addr := poolProxy(t, "pool_trace", 1, "")
	a := connectAt(t, addr, "pool_trace_a", "pw", pgx.QueryExecModeSimpleProtocol)
	b := connectAt(t, addr, "pool_trace_b", "pw", pgx.QueryExecModeSimpleProtocol)
	const q = "SELECT source FROM pg_settings WHERE name IN ('TimeZone', 'lc_monetary', 'lock_timeout') ORDER BY name"
	sources := func(c *pgx.Conn) []string {
		t.Helper()
		rows, err := c.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		s, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	fresh := sources(b)
	for _, s := range []string{"SET TimeZone = 'Asia/Kolkata'", "SET lc_monetary = 'C'", "SET lock_timeout = '7s'"} {
		if _, err := a.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if got := sources(b); !slices.Equal(got, fresh) {
		t.Errorf("b, which set nothing, sees the sources %v where it saw %v before a set them on the backend they share", got, fresh)
	}
}

// TestPoolKeepsSessionCharacteristics: SET SESSION CHARACTERISTICS AS
// TRANSACTION sets default_transaction_isolation for the session, which
// a pooled session must keep on whichever backend serves it, as it keeps
// what SET sets (it was not read back, so another session's turn on the
// backend dropped it).
func TestPoolKeepsSessionCharacteristics(t *testing.T) {
	addr := poolProxy(t, "pool_chars", 1, "")
	a := connectAt(t, addr, "pool_chars_a", "pw", pgx.QueryExecModeSimpleProtocol)
	b := connectAt(t, addr, "pool_chars_b", "pw", pgx.QueryExecModeSimpleProtocol)
	if _, err := a.Exec(ctx, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*pgx.Conn{b, a, b} {
		var iso string
		if err := c.QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&iso); err != nil {
			t.Fatal(err)
		}
		if want := map[*pgx.Conn]string{a: "repeatable read", b: "read committed"}[c]; iso != want {
			t.Errorf("default_transaction_isolation %q, want %q", iso, want)
		}
	}
}

// TestPoolBackendFollowsTheClock: a private query's answer leaves at the
// end of its time slot so that its running time, which can depend on one
// person's rows, is not seen (docs/threat-model.md, "Timing"). In
// transaction mode it gave its backend back as soon as the answer was
// ready, and a pass-through statement waiting for that backend, of
// another session of the same analyst, ran at that moment: its latency
// measured the private query's running time to the millisecond (with
// max_backends backends, after holding all but one in idle blocks). The
// backend now goes back when the answer leaves, at the slot's end.
func TestPoolBackendFollowsTheClock(t *testing.T) {
	const quantum = 2 * time.Second
	addr := poolProxyWith(t, "pool_clock", 1, "", "response_quantum: 2s")
	p := connectAt(t, addr, "pool_clock_a", "pw", pgx.QueryExecModeSimpleProtocol)
	q := connectAt(t, addr, "pool_clock_a", "pw", pgx.QueryExecModeSimpleProtocol)
	if _, err := q.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	answered := make(chan time.Duration, 1)
	go func() {
		var n int64
		err := p.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM orders WHERE amount > %d", 1+time.Now().UnixNano()%1000)).Scan(&n)
		if err != nil {
			t.Error(err)
		}
		answered <- time.Since(start)
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := q.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	probe := time.Since(start)
	if a := <-answered; a < quantum-50*time.Millisecond {
		t.Fatalf("the private answer left after %v, before its slot's end", a)
	}
	if probe < quantum-50*time.Millisecond {
		t.Errorf("the probe on the shared backend ran %v after the private query arrived, when its answer was ready, not when it left at the slot's end (%v): the query's running time shows", probe, quantum)
	}
}
