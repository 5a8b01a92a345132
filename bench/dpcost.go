package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// dpRow is one aggregate's timings (medians over rounds, ms).
type dpRow struct {
	agg                                 string
	raw, preagg, clamped, rewritten, dp []float64
	rawQ, preaggQ, clampedQ, dpQ        string // clampedQ is "" for COUNT
	rewrittenQ                          string // the rewritten SQL (EXPLAIN DP), run directly with a seed
}

type dpResult struct {
	table   string
	rows    int
	rounds  int
	results []*dpRow
	explain string // EXPLAIN ANALYZE of the rewritten SUM query
	rewrite string // the rewritten SUM query
}

func measureDPCost(ctx context.Context, e *benchEnv, table string, size, rounds int) (*dpResult, error) {
	direct, err := pgx.Connect(ctx, e.directURL())
	if err != nil {
		return nil, err
	}
	defer direct.Close(ctx)
	pcfg, err := pgx.ParseConfig(e.proxyURL)
	if err != nil {
		return nil, err
	}
	pcfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	proxy, err := pgx.ConnectConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	defer proxy.Close(ctx)
	if _, err := proxy.Exec(ctx, "SET dp.notices = off"); err != nil {
		return nil, err
	}

	res := &dpResult{rows: size, rounds: rounds, table: table}
	// The pre-aggregation baseline of each aggregate computes just what
	// that aggregate needs per (unit, group): a count, a sum, or both. The
	// clamped baseline adds the per-row clamp to the bounds, which any
	// correct bounding of a sum must also do.
	preagg := func(perUnit, outer string) string {
		return fmt.Sprintf(`SELECT grp, count(*) AS units, %s
  FROM (SELECT unit_id, grp, %s FROM %s GROUP BY unit_id, grp) AS per_unit
 GROUP BY grp`, outer, perUnit, table)
	}
	clamp := func(col string) string { return fmt.Sprintf("least(greatest(%s, 0), 100)", col) }
	for _, agg := range []struct{ name, expr, col string }{
		{"COUNT", "COUNT(*)", ""},
		{"SUM (numeric column)", "SUM(val)", "val"}, {"AVG (numeric column)", "AVG(val)", "val"},
		{"SUM (integer column)", "SUM(qty)", "qty"}, {"AVG (integer column)", "AVG(qty)", "qty"},
	} {
		q := fmt.Sprintf("SELECT grp, %s FROM %s GROUP BY grp", agg.expr, table)
		r := &dpRow{agg: agg.name, rawQ: q, dpQ: q}
		switch {
		case agg.col == "":
			r.preaggQ = preagg("count(*) AS c", "sum(c) AS n")
		case strings.HasPrefix(agg.expr, "SUM"):
			r.preaggQ = preagg("sum("+agg.col+") AS s", "sum(s) AS total")
			r.clampedQ = preagg("sum("+clamp(agg.col)+") AS s", "sum(s) AS total")
		default:
			r.preaggQ = preagg("count(*) AS c, sum("+agg.col+") AS s", "sum(s) / sum(c) AS mean")
			r.clampedQ = preagg("count(*) AS c, sum("+clamp(agg.col)+") AS s", "sum(s) / sum(c) AS mean")
		}
		res.results = append(res.results, r)
	}
	// The rewritten SQL of each, as EXPLAIN DP shows it, to time the
	// database's share of the DP query apart from the proxy's.
	for _, r := range res.results {
		rows, err := proxy.Query(ctx, "EXPLAIN DP "+r.dpQ)
		if err != nil {
			return nil, err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		if r.rewrittenQ = rewrittenSQL(lines); r.rewrittenQ == "" {
			return nil, fmt.Errorf("EXPLAIN DP printed no rewritten SQL:\n%s", strings.Join(lines, "\n"))
		}
	}
	// The proxy raises work_mem to 64MB inside each private query's
	// transaction (proxy/upstream.go); the baselines get the same.
	if _, err := direct.Exec(ctx, "SET work_mem = '64MB'"); err != nil {
		return nil, err
	}
	// Warm the cache (shared_buffers) once so that the first timing does
	// not pay for reading the table from disk.
	if _, err := direct.Exec(ctx, "SELECT count(*) FROM "+table); err != nil {
		return nil, err
	}
	seq := 0
	for round := range rounds {
		for _, r := range res.results {
			steps := []func() error{
				func() error { d, err := timeQuery(ctx, direct, r.rawQ); r.raw = append(r.raw, d); return err },
				func() error { d, err := timeQuery(ctx, direct, r.preaggQ); r.preagg = append(r.preagg, d); return err },
				func() error {
					d, err := timeQuery(ctx, direct, r.rewrittenQ, int64(round+1))
					r.rewritten = append(r.rewritten, d)
					return err
				},
				func() error {
					if r.clampedQ == "" {
						return nil
					}
					d, err := timeQuery(ctx, direct, r.clampedQ)
					r.clamped = append(r.clamped, d)
					return err
				},
				func() error {
					// A new ε each time makes it a new question: the answer
					// cache would otherwise answer without touching the database.
					seq++
					if _, err := proxy.Exec(ctx, fmt.Sprintf("SET dp.epsilon = %.9f", 1+float64(seq)*1e-6)); err != nil {
						return err
					}
					d, err := timeQuery(ctx, proxy, r.dpQ)
					r.dp = append(r.dp, d)
					if err != nil {
						// The proxy's answer is opaque on purpose; its log and
						// the server's say why, and the run directory goes
						// with the run.
						return fmt.Errorf("%w\n%s", err, e.logTails())
					}
					return nil
				},
			}
			for i := range steps {
				if err := steps[(i+round)%len(steps)](); err != nil {
					return nil, fmt.Errorf("%s: %w", r.agg, err)
				}
			}
		}
	}

	// The rewritten SQL, as EXPLAIN DP shows it, and its plan.
	rows, err := proxy.Query(ctx, "EXPLAIN DP SELECT grp, SUM(val) FROM "+table+" GROUP BY grp")
	if err != nil {
		return nil, err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	res.rewrite = rewrittenSQL(lines)
	if res.rewrite == "" {
		return nil, fmt.Errorf("EXPLAIN DP printed no rewritten SQL:\n%s", strings.Join(lines, "\n"))
	}
	tx, err := direct.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	prows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+res.rewrite, int64(0x0123456789abcdef))
	if err != nil {
		return nil, fmt.Errorf("explain analyze: %w", err)
	}
	plan, err := pgx.CollectRows(prows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("explain analyze: %w", err)
	}
	res.explain = strings.Join(plan, "\n")
	return res, nil
}

// rewrittenSQL extracts the SQL that follows EXPLAIN DP's "Rewritten SQL"
// line.
func rewrittenSQL(lines []string) string {
	for i, l := range lines {
		if strings.HasPrefix(l, "Rewritten SQL") {
			return strings.TrimSpace(strings.Join(lines[i+1:], "\n"))
		}
	}
	return ""
}

// timeQuery runs q, reads every row and returns the time in ms.
func timeQuery(ctx context.Context, c *pgx.Conn, q string, args ...any) (float64, error) {
	t0 := time.Now()
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return float64(time.Since(t0).Microseconds()) / 1000, nil
}
