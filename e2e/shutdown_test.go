package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

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
