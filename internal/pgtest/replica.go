package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// streamTimeout bounds the wait for a new standby to stream from its
// primary.
const streamTimeout = 30 * time.Second

// StartStandby makes a hot standby of primary by streaming replication:
// pg_basebackup -R -X stream into a new directory (the primary's WAL
// settings are PostgreSQL 15's defaults, wal_level=replica and 10 WAL
// senders, and initdb -A trust lets 127.0.0.1 replicate), then starts it
// and waits until its WAL receiver streams. opts.BinDir must name the
// binaries of primary's version ("" finds the same ones as Start).
// Callers must call Stop.
func StartStandby(ctx context.Context, primary *Server, opts Options) (*Server, error) {
	env, err := newEnv(opts)
	if err != nil {
		return nil, err
	}
	basebackup, err := env.findTool("pg_basebackup")
	if err != nil {
		return nil, err
	}
	base, err := env.makeDir("dpproxy-pgtest-standby-")
	if err != nil {
		return nil, err
	}
	began := time.Now()
	data := filepath.Join(base, "data")
	cmd := env.command(ctx, base, basebackup, "-D", data, "-R", "-X", "stream",
		"-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres", "--no-sync",
		"--checkpoint=fast")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(base)
		return nil, fmt.Errorf("pgtest: pg_basebackup: %w\n%s", err, tail(out))
	}
	opts.logf("pgtest: base backup of port %d in %v", primary.Port, time.Since(began).Round(time.Millisecond))
	s, err := env.start(ctx, base, &opts)
	if err != nil {
		return nil, err
	}
	if err := s.waitStreaming(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	opts.logf("pgtest: standby on port %d streams from port %d", s.Port, primary.Port)
	return s, nil
}

// findTool returns the path of a client program of the server's version:
// beside initdb, or beside the file initdb links to (PATH may hold links
// to the server binaries only).
func (e *env) findTool(name string) (string, error) {
	dirs := []string{e.bin}
	if real, err := filepath.EvalSymlinks(filepath.Join(e.bin, "initdb")); err == nil {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, dir := range dirs {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s not beside initdb in %v", ErrNoBinaries, name, dirs)
}

// waitStreaming polls until the standby's WAL receiver streams.
func (s *Server) waitStreaming(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, streamTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return fmt.Errorf("pgtest: standby: %w", err)
	}
	defer conn.Close(context.Background())
	for {
		var status string
		err := conn.QueryRow(ctx, "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'none')").Scan(&status)
		if err != nil {
			return fmt.Errorf("pgtest: standby: %w\n%s", err, s.LogTail())
		}
		if status == "streaming" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: standby not streaming (WAL receiver %s): %w\n%s", status, ctx.Err(), s.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill ends the server at once with SIGKILL, as a crash would; Stop
// still removes its directory.
func (s *Server) Kill() { s.kill() }

// StandbyTB is StartStandby for one test: it stops the standby in
// tb.Cleanup and skips or fails as StartTB does.
func StandbyTB(tb testing.TB, primary *Server, opts Options) *Server {
	tb.Helper()
	if opts.Logf == nil {
		opts.Logf = tb.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := StartStandby(ctx, primary, opts)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("pgtest: standby log tail (%s):\n%s", s.LogPath, s.LogTail())
		}
		if err := s.Stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return s
}
