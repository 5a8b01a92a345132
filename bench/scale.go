package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

type memResult struct {
	target        string
	conns         int
	before, after int64 // RSS, KiB
	failed        int
	firstErr      string
	backends      int // upstream backends while the connections were held
}

type mixResult struct {
	clients    int
	duration   time.Duration
	queries    int
	fresh      int // answered by a new charge (ledger writes)
	errors     map[string]int
	ledgerTx   int64
	lat        []float64 // ms
	firstError string
}

type scaleResult struct {
	mem  []memResult
	mix  *mixResult
	pool *poolResult // pool.go
}

func measureScale(ctx context.Context, e *benchEnv, o options) (*scaleResult, error) {
	res := &scaleResult{}
	for _, t := range []struct {
		name string
		url  string
		pid  int
	}{{"dpproxy", e.proxyURL, e.proxy.Process.Pid}, {"pgbouncer", e.bouncerURL(), e.bouncer.Process.Pid}} {
		m, err := holdConnections(ctx, e, t.name, t.url, t.pid, o.conns)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
		res.mem = append(res.mem, *m)
	}
	mix, err := runMix(ctx, e, 64, o.mixDuration)
	if err != nil {
		return nil, err
	}
	res.mix = mix
	if o.poolConns > 0 {
		if res.pool, err = measurePool(ctx, e, o); err != nil {
			return nil, fmt.Errorf("pool: %w", err)
		}
	}
	return res, nil
}

// rssKiB reads VmRSS of a process.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmRSS")
}

// holdConnections opens n connections, runs one query on each, and reads
// the process's RSS before and while they are held idle.
func holdConnections(ctx context.Context, e *benchEnv, name, url string, pid, n int) (*memResult, error) {
	// One connection first, so that the baseline includes what any use
	// allocates once (pools, caches, code pages).
	warm, err := pgconn.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer warm.Close(ctx)
	if _, err := warm.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond)
	m := &memResult{target: name, conns: n}
	if m.before, err = rssKiB(pid); err != nil {
		return nil, err
	}
	conns := make([]*pgconn.PgConn, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := pgconn.Connect(ctx, url)
			if err == nil {
				_, err = c.Exec(ctx, "SELECT 1").ReadAll()
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				m.failed++
				if m.firstErr == "" {
					m.firstErr = err.Error()
				}
				if c != nil {
					c.Close(ctx)
				}
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	// Idle: dpproxy's sessions give back their read buffer after 0.5 to
	// 1 s without a message (proxy/sessionidle.go), as any client's does
	// in a real idle spell.
	time.Sleep(2 * time.Second)
	if m.after, err = rssKiB(pid); err != nil {
		return nil, err
	}
	if direct, err := pgx.Connect(ctx, e.directURL()); err == nil {
		// dpproxy's upstream connections say application_name dpproxy
		// (the ledger's dpproxy-ledger); pgbouncer's say nothing.
		q := "SELECT count(*) FROM pg_stat_activity WHERE datname = 'bench' AND backend_type = 'client backend' AND application_name = 'dpproxy'"
		if name != "dpproxy" {
			q = "SELECT count(*) FROM pg_stat_activity WHERE datname = 'bench' AND backend_type = 'client backend' AND application_name NOT LIKE 'dpproxy%' AND pid <> pg_backend_pid()"
		}
		direct.QueryRow(ctx, q).Scan(&m.backends)
		direct.Close(ctx)
	}
	for _, c := range conns {
		if c != nil {
			c.Close(ctx)
		}
	}
	time.Sleep(500 * time.Millisecond)
	return m, nil
}

// runMix runs fresh and repeated DP queries from clients connections for
// d and counts the ledger's transactions (rows of dpproxy.charges).
func runMix(ctx context.Context, e *benchEnv, clients int, d time.Duration) (*mixResult, error) {
	direct, err := pgx.Connect(ctx, e.directURL())
	if err != nil {
		return nil, err
	}
	defer direct.Close(ctx)
	countCharges := func() (int64, error) {
		var n int64
		err := direct.QueryRow(ctx, "SELECT count(*) FROM dpproxy.charges").Scan(&n)
		return n, err
	}
	before, err := countCharges()
	if err != nil {
		return nil, err
	}
	res := &mixResult{clients: clients, duration: d, errors: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	aggs := []string{"COUNT(*)", "SUM(val)", "AVG(val)"}
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, err := pgx.ParseConfig(e.proxyURL)
			if err != nil {
				return
			}
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			if i%2 == 1 {
				cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe // extended protocol
			}
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				mu.Lock()
				res.errors["connect"]++
				mu.Unlock()
				return
			}
			defer c.Close(ctx)
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for time.Now().Before(stop) {
				agg := aggs[rng.IntN(len(aggs))]
				var q string
				fresh := rng.IntN(5) != 0
				if fresh {
					// A threshold nobody asked before: a new question, charged.
					q = fmt.Sprintf("SELECT grp, %s FROM mix_events WHERE val < %d.%06d GROUP BY grp", agg, 1+rng.IntN(99), rng.IntN(1000000))
				} else {
					q = fmt.Sprintf("SELECT grp, %s FROM mix_events GROUP BY grp", agg)
				}
				t0 := time.Now()
				rows, err := c.Query(ctx, q)
				if err == nil {
					for rows.Next() {
					}
					rows.Close()
					err = rows.Err()
				}
				ms := float64(time.Since(t0).Microseconds()) / 1000
				mu.Lock()
				if err != nil {
					code := "other"
					var pgErr *pgconn.PgError
					if errors.As(err, &pgErr) {
						code = pgErr.Code
					}
					res.errors[code]++
					if res.firstError == "" {
						res.firstError = err.Error()
					}
				} else {
					res.queries++
					res.lat = append(res.lat, ms)
					if fresh {
						res.fresh++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	after, err := countCharges()
	if err != nil {
		return nil, err
	}
	res.ledgerTx = after - before
	return res, nil
}

func errorSummary(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
