package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestGracefulShutdownLetsRunningQueriesFinish(t *testing.T) {
	srv, addr, served := startProxy(t)
	busy, err := dialAt(addr, "alice", pwAlice)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close(ctx)
	idle, err := dialAt(addr, "alice", pwAlice)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close(ctx)

	// A pass-through query on the public table that takes a while.
	result := make(chan error, 1)
	go func() {
		var n int64
		err := busy.QueryRow(ctx, "SELECT count(*) FROM products a, products b, products c, products d").Scan(&n)
		if err == nil && n != 50*50*50*50 {
			err = fmt.Errorf("count = %d", n)
		}
		result <- err
	}()
	time.Sleep(100 * time.Millisecond)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-result; err != nil {
		t.Errorf("the query running during shutdown failed: %v", err)
	}
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve returned %v, want net.ErrClosed", err)
	}
	// The idle session was told why it is closed.
	_, err = idle.Exec(ctx, "SELECT 1")
	var pgErr *pgconn.PgError
	if err == nil {
		t.Errorf("idle session still answers after shutdown")
	} else if errors.As(err, &pgErr) && pgErr.Code != "57P01" {
		t.Errorf("idle session got %s, want 57P01", pgErr.Code)
	}
	if c, err := dialAt(addr, "alice", pwAlice); err == nil {
		c.Close(ctx)
		t.Errorf("a new connection was accepted after shutdown")
	}
}

// TestShutdownDeadlineCancelsRunning: when the context of Shutdown ends
// before the running queries do, they are cancelled upstream (a private
// one at the end of its time slot), not only their clients closed:
// Shutdown returns soon after, rather than when the statements end on
// their own (statement_timeout, max_query_time).
func TestShutdownDeadlineCancelsRunning(t *testing.T) {
	if _, err := direct(t).Exec(ctx, slowViewSQL); err != nil {
		t.Fatal(err)
	}
	y := resourcesConfig("shut_cancel", "  statement_timeout: 1m\n")
	srv, addr, served := startProxyWith(t, configFor(t, y, map[string]string{"PW": "pw"}))
	admin := direct(t)
	pass := connectApp(t, addr, "shut_cancel_a", "shut_cancel_pt", pgx.QueryExecModeSimpleProtocol)
	priv := connectApp(t, addr, "shut_cancel_b", "shut_cancel_priv", pgx.QueryExecModeSimpleProtocol)
	ended := make(chan error, 2)
	go func() { _, err := pass.Exec(ctx, endless); ended <- err }()
	go func() {
		var n int64
		ended <- priv.QueryRow(ctx, "SELECT count(*) FROM dp_slow_orders").Scan(&n)
	}()
	for _, app := range []string{"shut_cancel_pt", "shut_cancel_priv"} {
		eventually(t, 10*time.Second, app+": the statement never ran upstream", func() error {
			if activeUpstream(t, admin, app) == 0 {
				return errors.New("not active")
			}
			return nil
		})
	}
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want its context's error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Shutdown returned after %v: the running statements were not cancelled", d)
	}
	for range 2 {
		if err := <-ended; err == nil {
			t.Error("a statement running at the shutdown's deadline was answered")
		}
	}
	for _, app := range []string{"shut_cancel_pt", "shut_cancel_priv"} {
		eventually(t, 10*time.Second, app+": the statement still runs upstream after the shutdown", func() error {
			if n := activeUpstream(t, admin, app); n > 0 {
				return fmt.Errorf("%d active", n)
			}
			return nil
		})
	}
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve returned %v, want net.ErrClosed", err)
	}
}
