package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"
)

// EnvUpstream names the environment variable that points tests at an
// existing PostgreSQL instead of a throwaway one: a URL connecting as a
// superuser (tests create schemas, databases and roles there).
const EnvUpstream = "DPPROXY_TEST_UPSTREAM"

// startTimeout bounds initdb plus start in Main and StartTB.
const startTimeout = 2 * time.Minute

// Main is the body of a package's TestMain; it does not return:
//
//	func TestMain(m *testing.M) {
//		pgtest.Main(m, func(upstreamURL string) int {
//			// set up with upstreamURL (a superuser URL) ...
//			return m.Run()
//		})
//	}
//
// If DPPROXY_TEST_UPSTREAM is set, Main calls run with it and starts
// nothing. Otherwise it starts a throwaway server, calls run with its URL,
// stops the server and exits with run's result. A nil run means m.Run.
//
// When no PostgreSQL binaries are installed, Main prints why and exits
// without running any test: with status 0 (a skip) on a developer's
// machine, with status 1 (a failure) when CI=true. Any other failure to
// start the server exits with status 1.
func Main(m *testing.M, run func(upstreamURL string) int) {
	if run == nil {
		run = func(string) int { return m.Run() }
	}
	os.Exit(mainCode(run, os.Getenv, os.Stderr, Start))
}

func mainCode(run func(string) int, getenv func(string) string, stderr io.Writer,
	start func(context.Context, Options) (*Server, error)) int {
	if u := getenv(EnvUpstream); u != "" {
		return run(u)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	srv, err := start(ctx, Options{})
	cancel()
	if err != nil {
		if errors.Is(err, ErrNoBinaries) && !inCI(getenv) {
			fmt.Fprintf(stderr, "SKIP: no tests run: %v (set %s to use an existing server)\n", err, EnvUpstream)
			return 0
		}
		fmt.Fprintf(stderr, "FAIL: cannot start a test PostgreSQL: %v\n", err)
		return 1
	}
	// os.Exit skips deferred calls; stop explicitly. A panic in run kills
	// the process, and Pdeathsig the server.
	code := run(srv.URL)
	if err := srv.Stop(); err != nil {
		fmt.Fprintf(stderr, "pgtest: %v\n", err)
	}
	return code
}

// InCI reports whether CI is set to a true value (CI=true, as GitHub
// Actions and most CI systems set it): a missing PostgreSQL is a failure
// there, never a skip.
func InCI() bool { return inCI(os.Getenv) }

func inCI(getenv func(string) string) bool {
	ci, err := strconv.ParseBool(getenv("CI"))
	return err == nil && ci
}

// StartTB starts a throwaway server for one test (or benchmark) and stops
// it in tb.Cleanup, quoting the server log if the test failed. Without
// PostgreSQL binaries it skips the test, or fails it when CI=true. Logf
// defaults to tb.Logf. It ignores DPPROXY_TEST_UPSTREAM: use it when a test
// needs a server of its own (to stop it, say).
func StartTB(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.Logf == nil {
		opts.Logf = tb.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := Start(ctx, opts)
	if err != nil {
		if errors.Is(err, ErrNoBinaries) && !InCI() {
			tb.Skipf("pgtest: %v", err)
		}
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("pgtest: server log tail (%s):\n%s", srv.LogPath, srv.LogTail())
		}
		if err := srv.Stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return srv
}
