package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/testconf"
)

// The scale section's transaction pooling part (limits.pool, issue 17):
// a dpproxy with pool mode transaction and -pool-backends backends holds
// -pool-conns client connections, of which -pool-active run a mix of
// pass-through statements (simple and extended protocol, named prepared
// statements), transaction blocks, SETs and DP queries; the others stay
// idle. Measured: RSS per connection while all are idle, errors, wrong
// settings seen by a client, and the most backends PostgreSQL had for the
// proxy at any time.

type poolResult struct {
	conns, active, backends int
	before, after           int64 // RSS, KiB, before and with every connection held idle
	failed                  int
	firstErr                string
	duration                time.Duration
	queries, private, txs   int
	wrongSettings           int
	errors                  map[string]int
	lat                     []float64 // ms
	peakBackends            int
	idleBackends            int // backends while all connections were idle
}

// poolApp is the application_name of the pooled proxy's clients: each
// backend takes it when it first serves one (the session's settings are
// restored there), which tells its backends from the bench proxy's.
const poolApp = "bench-pool"

func measurePool(ctx context.Context, e *benchEnv, o options) (*poolResult, error) {
	cmd, url, err := e.runProxyEdited(ctx, "dpproxy-pool", func(c *testconf.Config) {
		c.Merge(fmt.Sprintf("pool: {mode: transaction, max_backends: %d}", o.poolBackends), "limits")
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	url += "&application_name=" + poolApp
	res := &poolResult{conns: o.poolConns, active: o.poolActive, backends: o.poolBackends, duration: o.poolDuration, errors: map[string]int{}}
	direct, err := pgx.Connect(ctx, e.directURL())
	if err != nil {
		return nil, err
	}
	defer direct.Close(ctx)
	countBackends := func() int {
		var n int
		direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'bench' AND application_name = $1", poolApp).Scan(&n)
		return n
	}

	warm, err := pgconn.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer warm.Close(ctx)
	if _, err := warm.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond)
	if res.before, err = rssKiB(cmd.Process.Pid); err != nil {
		return nil, err
	}

	// The idle ones, then the active ones, all connected and asked
	// SELECT 1 before the RSS is read.
	idle := make([]*pgconn.PgConn, o.poolConns-o.poolActive)
	active := make([]*pgx.Conn, o.poolActive)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.failed++
		if res.firstErr == "" {
			res.firstErr = err.Error()
		}
	}
	for i := range idle {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := pgconn.Connect(ctx, url)
			if err == nil {
				if _, err = c.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
					c.Close(ctx)
				}
			}
			if err != nil {
				fail(err)
				return
			}
			idle[i] = c
		})
	}
	for i := range active {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				fail(err)
				return
			}
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			if i%2 == 1 {
				cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement // named prepared statements
			}
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err == nil {
				if _, err = c.Exec(ctx, "SELECT 1"); err != nil {
					c.Close(ctx)
				}
			}
			if err != nil {
				fail(err)
				return
			}
			active[i] = c
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range idle {
			if c != nil {
				c.Close(ctx)
			}
		}
		for _, c := range active {
			if c != nil {
				c.Close(ctx)
			}
		}
	}()
	time.Sleep(time.Second)
	if res.after, err = rssKiB(cmd.Process.Pid); err != nil {
		return nil, err
	}
	res.idleBackends = countBackends()

	var peak atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(countBackends()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	stop := time.Now().Add(o.poolDuration)
	styles := []string{"ISO, MDY", "SQL, DMY", "German, DMY", "Postgres, MDY"}
	for i, c := range active {
		if c == nil {
			continue
		}
		wg.Go(func() {
			record := func(err error, kind string, ms float64) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					code := "other"
					var pgErr *pgconn.PgError
					if errors.As(err, &pgErr) {
						code = pgErr.Code
					}
					res.errors[code]++
					if res.firstErr == "" {
						res.firstErr = err.Error()
					}
					return
				}
				res.queries++
				res.lat = append(res.lat, ms)
				switch kind {
				case "private":
					res.private++
				case "tx":
					res.txs++
				}
			}
			style := styles[i%len(styles)]
			if _, err := c.Exec(ctx, "SET DateStyle = '"+style+"'"); err != nil {
				record(err, "", 0)
				return
			}
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for time.Now().Before(stop) {
				t0 := time.Now()
				var err error
				kind := ""
				switch r := rng.IntN(10); {
				case r < 5:
					var b int64
					err = c.QueryRow(ctx, "SELECT abalance FROM pgbench_accounts WHERE aid = $1", 1+rng.IntN(100000)).Scan(&b)
				case r < 7:
					kind = "tx"
					var tx pgx.Tx
					if tx, err = c.Begin(ctx); err == nil {
						var b int64
						var ds string
						err = tx.QueryRow(ctx, "SELECT abalance FROM pgbench_accounts WHERE aid = $1", 1+rng.IntN(100000)).Scan(&b)
						if err == nil {
							err = tx.QueryRow(ctx, "SELECT current_setting('DateStyle')").Scan(&ds)
						}
						if err == nil && ds != style {
							mu.Lock()
							res.wrongSettings++
							mu.Unlock()
						}
						if err == nil {
							err = tx.Commit(ctx)
						} else {
							tx.Rollback(ctx)
						}
					}
				case r < 9:
					kind = "private"
					q := "SELECT grp, COUNT(*) FROM mix_events GROUP BY grp"
					if rng.IntN(2) == 0 {
						q = fmt.Sprintf("SELECT grp, AVG(val) FROM mix_events WHERE val < %d.%06d GROUP BY grp", 1+rng.IntN(99), rng.IntN(1000000))
					}
					var rows pgx.Rows
					if rows, err = c.Query(ctx, q); err == nil {
						for rows.Next() {
						}
						rows.Close()
						err = rows.Err()
					}
				default:
					var ds string
					if err = c.QueryRow(ctx, "SHOW DateStyle").Scan(&ds); err == nil && ds != style {
						mu.Lock()
						res.wrongSettings++
						mu.Unlock()
					}
				}
				record(err, kind, float64(time.Since(t0).Microseconds())/1000)
			}
		})
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	res.peakBackends = int(peak.Load())
	return res, nil
}

func (r *report) writePool(p func(string, ...any), x *poolResult) {
	p("")
	p("Transaction pooling (`limits.pool: {mode: transaction, max_backends: %d}`): %d client connections held, %d of them active for %v "+
		"(half simple protocol, half extended with named prepared statements; each SETs its own DateStyle, then runs point reads of pgbench_accounts (5 in 10), "+
		"transaction blocks of two statements that check the DateStyle (2 in 10), DP queries over `mix_events` (2 in 10, half of them fresh) and SHOW DateStyle (1 in 10)); "+
		"the others idle. Goals: no error, no wrong setting, at most %d backends, ≤ 32 KiB per idle connection.",
		x.backends, x.conns, x.active, x.duration, x.backends)
	p("")
	per := float64(x.after-x.before) / float64(max(x.conns-x.failed, 1))
	errs := 0
	for _, n := range x.errors {
		errs += n
	}
	p("| connections | failed | RSS before KiB | RSS held KiB | per idle connection KiB | backends idle | peak backends | queries | of which DP | transactions | p50 ms | p99 ms | errors | wrong settings | goal |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
	p("| %d | %d | %d | %d | %.1f | %d | %d | %d | %d | %d | %.1f | %.1f | %s | %d | %s |", x.conns, x.failed, x.before, x.after, per, x.idleBackends, x.peakBackends,
		x.queries, x.private, x.txs, percentile(x.lat, 0.5), percentile(x.lat, 0.99), errorSummary(x.errors), x.wrongSettings,
		verdict(x.failed == 0 && errs == 0 && x.wrongSettings == 0 && x.peakBackends <= x.backends && per <= 32))
	if x.firstErr != "" {
		p("")
		p("First error: `%s`", x.firstErr)
	}
}
