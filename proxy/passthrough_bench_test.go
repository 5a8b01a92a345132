package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// The pass-through round trip: a client's query through a real session of
// the proxy (its message loop, analysis cache, upstream connection and
// relay) to an upstream that answers at once, so that what is measured is
// the proxy's own cost per query, system calls included (bench/ measures
// the same against PostgreSQL and pgbouncer, where the database's time
// hides it):
//
//	go test ./proxy -run '^$' -bench PassThrough -benchmem
//
// The queries are pgbench's select-only ones (-S): the simple protocol with
// a new constant each time, and the extended protocol as pgbench -M
// extended sends it (Parse of the unnamed statement, Bind, Describe,
// Execute, Sync). The "direct" cases talk to the fake upstream without the
// proxy: the client's and the upstream's own share of the allocations and
// system calls, to subtract. The fake upstream speaks just enough of the
// backend protocol for pgx's startup, the proxy's set_config at a session's
// start and its DISCARD ALL at the end.

// fakeUpstream answers every SELECT with rows copies of one int4 row.
type fakeUpstream struct {
	ln   net.Listener
	rows int
}

func startFakeUpstream(tb testing.TB, rows int) *fakeUpstream {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &fakeUpstream{ln: ln, rows: rows}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	tb.Cleanup(func() { ln.Close() })
	return f
}

func (f *fakeUpstream) port() string {
	return strconv.Itoa(f.ln.Addr().(*net.TCPAddr).Port)
}

var fakeFields = []pgproto3.FieldDescription{{Name: []byte("abalance"), DataTypeOID: oidInt4, DataTypeSize: 4, TypeModifier: -1}}

func (f *fakeUpstream) serve(c net.Conn) {
	defer c.Close()
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	for _, p := range [][2]string{{"server_version", "15.0"}, {"server_encoding", "UTF8"}, {"client_encoding", "UTF8"},
		{"DateStyle", "ISO, MDY"}, {"TimeZone", "UTC"}, {"integer_datetimes", "on"}, {"standard_conforming_strings", "on"}} {
		be.Send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	stmts := map[string]string{}
	portals := map[string]string{}
	failed := false // an error in the batch: skip to Sync
	row := &pgproto3.DataRow{Values: [][]byte{[]byte("4711")}}
	selectTag := []byte("SELECT " + strconv.Itoa(f.rows))
	result := func(sql string, fail bool) {
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(sql)), "SELECT") {
			for range f.rows {
				be.Send(row)
			}
			if fail { // aid 0: an error after the rows, as a failing expression would
				be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "22012", Message: "division by zero"})
				return
			}
			be.Send(&pgproto3.CommandComplete{CommandTag: selectTag})
			return
		}
		tag, _, _ := strings.Cut(strings.TrimSpace(sql), " ")
		be.Send(&pgproto3.CommandComplete{CommandTag: []byte(strings.ToUpper(tag))})
	}
	describe := func(sql string) {
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(sql)), "SELECT") {
			be.Send(&pgproto3.RowDescription{Fields: fakeFields})
		} else {
			be.Send(&pgproto3.NoData{})
		}
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		if _, sync := msg.(*pgproto3.Sync); failed && !sync {
			continue
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			if m.String == rewrite.RenderSettingsSQL {
				// The session's rendering settings (settings.go), read
				// before its first Parse.
				be.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("concat_ws"), DataTypeOID: oidText, DataTypeSize: -1, TypeModifier: -1}}})
				be.Send(&pgproto3.DataRow{Values: [][]byte{[]byte("ISO, MDY\x1fUTC")}})
				be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
			} else if strings.TrimSpace(m.String) == "" {
				be.Send(&pgproto3.EmptyQueryResponse{})
			} else {
				if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(m.String)), "SELECT") {
					be.Send(&pgproto3.RowDescription{Fields: fakeFields})
				}
				result(m.String, strings.HasSuffix(strings.TrimRight(m.String, "; "), "= 0"))
			}
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if be.Flush() != nil {
				return
			}
		case *pgproto3.Parse:
			stmts[m.Name] = m.Query
			be.Send(&pgproto3.ParseComplete{})
		case *pgproto3.Bind:
			sql, ok := stmts[m.PreparedStatement]
			if !ok {
				be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "26000", Message: "no such statement"})
				failed = true
				continue
			}
			if len(m.Parameters) > 0 && string(m.Parameters[0]) == "0" {
				sql = "fail:" + sql
			}
			portals[m.DestinationPortal] = sql
			be.Send(&pgproto3.BindComplete{})
		case *pgproto3.Describe:
			if m.ObjectType == 'S' {
				sql := stmts[m.Name]
				oids := make([]uint32, strings.Count(sql, "$"))
				for i := range oids {
					oids[i] = oidText
				}
				be.Send(&pgproto3.ParameterDescription{ParameterOIDs: oids})
				describe(sql)
			} else {
				sql, _ := strings.CutPrefix(portals[m.Name], "fail:")
				describe(sql)
			}
		case *pgproto3.Execute:
			sql, fail := strings.CutPrefix(portals[m.Portal], "fail:")
			result(sql, fail)
			failed = fail
		case *pgproto3.Close:
			if m.ObjectType == 'S' {
				delete(stmts, m.Name)
			} else {
				delete(portals, m.Name)
			}
			be.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Sync:
			failed = false
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if be.Flush() != nil {
				return
			}
		case *pgproto3.Flush:
			if be.Flush() != nil {
				return
			}
		case *pgproto3.Terminate:
			return
		}
	}
}

// fakeUpstreamServer is a Server of testconf.ProxyBench whose query pool
// connects to up, configured as New configures it, listening on loopback.
func fakeUpstreamServer(tb testing.TB, up *fakeUpstream) (addr string) {
	tb.Helper()
	cfg, err := testconf.Get(testconf.ProxyBench).Parse(func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{
		cfg: cfg, log: slog.New(slog.DiscardHandler), opts: Options{MaxMessageSize: cfg.Limits.WithDefaults().MaxMessageSize},
		analyzer: rewrite.New(cfg, rewrite.Options{}), parsed: newParseCache(), shapes: newShapeCache(),
		lim: newLimiter(cfg.Limits), metrics: newMetrics(cfg),
		listeners: map[net.Listener]struct{}{}, sessions: map[*session]struct{}{}, cancels: map[cancelKey]*session{},
		upstreams: map[*pgconn.PgConn]*session{}, databases: []string{"bench"},
	}
	pcfg, err := pgxpool.ParseConfig("postgres://bench@127.0.0.1:" + up.port() + "/bench?sslmode=disable")
	if err != nil {
		tb.Fatal(err)
	}
	// As New sets them (server.go).
	for k, v := range rewrite.PinnedSettings {
		pcfg.ConnConfig.RuntimeParams[k] = v
	}
	pcfg.ConnConfig.StatementCacheCapacity = 0
	pcfg.ConnConfig.DescriptionCacheCapacity = 0
	pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pcfg.ConnConfig.OnNotice = s.routeNotice
	pcfg.ConnConfig.BuildContextWatcherHandler = cancelUpstreamOnDone
	if s.pool, err = pgxpool.NewWithConfig(context.Background(), pcfg); err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go s.Serve(ln)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		s.pool.Close()
	})
	return ln.Addr().String()
}

// rawClient is a connected client that speaks the protocol itself, so
// that the client's own cost stays small and free of allocations.
type rawClient struct {
	conn net.Conn
	fe   *pgproto3.Frontend
}

func dialRaw(tb testing.TB, host, port string) *rawClient {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := pgconn.Connect(ctx, "postgres://bench@"+host+":"+port+"/bench?sslmode=disable")
	if err != nil {
		tb.Fatal(err)
	}
	hc, err := pc.Hijack()
	if err != nil {
		tb.Fatal(err)
	}
	c := &rawClient{conn: hc.Conn, fe: pgproto3.NewFrontend(hc.Conn, hc.Conn)}
	tb.Cleanup(func() {
		c.fe.Send(&pgproto3.Terminate{})
		c.fe.Flush()
		c.conn.Close()
	})
	return c
}

// roundTrip sends what was queued and reads the answer up to ReadyForQuery,
// checking that it holds want rows; an ErrorResponse is returned (after
// the ReadyForQuery) as its code and message.
func (c *rawClient) roundTrip(want int) error {
	if err := c.fe.Flush(); err != nil {
		return err
	}
	rows := 0
	var pgErr error
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			rows++
		case *pgproto3.ErrorResponse:
			if pgErr == nil {
				pgErr = errors.New(m.Code + ": " + m.Message)
			}
		case *pgproto3.ReadyForQuery:
			if rows != want {
				return errors.Join(pgErr, errors.New("got "+strconv.Itoa(rows)+" rows, want "+strconv.Itoa(want)))
			}
			return pgErr
		}
	}
}

// pgbench -S's query; the simple protocol's gets a new constant each time
// (the shape cache's case, shapecache.go).
const (
	selectOnlyPrefix   = "SELECT abalance FROM pgbench_accounts WHERE aid = "
	selectOnlyExtended = selectOnlyPrefix + "$1;"
)

// queryText fills buf with the simple protocol's query for aid i.
func queryText(buf []byte, i int) string {
	buf = strconv.AppendInt(append(buf[:0], selectOnlyPrefix...), int64(i%1000000+1), 10)
	return string(append(buf, ';'))
}

func BenchmarkPassThrough(b *testing.B) {
	for _, rows := range []int{1, 100} {
		up := startFakeUpstream(b, rows)
		addr := fakeUpstreamServer(b, up)
		host, port, _ := net.SplitHostPort(addr)
		targets := []struct{ name, host, port string }{{"proxy", host, port}, {"direct", "127.0.0.1", up.port()}}
		for _, t := range targets {
			suffix := "/rows=" + strconv.Itoa(rows) + "/" + t.name
			b.Run("simple"+suffix, func(b *testing.B) {
				c := dialRaw(b, t.host, t.port)
				var buf []byte
				q := &pgproto3.Query{}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					q.String = queryText(buf, i)
					c.fe.Send(q)
					if err := c.roundTrip(rows); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("extended"+suffix, func(b *testing.B) {
				c := dialRaw(b, t.host, t.port)
				param := [][]byte{nil}
				var buf []byte
				parse := &pgproto3.Parse{Query: selectOnlyExtended}
				bind := &pgproto3.Bind{Parameters: param}
				describe := &pgproto3.Describe{ObjectType: 'P'}
				execute := &pgproto3.Execute{}
				sync := &pgproto3.Sync{}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					buf = strconv.AppendInt(buf[:0], int64(i%1000000+1), 10)
					param[0] = buf
					c.fe.Send(parse)
					c.fe.Send(bind)
					c.fe.Send(describe)
					c.fe.Send(execute)
					c.fe.Send(sync)
					if err := c.roundTrip(rows); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestPassThroughFakeUpstream runs the benchmark's round trips a few times
// each, so that the unit tests keep the benchmark and its fake upstream
// working: the proxy relays the fake's rows for both protocols.
func TestPassThroughFakeUpstream(t *testing.T) {
	up := startFakeUpstream(t, 3)
	host, port, _ := net.SplitHostPort(fakeUpstreamServer(t, up))
	c := dialRaw(t, host, port)
	var buf []byte
	for i := range 3 {
		c.fe.Send(&pgproto3.Query{String: queryText(buf, i)})
		if err := c.roundTrip(3); err != nil {
			t.Fatalf("simple query %d: %v", i, err)
		}
		c.fe.Send(&pgproto3.Parse{Query: selectOnlyExtended})
		c.fe.Send(&pgproto3.Bind{Parameters: [][]byte{[]byte(strconv.Itoa(i + 1))}})
		c.fe.Send(&pgproto3.Describe{ObjectType: 'P'})
		c.fe.Send(&pgproto3.Execute{})
		c.fe.Send(&pgproto3.Sync{})
		if err := c.roundTrip(3); err != nil {
			t.Fatalf("extended query %d: %v", i, err)
		}
	}
	// An upstream error after a row: the row, then the error, and the
	// session goes on.
	c.fe.Send(&pgproto3.Query{String: selectOnlyPrefix + "0"})
	if err := c.roundTrip(3); err == nil || !strings.HasPrefix(err.Error(), "22012") {
		t.Errorf("simple query failing upstream: %v, want the rows and 22012", err)
	}
	c.fe.Send(&pgproto3.Parse{Query: selectOnlyExtended})
	c.fe.Send(&pgproto3.Bind{Parameters: [][]byte{[]byte("0")}})
	c.fe.Send(&pgproto3.Execute{})
	c.fe.Send(&pgproto3.Sync{})
	if err := c.roundTrip(3); err == nil || !strings.HasPrefix(err.Error(), "22012") {
		t.Errorf("extended query failing upstream: %v, want the rows and 22012", err)
	}
	c.fe.Send(&pgproto3.Query{String: queryText(buf, 7)})
	if err := c.roundTrip(3); err != nil {
		t.Errorf("simple query after the errors: %v", err)
	}
	// A private table is still refused on this path.
	c.fe.Send(&pgproto3.Query{String: "SELECT * FROM events"})
	if err := c.roundTrip(0); err == nil || !strings.HasPrefix(err.Error(), "42501") && !strings.HasPrefix(err.Error(), "0A000") {
		t.Errorf("SELECT * FROM events: %v, want a refusal", err)
	}
}
