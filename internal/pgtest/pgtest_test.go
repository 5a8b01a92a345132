package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// requireBinaries skips (or, under CI=true, fails) when PostgreSQL is absent.
func requireBinaries(t *testing.T) {
	t.Helper()
	if _, err := FindBinaries(); err != nil {
		if InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func query1(t *testing.T, connURL string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connURL)
	if err != nil {
		t.Fatalf("connect %s: %v", connURL, err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 42)").Scan(&n); err != nil {
		t.Fatalf("query: %v", err)
	}
	return n
}

// exerciseConcurrently starts two servers at once with start, checks each
// answers on its own port and directory, stops them and checks the
// directories are gone.
func exerciseConcurrently(t *testing.T, start func(context.Context) (*Server, error)) {
	ctx := context.Background()
	servers := make([]*Server, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() { servers[i], errs[i] = start(ctx) })
	}
	wg.Wait()
	for i, s := range servers {
		if s != nil {
			t.Cleanup(func() { s.Stop() })
		}
		if errs[i] != nil {
			t.Fatalf("start server %d: %v", i, errs[i])
		}
	}
	a, b := servers[0], servers[1]
	if a.Port == b.Port || a.Dir == b.Dir {
		t.Fatalf("servers share port or directory: %d %s, %d %s", a.Port, a.Dir, b.Port, b.Dir)
	}
	for _, s := range servers {
		want := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
		if s.URL != want {
			t.Errorf("URL = %q, want %q", s.URL, want)
		}
		if n := query1(t, s.URL); n != 42 {
			t.Errorf("count = %d, want 42", n)
		}
		if _, err := os.Stat(filepath.Join(s.Dir, "data", "PG_VERSION")); err != nil {
			t.Errorf("data directory: %v", err)
		}
	}
	for _, s := range servers {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Stop, Stat(%s) = %v, want not exist", s.Dir, err)
		}
		if err := s.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(ctx, s.URL)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			t.Errorf("server on port %d still answers after Stop", s.Port)
		}
	}
}

func TestStartConcurrent(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	exerciseConcurrently(t, func(ctx context.Context) (*Server, error) {
		return Start(ctx, Options{Logf: t.Logf})
	})
}

func TestTemplateConcurrent(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	tmpl, err := NewTemplate(context.Background(), Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	exerciseConcurrently(t, func(ctx context.Context) (*Server, error) {
		return tmpl.Start(ctx, Options{})
	})
	if err := tmpl.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmpl.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close, Stat(%s) = %v, want not exist", tmpl.dir, err)
	}
}

func TestExtraConfigAndCreateDatabase(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	s := StartTB(t, Options{ExtraConfig: []string{"work_mem=7MB", "max_connections=50"}})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for setting, want := range map[string]string{
		"work_mem":                "7MB",
		"max_connections":         "50", // ExtraConfig overrides the default
		"fsync":                   "off",
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": s.Dir,
		"server_encoding":         "UTF8",
		"lc_collate":              "C",
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
	u, err := s.CreateDatabase(ctx, "Ledger Test")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect %s: %v", u, err)
	}
	defer c2.Close(ctx)
	var db string
	if err := c2.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if db != "Ledger Test" {
		t.Errorf("current_database() = %q, want %q", db, "Ledger Test")
	}
}

func TestBadBinDir(t *testing.T) {
	_, err := Start(context.Background(), Options{BinDir: t.TempDir()})
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("Start with empty BinDir: err = %v, want ErrNoBinaries", err)
	}
}

func TestFindBinaries(t *testing.T) {
	requireBinaries(t)
	dir, err := FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "postgres"} {
		if !isExecutable(filepath.Join(dir, name)) {
			t.Errorf("%s not executable in %s", name, dir)
		}
	}
}

func TestVersionKeyOrder(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/x/bin", "/usr/lib/postgresql/15/bin"}
	got := []float64{}
	for _, d := range dirs {
		got = append(got, versionKey(d))
	}
	want := []float64{9.6, 16, -1, 15}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("versionKey(%s) = %v, want %v", dirs[i], got[i], want[i])
		}
	}
}

// TestPortTaken: when postgres cannot bind, startOnPort says retry, and
// start then succeeds on another port.
func TestPortTaken(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port

	opts := Options{Logf: t.Logf}
	e, err := newEnv(opts)
	if err != nil {
		t.Fatal(err)
	}
	base, err := e.makeDir("dpproxy-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ctx := context.Background()
	if err := e.initdb(ctx, base, &opts); err != nil {
		t.Fatal(err)
	}
	s, retry, err := e.startOnPort(ctx, base, taken, &opts)
	if err == nil {
		s.Stop()
		t.Fatalf("postgres started on port %d that we hold", taken)
	}
	if !retry {
		t.Fatalf("startOnPort on a taken port: retry = false, err = %v", err)
	}
	s, err = e.start(ctx, base, &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.Port == taken {
		t.Fatalf("started on the taken port %d", taken)
	}
	if n := query1(t, s.URL); n != 42 {
		t.Errorf("count = %d, want 42", n)
	}
}

// TestServerDiesWithParent runs a child test process that starts a server
// and exits without stopping it; the kernel must kill the server.
func TestServerDiesWithParent(t *testing.T) {
	if os.Getenv("PGTEST_HELPER_ORPHAN") == "1" {
		s, err := Start(context.Background(), Options{})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		fmt.Printf("PID %d PORT %d DIR %s\n", s.cmd.Process.Pid, s.Port, s.Dir)
		os.Exit(0) // no Stop
	}
	requireBinaries(t)
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithParent$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGTEST_HELPER_ORPHAN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var pid, port int
	var dir string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "PID %d PORT %d DIR %s", &pid, &port, &dir); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("helper output has no PID line:\n%s", out)
	}
	defer os.RemoveAll(dir)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The dead postmaster is a zombie until init reaps it; a zombie
		// still accepts signal 0, so look at its state too.
		alive := syscall.Kill(pid, 0) == nil && !isZombie(pid)
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("postmaster %d still alive 10 s after its parent exited", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:"+strconv.Itoa(port)+"/postgres?sslmode=disable"); err == nil {
		conn.Close(ctx)
		t.Errorf("server on port %d still answers after its parent died", port)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestTail(t *testing.T) {
	long := strings.Repeat("x", 100) + "\n" + strings.Repeat("y\n", logTailBytes)
	got := tail([]byte(long))
	if len(got) > logTailBytes || strings.Contains(got, "x") || !strings.HasPrefix(got, "y") {
		t.Errorf("tail kept %d bytes starting %q", len(got), got[:min(10, len(got))])
	}
	if got := tail([]byte("a\nb\n")); got != "a\nb" {
		t.Errorf("tail(short) = %q, want %q", got, "a\nb")
	}
}

func TestMainCode(t *testing.T) {
	noBinaries := func(context.Context, Options) (*Server, error) {
		return nil, fmt.Errorf("%w (test)", ErrNoBinaries)
	}
	broken := func(context.Context, Options) (*Server, error) {
		return nil, errors.New("initdb: disk full")
	}
	mustNotStart := func(context.Context, Options) (*Server, error) {
		t.Error("started a server although DPPROXY_TEST_UPSTREAM is set")
		return nil, errors.New("unexpected")
	}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		start    func(context.Context, Options) (*Server, error)
		wantCode int
		wantRun  string // URL run was called with; "" if not called
		wantOut  string
	}{
		{"upstream set", map[string]string{EnvUpstream: "postgres://x/y", "CI": "true"}, mustNotStart, 7, "postgres://x/y", ""},
		{"no binaries, developer", map[string]string{}, noBinaries, 0, "", "SKIP"},
		{"no binaries, CI=false", map[string]string{"CI": "false"}, noBinaries, 0, "", "SKIP"},
		{"no binaries, CI", map[string]string{"CI": "true"}, noBinaries, 1, "", "FAIL"},
		{"no binaries, CI=1", map[string]string{"CI": "1"}, noBinaries, 1, "", "FAIL"},
		{"other failure", map[string]string{}, broken, 1, "", "FAIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran string
			var out strings.Builder
			code := mainCode(func(u string) int { ran = u; return 7 },
				func(k string) string { return tc.env[k] }, &out, tc.start)
			if code != tc.wantCode || ran != tc.wantRun || !strings.HasPrefix(out.String(), tc.wantOut) {
				t.Errorf("mainCode = %d, ran with %q, printed %q; want %d, %q, prefix %q",
					code, ran, out.String(), tc.wantCode, tc.wantRun, tc.wantOut)
			}
		})
	}
}

func TestMainCodeStartsAndStops(t *testing.T) {
	requireBinaries(t)
	t.Parallel()
	var srv *Server
	start := func(ctx context.Context, opts Options) (*Server, error) {
		var err error
		srv, err = Start(ctx, opts)
		return srv, err
	}
	var out strings.Builder
	code := mainCode(func(u string) int {
		if n := query1(t, u); n != 42 {
			t.Errorf("count = %d, want 42", n)
		}
		return 3
	}, func(string) string { return "" }, &out, start)
	if code != 3 {
		t.Errorf("mainCode = %d, want run's 3 (output %q)", code, out.String())
	}
	if srv == nil {
		t.Fatal("no server started")
	}
	if _, err := os.Stat(srv.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server directory %s left behind: %v", srv.Dir, err)
	}
}

// TestStandbyReplicates builds streaming replication and checks that a
// row written on the primary is read on the standby, which is in
// recovery and refuses writes.
func TestStandbyReplicates(t *testing.T) {
	primary := StartTB(t, Options{})
	standby := StandbyTB(t, primary, Options{})
	ctx := context.Background()
	pc, err := pgx.Connect(ctx, primary.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	if _, err := pc.Exec(ctx, "CREATE TABLE r(x int); INSERT INTO r VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	sc, err := pgx.Connect(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx)
	var inRecovery bool
	if err := sc.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("standby in recovery: %v, %v", inRecovery, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var x int
		err := sc.QueryRow(ctx, "SELECT x FROM r").Scan(&x)
		if err == nil && x == 42 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("row not replicated: %v, %v", x, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := sc.Exec(ctx, "INSERT INTO r VALUES (1)"); err == nil {
		t.Error("the standby accepted a write")
	}
}
