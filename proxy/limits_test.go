package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

func TestLazyDeadline(t *testing.T) {
	const d = 8 * time.Second
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var set []time.Time
	record := func(t time.Time) error { set = append(set, t); return nil }

	// Unset: set to now + 9d/8.
	cur := lazyDeadline(record, time.Time{}, now, d)
	if want := now.Add(9 * time.Second); !cur.Equal(want) || len(set) != 1 {
		t.Fatalf("first deadline %v (set %d times), want %v", cur, len(set), want)
	}
	// Still at least d ahead: kept, no timer update.
	if got := lazyDeadline(record, cur, now.Add(time.Second), d); !got.Equal(cur) || len(set) != 1 {
		t.Fatalf("deadline moved to %v (set %d times) while d ahead", got, len(set))
	}
	// Less than d ahead: moved, so a write or an idle wait always gets at
	// least d.
	later := now.Add(1500 * time.Millisecond)
	got := lazyDeadline(record, cur, later, d)
	if want := later.Add(9 * time.Second); !got.Equal(want) || len(set) != 2 || !set[1].Equal(want) {
		t.Fatalf("deadline %v (set %d times), want %v", got, len(set), want)
	}
}

func TestFitConnections(t *testing.T) {
	server := capacity{max: 300, superuser: 3}
	cases := []struct {
		maxConns, private int
		c                 capacity
		fit               int
		fits              bool
	}{
		// The set-up: 500 sessions and 64 ledger connections on
		// a server of 300; now 500 + 20 (16 slots + 4).
		{500, 16, server, 277, false},
		{200, 16, server, 200, true},
		{277, 16, server, 277, true},
		{100, 1000, server, 100, true}, // the ledger pool stays at 64
		{100, 16, capacity{max: 100, superuser: 3, reserved: 5}, 72, false},
		{10, 16, capacity{max: 20, superuser: 3}, -3, false},
	}
	for _, c := range cases {
		l := conf.Limits{MaxConnections: c.maxConns, MaxConcurrentPrivate: c.private}
		fit, fits := fitConnections(l, c.c)
		if fit != c.fit || fits != c.fits {
			t.Errorf("fitConnections(max_connections %d, %d slots, %+v) = %d, %v; want %d, %v", c.maxConns, c.private, c.c, fit, fits, c.fit, c.fits)
		}
	}
}

// TestAcquirePrivate: a query takes one of its analyst's slots and one of
// the server's; one analyst cannot take more than its share, another
// analyst still gets a slot, a wait ends after private_query_wait or at a
// cancel, with 57014, and a release frees both slots.
func TestAcquirePrivate(t *testing.T) {
	l := newLimiter(conf.Limits{MaxConcurrentPrivate: 3, MaxConcurrentPrivatePerAnalyst: 2, PrivateQueryWait: 50 * time.Millisecond})
	ctx := context.Background()
	var releases []func()
	for range 2 {
		r, err := l.acquirePrivate(ctx, "a")
		if err != nil {
			t.Fatalf("analyst a's own slots: %v", err)
		}
		releases = append(releases, r)
	}
	start := time.Now()
	if _, err := l.acquirePrivate(ctx, "a"); !hasCode(err, codeCanceled) || !strings.Contains(err.Error(), "per_analyst") {
		t.Errorf("a third query of analyst a: %v, want 57014 naming the per-analyst limit", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("refused after %v, before private_query_wait", d)
	}
	rb, err := l.acquirePrivate(ctx, "b")
	if err != nil {
		t.Fatalf("analyst b starved by a: %v", err)
	}
	// The server's 3 slots are in use: b's next waits for one.
	if _, err := l.acquirePrivate(ctx, "b"); !hasCode(err, codeCanceled) || !strings.Contains(err.Error(), "max_concurrent_private_queries,") {
		t.Errorf("b's query with every slot taken: %v, want 57014 naming the server's limit", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	l.cfg.PrivateQueryWait = time.Hour
	if _, err := l.acquirePrivate(cctx, "b"); !hasCode(err, codeCanceled) || !strings.Contains(err.Error(), "user request") {
		t.Errorf("a cancelled wait: %v, want 57014 for the cancel", err)
	}
	rb()
	releases[0]()
	r, err := l.acquirePrivate(ctx, "a")
	if err != nil {
		t.Fatalf("after releases: %v", err)
	}
	r()
	releases[1]()
	if len(l.private) != 0 || len(l.mine["a"]) != 0 || len(l.mine["b"]) != 0 {
		t.Errorf("slots left taken: server %d, a %d, b %d", len(l.private), len(l.mine["a"]), len(l.mine["b"]))
	}
}

func TestAnalystConnections(t *testing.T) {
	l := newLimiter(conf.Limits{MaxConnectionsPerAnalyst: 2})
	if !l.enterAnalyst("a") || !l.enterAnalyst("a") {
		t.Fatal("analyst a refused below the limit")
	}
	if l.enterAnalyst("a") {
		t.Error("a third session of analyst a admitted")
	}
	if !l.enterAnalyst("b") {
		t.Error("analyst b refused because of a")
	}
	l.leaveAnalyst("a")
	if !l.enterAnalyst("a") {
		t.Error("analyst a refused after one of its sessions left")
	}
}

func TestRefusedText(t *testing.T) {
	deep := &rewrite.RejectError{Code: rewrite.CodeTooComplex}
	if got := refusedText("SELECT ((1))", deep); got != "" {
		t.Errorf("refusedText of a guard refusal = %q: it would be fingerprinted by pg_query", got)
	}
	other := &rewrite.RejectError{Code: rewrite.CodeForbidden}
	if got := refusedText("SELECT 1", other); got != "SELECT 1" {
		t.Errorf("refusedText of another refusal = %q", got)
	}
}

// TestClientGone: the watcher's check tells a connection whose client
// closed it, even with unread data before the close, from an open one,
// without reading.
func TestClientGone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("POLLRDHUP is Linux's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (server, client net.Conn) {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { server.Close(); client.Close() })
		return server, client
	}
	s1, c1 := pair()
	if clientGone(s1) {
		t.Error("open connection reported gone")
	}
	c1.Write([]byte("pipelined message"))
	time.Sleep(20 * time.Millisecond)
	if clientGone(s1) {
		t.Error("open connection with unread data reported gone")
	}
	c1.Close()
	waitFor(t, func() bool { return clientGone(s1) }, "closed connection with unread data not reported gone")
	s2, c2 := pair()
	c2.Close()
	waitFor(t, func() bool { return clientGone(s2) }, "closed connection not reported gone")
	if buf := make([]byte, 64); true {
		n, _ := s1.Read(buf)
		if string(buf[:n]) != "pipelined message" {
			t.Errorf("the check consumed data: read %q", buf[:n])
		}
	}
}

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	for range 100 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error(msg)
}

func hasCode(err error, code string) bool {
	var s sqlStater
	return errors.As(err, &s) && s.SQLState() == code
}

// TestAnalysisSlots: texts too long for the parse cache are analysed at
// most GOMAXPROCS at a time; a wait for a slot ends at a cancel (57014),
// and short texts never wait.
func TestAnalysisSlots(t *testing.T) {
	srv := benchServer(t)
	srv.lim = newLimiter(srv.cfg.Limits)
	ss := benchSession(srv, io.Discard, conf.Laplace, 1, 1e-7)
	long := "SELECT 1 /*" + strings.Repeat("x", parseCacheMaxText) + "*/"
	for range cap(srv.lim.analysis) {
		srv.lim.analysis <- struct{}{}
	}
	if _, err := ss.analyze(context.Background(), "SELECT 1"); err != nil {
		t.Errorf("a short text waited for a slot of long ones: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := ss.analyze(ctx, long); !hasCode(err, codeCanceled) {
		t.Errorf("a cancelled wait for an analysis slot: %v, want 57014", err)
	}
	<-srv.lim.analysis
	if _, err := ss.analyze(context.Background(), long); err != nil {
		t.Errorf("a long text with a free slot: %v", err)
	}
	if n := len(srv.lim.analysis); n != cap(srv.lim.analysis)-1 {
		t.Errorf("%d analysis slots taken after the analysis, want %d", n, cap(srv.lim.analysis)-1)
	}
}
