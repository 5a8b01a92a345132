package e2e

// An operator's first hour (issue 17): what check-config and serve say
// when the upstream cannot be reached or does not match the file.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/proxy"
)

// passwordServer starts a throwaway PostgreSQL that asks every role but
// postgres for a password (scram-sha-256), with a role fh_user whose
// password is fh-right-pw and a database fh_db.
func passwordServer(t *testing.T) *pgtest.Server {
	t.Helper()
	pg := pgtest.StartTB(t, pgtest.Options{})
	c, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, stmt := range []string{
		"CREATE ROLE fh_user LOGIN PASSWORD 'fh-right-pw'",
		"CREATE DATABASE fh_db OWNER fh_user",
	} {
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	hba := filepath.Join(pg.Dir, "data", "pg_hba.conf")
	fi, err := os.Stat(hba)
	if err != nil {
		t.Fatal(err)
	}
	rules := "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(hba, []byte(rules), fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	// The reload is asynchronous: wait until a wrong password is refused.
	deadline := time.Now().Add(10 * time.Second)
	for {
		bad, err := pgx.Connect(ctx, fmt.Sprintf("postgres://fh_user:wrong@127.0.0.1:%d/fh_db?sslmode=disable", pg.Port))
		if err != nil {
			break
		}
		bad.Close(ctx)
		if time.Now().After(deadline) {
			t.Fatal("pg_hba.conf not reloaded")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return pg
}

// TestConnectionFailuresNameTheirCause: a wrong password, a wrong port, an
// unknown database and a TLS mismatch each get their own message, with
// the server's SQLSTATE where the server answered, from check-config and
// from serve; no attempt's "tls error" line comes before the real cause,
// and no password is printed.
func TestConnectionFailuresNameTheirCause(t *testing.T) {
	pg := passwordServer(t)
	bin := buildBinary(t, t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := func(pw string, port int, db, mode string) string {
		u := fmt.Sprintf("postgres://fh_user:%s@127.0.0.1:%d/%s?connect_timeout=5", pw, port, db)
		if mode != "" {
			u += "&sslmode=" + mode
		}
		return u
	}
	cases := []struct {
		name, upstream string
		want           []string
	}{
		{"wrong password", url("fh-wrong-pw", pg.Port, "fh_db", ""),
			[]string{"cannot connect to 127.0.0.1:" + fmt.Sprint(pg.Port) + " (database fh_db, user fh_user): authentication failed", "(SQLSTATE 28P01)"}},
		{"wrong port", url("fh-right-pw", closedPort, "fh_db", ""),
			[]string{"cannot connect to 127.0.0.1:" + fmt.Sprint(closedPort) + " (database fh_db, user fh_user): connection refused"}},
		{"unknown database", url("fh-right-pw", pg.Port, "fh_nodb", ""),
			[]string{"unknown database: database \"fh_nodb\" does not exist (SQLSTATE 3D000)"}},
		{"TLS required", url("fh-right-pw", pg.Port, "fh_db", "require"),
			[]string{"TLS: the server does not accept TLS connections"}},
	}
	for _, c := range cases {
		t.Run("check-config/"+c.name, func(t *testing.T) {
			code, out := runCheckConfig(t, bin, c.upstream, "", goodTables)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			checkCause(t, out, append(c.want, "upstream: cannot connect to 127.0.0.1:"))
		})
		t.Run("serve/"+c.name, func(t *testing.T) {
			out := runServeToFailure(t, bin, c.upstream)
			checkCause(t, out, c.want)
		})
	}
}

func checkCause(t *testing.T, out string, want []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "tls error") && !strings.Contains(want[0], "TLS") {
		t.Errorf("a misleading TLS line before the cause:\n%s", out)
	}
	for _, pw := range []string{"fh-wrong-pw", "fh-right-pw"} {
		if strings.Contains(out, pw) {
			t.Errorf("the password %s was printed:\n%s", pw, out)
		}
	}
}

// runServeToFailure runs serve on a configuration with upstream and
// returns its output; serve must exit 1.
func runServeToFailure(t *testing.T, bin, upstream string) string {
	t.Helper()
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
upstream: %s
auth:
  method: trust
  users:
    - {name: someone, budget: {epsilon: 1, delta: 1.0e-6}}
tables:
%s
`, upstream, goodTables)
	path := filepath.Join(t.TempDir(), "dpproxy.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, bin, "serve", "-config", path).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve: %v, want exit 1:\n%s", err, out)
	}
	return string(out)
}

// TestServeRefusesAConfigurationTheUpstreamLacks: serve does not start
// when a configured table, a privacy unit or a configured column does not
// exist upstream (check-config's catalog check, at start), and says which
// key and line.
func TestServeRefusesAConfigurationTheUpstreamLacks(t *testing.T) {
	base := `
upstream: UPSTREAM
auth:
  method: trust
  users:
    - {name: someone, budget: {epsilon: 1, delta: 1.0e-6}}
tables:
` + goodTables + "\n"
	// The shared configuration starts.
	cfg := configFor(t, base, nil)
	srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("the demo tables' configuration does not start: %v", err)
	}
	srv.Close()
	for _, c := range []struct{ name, from, to, want string }{
		{"table", "tables:\n", "tables:\n  public.fh_no_table: {privacy_unit: id}\n",
			"tables.public.fh_no_table: no such table or view public.fh_no_table"},
		{"privacy unit", "privacy_unit: customer_id", "privacy_unit: fh_buyer",
			`tables.public.orders.privacy_unit: column "fh_buyer" does not exist in public.orders`},
		{"bounded column", "amount: {lower: 0, upper: 500}", "amount: {lower: 0, upper: 500}\n" + indentOf(base, "amount:") + "fh_cost: {lower: 0, upper: 5}",
			"tables.public.orders.columns.fh_cost: column does not exist in public.orders"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("test setup: %q not in the configuration", c.from)
			}
			cfg := configFor(t, strings.Replace(base, c.from, c.to, 1), nil)
			srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				srv.Close()
				t.Fatalf("serve started with its %s missing upstream", c.name)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "does not match the upstream") {
				t.Errorf("error %q lacks %q", err, c.want)
			}
			if !regexp.MustCompile(`\.yaml:\d+: tables\.`).MatchString(err.Error()) {
				t.Errorf("error %q names no line", err)
			}
		})
	}
}

// indentOf returns the leading spaces of the line of yaml holding key.
func indentOf(yaml, key string) string {
	for _, l := range strings.Split(yaml, "\n") {
		if t := strings.TrimLeft(l, " "); strings.HasPrefix(t, key) {
			return l[:len(l)-len(t)]
		}
	}
	return ""
}

// TestServerPathsNeverShown: with a superuser upstream (the worst case:
// PostgreSQL itself would show it everything), no spelling of a read of
// the server's settings through the proxy shows the server's file paths:
// SHOW ALL and SHOW of a path are refused, current_setting of one is
// refused, and pg_settings and the like show no row holding one. The
// allowlist of readable settings (rewrite.readableSettings) decides for
// every spelling.
func TestServerPathsNeverShown(t *testing.T) {
	admin := direct(t)
	var paths []string
	for _, name := range []string{"data_directory", "config_file", "hba_file", "ident_file"} {
		var v string
		if err := admin.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, v)
	}
	cfg := configFor(t, `
upstream: `+env.upstream+clientDatabases+`
auth:
  method: trust
  users:
    - {name: fh_super, budget: {epsilon: 1, delta: 1.0e-6}}
tables:
`+goodTables+"\n", nil)
	_, addr, _ := startProxyWith(t, cfg)
	queries := []string{
		"SHOW ALL", "SHOW data_directory", "SHOW config_file", "SHOW hba_file", "SHOW ident_file",
		`SHOW "data_directory"`, "SHOW DATA_DIRECTORY", "SHOW log_directory",
		"SELECT current_setting('data_directory')", "SELECT pg_catalog.current_setting('config_file', true)",
		"SELECT current_setting('hba_file', false)", "SELECT current_setting(lower('IDENT_FILE'))",
		"SELECT name, setting, reset_val, boot_val, sourcefile FROM pg_settings",
		"SELECT * FROM pg_catalog.pg_settings WHERE name = 'data_directory'",
		"SELECT * FROM pg_show_all_settings()", "SELECT * FROM pg_file_settings", "SELECT * FROM pg_hba_file_rules",
		"SELECT * FROM pg_ident_file_mappings", "SELECT * FROM pg_config", "SELECT pg_current_logfile()",
		"SELECT * FROM pg_ls_dir('.')", "SELECT pg_read_file('postgresql.conf')",
		"SELECT string_agg(setting, ',') FROM pg_settings",
		"SELECT set_config('application_name', current_setting('data_directory'), false)",
	}
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, addr, "fh_super", "", m.mode)
			for _, q := range queries {
				var out strings.Builder
				rows, err := conn.Query(ctx, q)
				if err == nil {
					for rows.Next() {
						vals, _ := rows.Values()
						fmt.Fprintln(&out, vals...)
					}
					rows.Close()
					err = rows.Err()
				}
				if err != nil {
					fmt.Fprintln(&out, err)
				}
				if strings.HasPrefix(q, "SHOW") && err == nil {
					t.Errorf("%s: not refused:\n%s", q, out.String())
				}
				for _, p := range paths {
					if strings.Contains(out.String(), p) {
						t.Errorf("%s showed the server path %s:\n%s", q, p, out.String())
					}
				}
			}
			// What an application needs still answers.
			var v string
			if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil || v == "" {
				t.Errorf("SHOW server_version = %q, %v", v, err)
			}
		})
	}
}

// TestDemoStopsOnSignals: the demo on its own throwaway PostgreSQL stops
// cleanly, removing the server and its directory, on a terminal's Ctrl-C
// (SIGINT to the whole process group, the server's own group excepted)
// and on a SIGTERM to the "go run" process that started it (which dies
// without passing the signal on).
func TestDemoStopsOnSignals(t *testing.T) {
	if _, err := pgtest.FindBinaries(); err != nil {
		t.Skipf("no PostgreSQL binaries: %v", err)
	}
	bin := buildBinary(t, t.TempDir())
	t.Run("Ctrl-C", func(t *testing.T) {
		cmd := exec.Command(bin, "demo", "-listen", "127.0.0.1:0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		d := startDemo(t, cmd)
		pg := d.postgres(t, cmd.Process.Pid)
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		d.waitExit(t, cmd)
		d.checkGone(t, pg)
	})
	t.Run("SIGTERM to go run", func(t *testing.T) {
		cmd := exec.Command("go", "run", "./cmd/dpproxy", "demo", "-listen", "127.0.0.1:0")
		cmd.Dir = ".."
		cmd.WaitDelay = time.Second // the demo, not go, holds its output open
		d := startDemo(t, cmd)
		demoPid := childOf(t, cmd.Process.Pid, "dpproxy")
		pg := d.postgres(t, demoPid)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		cmd.Wait() // go itself dies of the signal
		deadline := time.Now().Add(time.Minute)
		for alive(demoPid) {
			if time.Now().After(deadline) {
				syscall.Kill(demoPid, syscall.SIGKILL)
				t.Fatalf("the demo (pid %d) still runs a minute after go run was terminated; stdout:\n%s", demoPid, d.out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		d.checkGone(t, pg)
		if !strings.Contains(d.out.String(), "The throwaway PostgreSQL is stopped") {
			t.Errorf("the demo did not stop cleanly; stdout:\n%s\nstderr:\n%s", d.out.String(), d.errs.String())
		}
	})
}

type runningDemo struct {
	out, errs *syncBuffer
}

type demoServer struct {
	pid int
	dir string
}

// startDemo starts cmd and waits until the demo has printed its tour.
func startDemo(t *testing.T, cmd *exec.Cmd) *runningDemo {
	t.Helper()
	d := &runningDemo{out: &syncBuffer{}, errs: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = d.out, d.errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(d.out.String(), "Press Ctrl-C") {
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not get ready; stdout:\n%s\nstderr:\n%s", d.out.String(), d.errs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return d
}

// postgres finds the demo's throwaway server: the postgres child of pid.
func (d *runningDemo) postgres(t *testing.T, pid int) demoServer {
	t.Helper()
	pg := childOf(t, pid, "postgres")
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pg))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(cmdline), "\x00")
	for i, a := range args {
		if a == "-D" && i+1 < len(args) {
			return demoServer{pid: pg, dir: filepath.Dir(args[i+1])}
		}
	}
	t.Fatalf("no -D in postgres's command line %q", args)
	return demoServer{}
}

func (d *runningDemo) waitExit(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo exited with %v; stdout:\n%s\nstderr:\n%s", err, d.out.String(), d.errs.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the demo did not exit within a minute")
	}
	if d.errs.String() != "" {
		t.Errorf("the demo complained while stopping:\n%s", d.errs.String())
	}
}

// checkGone: the server process has exited and its directory is removed.
func (d *runningDemo) checkGone(t *testing.T, pg demoServer) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for alive(pg.pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pg.pid) {
		syscall.Kill(pg.pid, syscall.SIGKILL)
		t.Errorf("the demo's PostgreSQL (pid %d) is still running", pg.pid)
	}
	if _, err := os.Stat(pg.dir); err == nil {
		os.RemoveAll(pg.dir)
		t.Errorf("the demo's PostgreSQL directory %s is left behind", pg.dir)
	}
}

// childOf returns the pid of the child of ppid whose command name is comm,
// waiting for it up to a minute.
func childOf(t *testing.T, ppid int, comm string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			var pid int
			if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...
			s := string(b)
			open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if open < 0 || end < open {
				continue
			}
			var state string
			var parent int
			fmt.Sscanf(s[end+2:], "%s %d", &state, &parent)
			if parent == ppid && s[open+1:end] == comm {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s child of pid %d", comm, ppid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	return end < 0 || len(s) < end+3 || s[end+2] != 'Z'
}

// TestRefusalLogsItsTrueDuration: the log line of a statement refused by
// the analysis gives the time from the query's arrival to the refusal,
// not the time since the refusal (which was about zero whatever the
// analysis took), in the simple and the extended protocol.
func TestRefusalLogsItsTrueDuration(t *testing.T) {
	var logs syncBuffer
	_, addr := operatorProxy(t, &logs)
	conn, _ := noticeConn(t, addr, "op_logs")
	for i, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		// A long IN list makes the analysis (parsing) take a while before
		// the refusal: SELECT secret reads individual rows.
		var b strings.Builder
		fmt.Fprintf(&b, "SELECT secret FROM op_secrets WHERE score IN (%d", i)
		for v := 1; v < 15000; v++ {
			fmt.Fprintf(&b, ", %d", v)
		}
		b.WriteString(")")
		began := time.Now()
		_, err := conn.Exec(ctx, b.String(), mode)
		roundTrip := time.Since(began)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Fatalf("mode %v: %v, want a 42501 refusal", mode, err)
		}
		var logged time.Duration
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "query" && m["code"] == "42501" && m["kind"] == "analysis" {
				d, _ := m["duration"].(float64)
				logged = time.Duration(d)
			}
		}
		t.Logf("mode %v: round trip %v, logged %v", mode, roundTrip, logged)
		if logged < roundTrip/3 || logged > roundTrip {
			t.Errorf("mode %v: the refusal's logged duration is %v for a round trip of %v", mode, logged, roundTrip)
		}
	}
}
