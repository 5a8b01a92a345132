// Package pgtest runs throwaway PostgreSQL servers for tests, the demo
// command and benchmarks.
//
// A Server is a private cluster in a fresh temporary directory, listening on
// 127.0.0.1 on a free port with trust authentication for the superuser
// "postgres" and durability switched off (fsync, synchronous_commit and
// full_page_writes are off): it is fast and must never hold data anyone
// wants to keep. Stop removes the directory.
//
// initdb and postgres refuse to run as root. When the process runs as root
// they run as the "postgres" OS user, and the cluster directory is made under
// a directory that user can reach and is owned by it. Otherwise they run as
// the current user.
//
// If the test process dies without calling Stop (a panic, a timeout, kill -9),
// the kernel kills the postmaster (Pdeathsig on Linux), so no server outlives
// the tests; only its directory under os.TempDir() is left behind.
//
// Start runs initdb for every server (about 0.7 s). When many servers are
// needed, NewTemplate runs initdb once and Template.Start copies the result
// (about 0.2 s per server).
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned (wrapped) when initdb and postgres cannot be found.
var ErrNoBinaries = errors.New("pgtest: PostgreSQL server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql/*/bin")

// Timeouts. They are constants, not knobs: a test server that takes longer
// than this is broken.
const (
	readyTimeout = 30 * time.Second // from starting postgres to the first answered connection
	stopTimeout  = 10 * time.Second // from SIGINT to SIGKILL
	bindAttempts = 5                // ports tried when postgres cannot bind
	logTailBytes = 2000             // of the server log quoted in errors
)

// Options configure a server. The zero value is ready to use.
type Options struct {
	// Logf, if set, receives progress messages (t.Logf fits).
	Logf func(format string, args ...any)
	// ExtraConfig are extra server settings as "key=value", each passed to
	// postgres as -c key=value after the defaults, so they override them.
	ExtraConfig []string
	// BinDir is the directory holding initdb and postgres; "" means
	// FindBinaries.
	BinDir string
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// Server is one running throwaway PostgreSQL. Its methods are safe for
// concurrent use.
type Server struct {
	// URL connects as the superuser postgres to database postgres:
	// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
	URL string
	// Port is the TCP port on 127.0.0.1.
	Port int
	// Dir is the server's directory: the data directory Dir/data, the log
	// Dir/postgres.log and the Unix socket. Stop removes it.
	Dir string
	// LogPath is the server log (stdout and stderr of postgres).
	LogPath string

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait returns
	logf func(string, ...any)

	stopOnce sync.Once
	stopErr  error // set once by Stop, read after stopOnce
}

// FindBinaries returns the directory holding initdb and postgres: the one
// initdb is found in on PATH (if postgres is beside it), else the newest
// /usr/lib/postgresql/VERSION/bin. The error wraps ErrNoBinaries.
func FindBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		return versionKey(dirs[i]) > versionKey(dirs[j])
	})
	for _, dir := range dirs {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w (install postgresql-15 or put its bin directory on PATH)", ErrNoBinaries)
}

// versionKey turns /usr/lib/postgresql/15/bin into 15 and 9.6 into 9.6 so
// that newer versions sort first; unparsable versions sort last.
func versionKey(binDir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	if err != nil {
		return -1
	}
	return v
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Start initializes a new cluster and starts it. Callers must call Stop, also
// when the test fails (t.Cleanup or defer).
func Start(ctx context.Context, opts Options) (*Server, error) {
	env, err := newEnv(opts)
	if err != nil {
		return nil, err
	}
	base, err := env.makeDir("dpproxy-pgtest-")
	if err != nil {
		return nil, err
	}
	if err := env.initdb(ctx, base, &opts); err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	return env.start(ctx, base, &opts)
}

// env is how to run the binaries: where they are and as whom.
type env struct {
	bin  string
	cred *syscall.Credential // nil: run as the current user
}

func newEnv(opts Options) (*env, error) {
	bin := opts.BinDir
	if bin == "" {
		var err error
		if bin, err = FindBinaries(); err != nil {
			return nil, err
		}
	} else if !isExecutable(filepath.Join(bin, "initdb")) || !isExecutable(filepath.Join(bin, "postgres")) {
		return nil, fmt.Errorf("%w: not in %s", ErrNoBinaries, bin)
	}
	e := &env{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root, and initdb refuses root: need the OS user postgres: %w", err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("pgtest: user postgres: %w", err)
		}
		e.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return e, nil
}

// makeDir creates a fresh directory for one cluster, owned by the user the
// binaries run as. As root the parent must be traversable by that user:
// t.TempDir() and a TMPDIR under /root are not, so fall back to /tmp.
func (e *env) makeDir(prefix string) (string, error) {
	parent := os.TempDir()
	if e.cred != nil && !othersCanReach(parent) {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	if err := e.chown(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// othersCanReach reports whether every directory from / to dir grants
// search permission to other users.
func othersCanReach(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

func (e *env) chown(path string) error {
	if e.cred == nil {
		return nil
	}
	if err := os.Lchown(path, int(e.cred.Uid), int(e.cred.Gid)); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// command prepares a binary to run as the cluster's user, killed by the
// kernel if this process dies. Go applies Pdeathsig after switching
// credentials, so the switch does not clear it.
func (e *env) command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	path := name
	if !filepath.IsAbs(name) {
		path = filepath.Join(e.bin, name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir // the postgres user may not be able to enter our cwd
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC", "PGTZ=UTC")
	if e.cred != nil {
		cmd.Env = append(cmd.Env, "HOME="+dir, "USER=postgres", "LOGNAME=postgres")
	}
	cmd.SysProcAttr = sysProcAttr(e.cred)
	return cmd
}

// initdb creates base/data.
func (e *env) initdb(ctx context.Context, base string, opts *Options) error {
	began := time.Now()
	data := filepath.Join(base, "data")
	cmd := e.command(ctx, base, "initdb", "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, tail(out))
	}
	opts.logf("pgtest: initdb %s in %v", data, time.Since(began).Round(time.Millisecond))
	return nil
}

// start runs postgres on base/data until it answers. On failure it removes
// base.
func (e *env) start(ctx context.Context, base string, opts *Options) (*Server, error) {
	var lastErr error
	for attempt := 1; attempt <= bindAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(base)
			return nil, err
		}
		s, retry, err := e.startOnPort(ctx, base, port, opts)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !retry {
			break
		}
		opts.logf("pgtest: port %d taken, retrying (%d/%d)", port, attempt, bindAttempts)
	}
	os.RemoveAll(base)
	return nil, lastErr
}

// freePort asks the kernel for a free port. Another process may take it
// before postgres binds it; start retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port, nil
}

// startOnPort starts postgres and waits until it answers. retry reports that
// postgres could not bind the port, so another port may work.
func (e *env) startOnPort(ctx context.Context, base string, port int, opts *Options) (s *Server, retry bool, err error) {
	data := filepath.Join(base, "data")
	logPath := filepath.Join(base, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor
	if err := e.chown(logPath); err != nil {
		return nil, false, err
	}
	offset, _ := logFile.Seek(0, io.SeekEnd)

	args := []string{
		"-D", data,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + base,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
	}
	for _, kv := range opts.ExtraConfig {
		args = append(args, "-c", kv)
	}
	// Not ctx: it bounds the start, not the server's life.
	cmd := e.command(context.Background(), base, "postgres", args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s = &Server{
		URL:     fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		Port:    port,
		Dir:     base,
		LogPath: logPath,
		cmd:     cmd,
		done:    make(chan struct{}),
		logf:    opts.Logf,
	}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()

	logTail := func() string {
		b, _ := readFrom(logPath, offset)
		return tail(b)
	}
	if err := s.waitReady(ctx, data); err != nil {
		select {
		case <-s.done:
			lt := logTail()
			if bindFailed(lt) {
				return nil, true, fmt.Errorf("pgtest: postgres could not listen on port %d:\n%s", port, lt)
			}
			return nil, false, fmt.Errorf("pgtest: postgres exited: %v\n%s", s.cmd.ProcessState, lt)
		default:
		}
		s.kill()
		return nil, false, fmt.Errorf("pgtest: postgres did not answer: %w\n%s", err, logTail())
	}
	opts.logf("pgtest: postgres on port %d in %s, up in %v", port, base, time.Since(began).Round(time.Millisecond))
	return s, false, nil
}

func bindFailed(log string) bool {
	return strings.Contains(log, "could not bind") ||
		strings.Contains(log, "Address already in use") ||
		strings.Contains(log, "could not create any TCP/IP sockets")
}

// waitReady polls until the server answers and is ours: another server
// that took the port before ours could answer too, so compare data
// directories.
func (s *Server) waitReady(ctx context.Context, data string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		select {
		case <-s.done:
			return errors.New("postgres exited")
		default:
		}
		err := s.ping(ctx, data)
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-s.done:
			return errors.New("postgres exited")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) ping(ctx context.Context, data string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var dir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return err
	}
	if filepath.Clean(dir) != filepath.Clean(data) {
		return fmt.Errorf("another server (%s) answers on port %d", dir, s.Port)
	}
	return nil
}

// kill ends the postmaster at once and waits for it.
func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Stop shuts the server down (SIGINT, a fast shutdown; SIGKILL after 10 s)
// and removes its directory. It is idempotent: later calls return the first
// call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Signal(os.Interrupt)
			select {
			case <-s.done:
			case <-time.After(stopTimeout):
				if s.logf != nil {
					s.logf("pgtest: postgres on port %d ignored SIGINT for %v; killing it", s.Port, stopTimeout)
				}
				s.kill()
			}
		}
		if err := os.RemoveAll(s.Dir); err != nil {
			s.stopErr = fmt.Errorf("pgtest: remove %s: %w", s.Dir, err)
		}
	})
	return s.stopErr
}

// LogTail returns the end of the server log, for failure messages. It is
// empty after Stop.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(s.LogPath)
	return tail(b)
}

// CreateDatabase creates database name and returns a URL for it (superuser
// postgres, like URL).
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return WithDatabase(s.URL, name)
}

// WithDatabase returns connURL with its database replaced by name.
func WithDatabase(connURL, name string) (string, error) {
	u, err := url.Parse(connURL)
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

func readFrom(path string, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// tail returns the last logTailBytes of b, starting at a line.
func tail(b []byte) string {
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}
