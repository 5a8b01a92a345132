package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestShutdownCancelsWaits: when the shutdown's grace period ends, a
// session's message that still waits (here for a private-query slot; the
// upstream and the ledger wait on the same context) is cancelled, rather
// than left to wait while its client is closed, and Shutdown returns.
func TestShutdownCancelsWaits(t *testing.T) {
	s := &Server{
		log:       slog.New(slog.DiscardHandler),
		lim:       newLimiter(conf.Limits{MaxConcurrentPrivate: 1, MaxConcurrentPrivatePerAnalyst: 1, PrivateQueryWait: time.Hour}),
		listeners: map[net.Listener]struct{}{}, sessions: map[*session]struct{}{}, cancels: map[cancelKey]*session{},
	}
	hold, err := s.lim.acquirePrivate(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer hold()

	server, client := net.Pipe()
	defer client.Close()
	ss := &session{srv: s, client: server}
	if ss.key, err = s.register(ss); err != nil {
		t.Fatal(err)
	}
	ctx := ss.stmtContext()
	waited := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.unregister(ss)
		_, err := s.lim.acquirePrivate(ctx, "a")
		waited <- err
	}()

	sctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(sctx) }()
	select {
	case err := <-shut:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want its context's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown still waits for a session whose message waits for a slot")
	}
	if err := <-waited; !hasCode(err, pgerr.QueryCanceled) {
		t.Errorf("the wait for a slot ended with %v, want 57014", err)
	}
}
