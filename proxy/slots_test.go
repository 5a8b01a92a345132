package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

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
	if _, err := l.acquirePrivate(ctx, "a"); !hasCode(err, pgerr.QueryCanceled) || !strings.Contains(err.Error(), "per_analyst") {
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
	if _, err := l.acquirePrivate(ctx, "b"); !hasCode(err, pgerr.QueryCanceled) || !strings.Contains(err.Error(), "max_concurrent_private_queries,") {
		t.Errorf("b's query with every slot taken: %v, want 57014 naming the server's limit", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	l.cfg.PrivateQueryWait = time.Hour
	if _, err := l.acquirePrivate(cctx, "b"); !hasCode(err, pgerr.QueryCanceled) || !strings.Contains(err.Error(), "user request") {
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
