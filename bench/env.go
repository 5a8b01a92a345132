package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// pgSettings tune the throwaway server for benchmarks: enough connections
// for 500 proxied sessions (each holds one upstream connection), the data
// in shared memory, no JIT (it costs milliseconds per query and helps
// nothing at these sizes), and no durability (a throwaway cluster).
var pgSettings = []string{
	"max_connections=800",
	"shared_buffers=1GB",
	"effective_cache_size=4GB",
	"work_mem=4MB", // the default: dpproxy raises it per private query
	"maintenance_work_mem=256MB",
	"jit=off",
	"max_wal_size=4GB",
	"checkpoint_timeout=30min",
	"autovacuum=off",
	"track_io_timing=off",
}

// benchEnv is everything the measurements talk to.
type benchEnv struct {
	pg       *pgtest.Server
	pgbench  string // the pgbench binary
	dbURL    string // superuser, database bench
	pgPort   int
	proxy    *exec.Cmd
	proxyBin string // the dpproxy binary built from this tree
	proxyURL string // analyst bench through dpproxy
	bouncer  *exec.Cmd
	bncPort  int
	dir      string   // harness files (dpproxy binary, config, pgbench logs)
	tables   []string // the private events tables, one per size
	summary  []string
}

func (e *benchEnv) directURL() string { return e.dbURL }

func (e *benchEnv) close() {
	for _, c := range []*exec.Cmd{e.proxy, e.bouncer} {
		if c != nil && c.Process != nil {
			c.Process.Signal(syscall.SIGINT)
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				c.Process.Kill()
			}
		}
	}
	if e.pg != nil {
		if err := e.pg.Stop(); err != nil {
			log.Print(err)
		}
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

func setup(ctx context.Context, o options) (*benchEnv, error) {
	e := &benchEnv{}
	var err error
	if e.dir, err = os.MkdirTemp("", "dpproxy-bench-"); err != nil {
		return nil, err
	}
	if e.pgbench, err = findPgbench(); err != nil {
		return nil, err
	}
	log.Print("starting PostgreSQL")
	e.pg, err = pgtest.Start(ctx, pgtest.Options{ExtraConfig: pgSettings})
	if err != nil {
		e.close()
		return nil, err
	}
	e.pgPort = e.pg.Port
	if e.dbURL, err = e.pg.CreateDatabase(ctx, "bench"); err != nil {
		e.close()
		return nil, err
	}
	if err := e.buildProxy(ctx); err != nil {
		e.close()
		return nil, fmt.Errorf("dpproxy: %w", err)
	}
	if !o.needsEvents() {
		e.summary = append(e.summary, "PostgreSQL settings: "+strings.Join(pgSettings, ", "))
		return e, nil
	}
	if err := e.load(ctx, o); err != nil {
		e.close()
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := e.startProxy(ctx); err != nil {
		e.close()
		return nil, fmt.Errorf("dpproxy: %w", err)
	}
	if err := e.startBouncer(ctx); err != nil {
		e.close()
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	e.summary = append(e.summary, "PostgreSQL settings: "+strings.Join(pgSettings, ", "))
	return e, nil
}

// load creates the pgbench tables and the private tables: events with
// the first of o.sizes rows, and events_N with N rows for each further
// size (only when the DP cost is measured). Each has rows/50 units,
// skewed: 20 heavy units hold 30% of the rows (about 15,000 each at 1M
// rows), the rest spread evenly; 16 groups; val (numeric) in [0, 100),
// qty (integer) in [0, 100].
func (e *benchEnv) load(ctx context.Context, o options) error {
	began := time.Now()
	cmd := exec.CommandContext(ctx, e.pgbench, "-i", "-q", "-s", strconv.Itoa(o.scale), "--no-vacuum", e.dbURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgbench -i: %v\n%s", err, out)
	}
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE pgbench_accounts, pgbench_branches, pgbench_tellers`); err != nil {
		return err
	}
	sizes := o.sizes[:1]
	if !o.skip["dpcost"] {
		sizes = o.sizes
	}
	for i, rows := range sizes {
		table := eventsTable(i, rows)
		units := max(rows/50, 100)
		qs := []string{
			`DROP TABLE IF EXISTS ` + table,
			fmt.Sprintf(`CREATE TABLE %s AS
		 SELECT CASE WHEN i %% 10 < 3 THEN i %% 20 ELSE 20 + (i::bigint * 7919) %% %d END::int AS unit_id,
		        ((i * 31 + i / 7) %% 16)::int AS grp,
		        ((i::bigint * 37) %% 1000)::numeric / 10 AS val,
		        ((i::bigint * 53) %% 101)::int AS qty
		   FROM generate_series(1, %d) AS i`, table, units, rows),
		}
		if i == 0 {
			// A small table for the query mix, so that 64 clients run many
			// fresh DP queries (each one a ledger transaction) per second.
			qs = append(qs, `DROP TABLE IF EXISTS mix_events`, `CREATE TABLE mix_events AS SELECT * FROM events WHERE unit_id < 2020 LIMIT 50000`, `VACUUM ANALYZE mix_events`)
		}
		qs = append(qs, `VACUUM ANALYZE `+table)
		for _, q := range qs {
			if _, err := conn.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", strings.Fields(q)[0], err)
			}
		}
		var max int64
		if err := conn.QueryRow(ctx, `SELECT max(n) FROM (SELECT unit_id, count(*) n FROM `+table+` GROUP BY unit_id) t`).Scan(&max); err != nil {
			return err
		}
		e.summary = append(e.summary, fmt.Sprintf("Data: %s: %d rows, %d units (20 heavy units, the largest with %d rows), 16 groups", table, rows, units+20, max))
		e.tables = append(e.tables, table)
	}
	e.summary = append(e.summary, fmt.Sprintf("pgbench scale %d (%d accounts); all loaded in %v", o.scale, o.scale*100000, time.Since(began).Round(time.Second)))
	return nil
}

// eventsTable names the private table of the i-th size.
func eventsTable(i, rows int) string {
	if i == 0 {
		return "events"
	}
	return fmt.Sprintf("events_%d", rows)
}

// buildProxy builds cmd/dpproxy from this tree.
func (e *benchEnv) buildProxy(ctx context.Context) error {
	e.proxyBin = filepath.Join(e.dir, "dpproxy")
	build := exec.CommandContext(ctx, "go", "build", "-o", e.proxyBin, "./cmd/dpproxy")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// logTails returns the last lines of the proxy's and PostgreSQL's logs,
// for an error that the proxy reports opaquely to its client.
func (e *benchEnv) logTails() string {
	var b strings.Builder
	for _, f := range []string{filepath.Join(e.dir, "dpproxy.log"), e.pg.LogPath} {
		out, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		lines = lines[max(0, len(lines)-20):]
		fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", f, strings.Join(lines, "\n"))
	}
	return b.String()
}

// startProxy serves the bench configuration.
func (e *benchEnv) startProxy(ctx context.Context) error {
	var err error
	e.proxy, e.proxyURL, err = e.runProxy(ctx, "dpproxy")
	return err
}

// runProxy starts another dpproxy process (files named after name) on a
// free port with the bench configuration and extra serve flags, and
// returns it with the analyst's URL once it answers. The configuration is
// testconf.Bench (internal/testconf/dpproxy.yaml: pgbench's tables,
// public, and the private events tables) with its listen address and
// upstream filled in and events_N, a copy of public.events, for each
// further size loaded.
func (e *benchEnv) runProxy(ctx context.Context, name string, extra ...string) (*exec.Cmd, string, error) {
	return e.runProxyEdited(ctx, name, nil, extra...)
}

// runProxyEdited is runProxy with the configuration changed by edit.
func (e *benchEnv) runProxyEdited(ctx context.Context, name string, edit func(*testconf.Config), extra ...string) (*exec.Cmd, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cfgPath := filepath.Join(e.dir, name+".yaml")
	cfg := testconf.Get(testconf.Bench).
		SetString(fmt.Sprintf("127.0.0.1:%d", port), "listen").
		SetString(e.dbURL, "upstream")
	for _, t := range e.tables {
		cfg.Copy([]string{"tables", "public.events"}, []string{"tables", "public." + t})
	}
	if edit != nil {
		edit(cfg)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, "", err
	}
	logf, err := os.Create(filepath.Join(e.dir, name+".log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(e.proxyBin, append([]string{"serve", "-config", cfgPath}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	url := fmt.Sprintf("postgres://bench@127.0.0.1:%d/bench?sslmode=disable", port)
	if err := waitConnect(ctx, url); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		out, _ := os.ReadFile(logf.Name())
		return nil, "", fmt.Errorf("%w\n%s", err, out)
	}
	return cmd, url, nil
}

// startBouncer runs pgbouncer in transaction pooling mode, as the postgres
// OS user (it refuses root) with files that user owns.
func (e *benchEnv) startBouncer(ctx context.Context) error {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		log.Print("pgbouncer missing: apt-get install pgbouncer")
		inst := exec.CommandContext(ctx, "sh", "-c", "apt-get install -y --no-install-recommends pgbouncer || (apt-get update && apt-get install -y --no-install-recommends pgbouncer)")
		if out, err := inst.CombinedOutput(); err != nil {
			return fmt.Errorf("install: %v\n%s", err, out)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	dir := filepath.Join(e.pg.Dir, "pgbouncer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if e.bncPort, err = freePort(); err != nil {
		return err
	}
	ini := fmt.Sprintf(`[databases]
bench = host=127.0.0.1 port=%d dbname=bench user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s/userlist.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 64
ignore_startup_parameters = extra_float_digits
logfile = %s/pgbouncer.log
pidfile = %s/pgbouncer.pid
`, e.pgPort, e.bncPort, dir, dir, dir)
	files := map[string]string{"pgbouncer.ini": ini, "userlist.txt": `"postgres" ""` + "\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return err
		}
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "userlist.txt")} {
			if err := os.Chown(p, uid, gid); err != nil {
				return err
			}
		}
		args = append([]string{"-u", "postgres"}, args...)
	}
	e.bouncer = exec.Command(bin, args...)
	e.bouncer.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.bouncer.Start(); err != nil {
		return err
	}
	if err := waitConnect(ctx, e.bouncerURL()); err != nil {
		out, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		return fmt.Errorf("%w\n%s", err, out)
	}
	v, _ := exec.Command(bin, "--version").Output()
	e.summary = append(e.summary, fmt.Sprintf("pgbouncer: %s, pool_mode = transaction, default_pool_size = 64", firstLine(string(v))))
	return nil
}

func (e *benchEnv) bouncerURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/bench?sslmode=disable", e.bncPort)
}

func waitConnect(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(ctx, url)
		if err == nil {
			return c.Close(ctx)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cannot connect: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// findPgbench looks beside the server binaries, in PostgreSQL's versioned
// directories (Debian keeps pgbench there), then on PATH.
func findPgbench() (string, error) {
	var dirs []string
	if d, err := pgtest.FindBinaries(); err == nil {
		dirs = append(dirs, d)
	}
	more, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.Reverse(more) // newest version first
	for _, d := range append(dirs, more...) {
		if _, err := os.Stat(filepath.Join(d, "pgbench")); err == nil {
			return filepath.Join(d, "pgbench"), nil
		}
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	return "", errors.New("pgbench not found: install postgresql-15 (it ships /usr/lib/postgresql/15/bin/pgbench)")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// machineInfo describes where the numbers were measured.
func machineInfo() []string {
	var out []string
	model := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	out = append(out, fmt.Sprintf("CPU: %s, %d cores (runtime.NumCPU)", model, runtime.NumCPU()))
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		out = append(out, "Memory: "+strings.Join(strings.Fields(firstLine(string(b)))[1:], " "))
	}
	if b, err := exec.Command("uname", "-srm").Output(); err == nil {
		out = append(out, "Kernel: "+strings.TrimSpace(string(b)))
	}
	out = append(out, "Go: "+runtime.Version())
	if bin, err := pgtest.FindBinaries(); err == nil {
		if b, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
			out = append(out, "PostgreSQL: "+strings.TrimSpace(string(b)))
		}
	}
	return out
}

// loadAvg is the 1, 5 and 15 minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
