package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/scram"
	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// FuzzStartup drives the wire front end with arbitrary client bytes from
// the very first byte: SSLRequest/GSSENCRequest negotiation, CancelRequest,
// the startup packet, SCRAM-SHA-256 and MD5 exchanges, and message framing
// (lengths, truncation, oversized bodies). The upstream is unreachable, so a
// session that authenticates ends with FATAL 08006. Invariants: no panic (a
// recovered one is logged and fails the target), the session ends once the
// client has sent everything, every byte the proxy writes parses as backend
// messages, and nothing it writes holds a password.
//
// Post-startup messages against a real upstream are fuzzed by FuzzWire in
// the e2e package. Run longer with
//
//	go test -run '^$' -fuzz FuzzStartup -fuzztime 10m ./proxy
func FuzzStartup(f *testing.F) {
	for _, s := range startupSeeds() {
		f.Add(s)
	}
	cases := map[string]*Server{}
	for _, method := range []string{conf.AuthTrust, conf.AuthSCRAM, conf.AuthMD5} {
		cases[method] = fuzzServer(f, method)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for method, srv := range cases {
			out, panicked := runFuzzSession(t, srv, in)
			if panicked != "" {
				t.Fatalf("%s: session panicked on %q: %s", method, in, panicked)
			}
			for _, secret := range []string{fuzzPassword, fuzzUpstreamPassword} {
				if bytes.Contains(out, []byte(secret)) {
					t.Fatalf("%s: the proxy sent a password to the client on %q", method, in)
				}
			}
			checkBackendStream(t, out)
		}
	})
}

const (
	fuzzPassword         = "fuzz-password-c0ffee"
	fuzzUpstreamPassword = "upstream-secret-5a1t"
)

// panicLog records "panic in session" log lines.
type panicLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panic") {
		var b strings.Builder
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, "%s=%v ", a.Key, a.Value); return true })
		p.mu.Lock()
		p.msgs = append(p.msgs, r.Message+": "+b.String())
		p.mu.Unlock()
	}
	return nil
}
func (p *panicLog) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicLog) WithGroup(string) slog.Handler      { return p }

func (p *panicLog) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.Join(p.msgs, "; ")
	p.msgs = nil
	return s
}

// fuzzServer builds a Server as New does, minus the ledger and with an
// upstream pool pointed at a closed port (pgxpool connects lazily).
func fuzzServer(tb testing.TB, method string) *Server {
	tb.Helper()
	y := fmt.Sprintf(`
upstream: postgres://dp:%s@127.0.0.1:1/shop?connect_timeout=1
auth:
  method: %s
  users:
    - {name: fuzz, password_env: PW, budget: {epsilon: 1, delta: 1.0e-6}}
limits:
  max_message_size: 4096
  max_query_length: 1024
  auth_timeout: 2s
`, fuzzUpstreamPassword, method) + testconf.YAML(testconf.Shop) // the demo's orders and products
	cfg, err := conf.Parse("fuzz.yaml", []byte(y), func(string) string { return fuzzPassword })
	if err != nil {
		tb.Fatal(err)
	}
	pl := &panicLog{}
	s := &Server{
		cfg: cfg, log: slog.New(pl), opts: Options{MaxMessageSize: cfg.Limits.MaxMessageSize},
		analyzer: rewrite.New(cfg, rewrite.Options{}), lim: newLimiter(cfg.Limits), metrics: newMetrics(cfg),
		creds: map[string]scram.Credentials{}, listeners: map[net.Listener]struct{}{},
		sessions: map[*session]struct{}{}, cancels: map[cancelKey]*session{},
		upstreams: map[*pgconn.PgConn]*session{},
	}
	if method == conf.AuthSCRAM {
		if s.creds["fuzz"], err = scram.NewCredentials(fuzzPassword); err != nil {
			tb.Fatal(err)
		}
		if s.dummy, err = scram.NewCredentials("dummy"); err != nil {
			tb.Fatal(err)
		}
	}
	pcfg, err := pgxpool.ParseConfig(cfg.Upstream.Reveal())
	if err != nil {
		tb.Fatal(err)
	}
	if s.pool, err = pgxpool.NewWithConfig(context.Background(), pcfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.pool.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	fuzzEnvs[s] = &fuzzEnv{log: pl, ln: ln}
	return s
}

// fuzzEnv is a fuzz server's panic log and the loopback listener its
// sessions are accepted on (TCP, so that the client can half-close).
type fuzzEnv struct {
	log *panicLog
	ln  net.Listener
}

var fuzzEnvs = map[*Server]*fuzzEnv{}

// runFuzzSession serves one connection whose client sends in and then
// half-closes; it returns what the proxy wrote and any panic logged.
func runFuzzSession(t *testing.T, srv *Server, in []byte) ([]byte, string) {
	t.Helper()
	env := fuzzEnvs[srv]
	client, err := net.Dial("tcp", env.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := env.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	sess := srv.newSession(server)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sess.serve()
	}()
	var out bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		io.Copy(&out, client)
	}()
	client.SetDeadline(time.Now().Add(10 * time.Second))
	client.Write(in)
	client.(*net.TCPConn).CloseWrite()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("session did not end after the client hung up (input %q)", in)
	}
	<-readDone
	return out.Bytes(), env.log.take()
}

// checkBackendStream parses everything the proxy wrote: up to a few
// single-byte answers to SSL and GSS requests, then backend messages.
func checkBackendStream(t *testing.T, out []byte) {
	t.Helper()
	var err error
	for skip := 0; skip <= 4 && skip <= len(out); skip++ {
		if skip > 0 && out[skip-1] != 'N' {
			break
		}
		if err = parseBackend(out[skip:]); err == nil {
			return
		}
	}
	t.Fatalf("the proxy wrote a malformed message stream: %v\n%q", err, out)
}

func parseBackend(b []byte) error {
	for len(b) > 0 {
		if len(b) < 5 {
			return fmt.Errorf("%d trailing bytes", len(b))
		}
		n := int(binary.BigEndian.Uint32(b[1:5]))
		if n < 4 || 1+n > len(b) {
			return fmt.Errorf("message %q with length %d in %d bytes", b[0], n, len(b))
		}
		fe := pgproto3.NewFrontend(bytes.NewReader(b[:1+n]), io.Discard)
		if _, err := fe.Receive(); err != nil {
			return fmt.Errorf("message %q: %w", b[0], err)
		}
		b = b[1+n:]
	}
	return nil
}

// startupSeeds are valid and nearly valid openings.
func startupSeeds() [][]byte {
	enc := func(msgs ...pgproto3.FrontendMessage) []byte {
		var b []byte
		for _, m := range msgs {
			var err error
			if b, err = m.Encode(b); err != nil {
				panic(err)
			}
		}
		return b
	}
	startup := &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "fuzz", "database": "shop", "application_name": "x"}}
	seeds := [][]byte{
		nil,
		enc(startup),
		enc(&pgproto3.SSLRequest{}, startup),
		enc(&pgproto3.GSSEncRequest{}, &pgproto3.SSLRequest{}, startup),
		enc(&pgproto3.CancelRequest{ProcessID: 1, SecretKey: []byte{1, 2, 3, 4}}),
		enc(&pgproto3.StartupMessage{ProtocolVersion: 0x00020000, Parameters: map[string]string{"user": "fuzz"}}),
		enc(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "nobody"}}),
		enc(startup, &pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=abcdefghijklmnop")}),
		enc(startup, &pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=abc")}, &pgproto3.SASLResponse{Data: []byte("c=biws,r=abc,p=AAAA")}),
		enc(startup, &pgproto3.PasswordMessage{Password: "md5" + strings.Repeat("0", 32)}),
		enc(startup, &pgproto3.Query{String: "SELECT 1"}),
		{0, 0, 0, 8, 4, 210, 22, 47},          // SSLRequest alone
		{0, 0, 0, 4},                          // length too short
		{0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 0},  // huge length
		{0, 0, 0, 9, 0, 3, 0, 0, 'u'},         // parameters not terminated
		append(enc(startup), 'p', 0, 0, 0, 3), // body length below 4
	}
	return seeds
}
