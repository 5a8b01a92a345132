package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/google/differential-privacy/go/v3/dpagg"
	"github.com/jackc/pgx/v5/pgconn"
)

// The accuracy table (section 6): six TPC-H-like queries answered by
// dpproxy through the wire and by Google's Go DP library (dpagg) run
// in-process on exactly the same rows with the same bounds, at ε = 0.1
// and 1. For each query and released column: the median relative error
// against the true (unbounded, un-noised) answer over every released true
// group of every run, the share of true groups released, and the bias of
// contribution bounding alone (the error left without noise), reported
// separately from the noise.
//
// The library gets what a careful user of it would write: contribution
// bounding done as its Beam front end does it (each unit keeps at most
// L0 of its groups and at most L∞ of its rows in each, chosen at random),
// the same clamping bounds, the query's ε split evenly among its
// aggregates, public groups where dpproxy's are public (values listed in
// the configuration, a public table's keys), and otherwise partition
// selection as its Count does it (Laplace thresholding of the noisy
// count, ThresholdedResult, at the same δ). dpproxy's bias is read off one
// release at ε = 10^6 (noise negligible); the library's from its bounded
// aggregates without noise.

// tpchAgg is one released column of a query, as the library computes it.
type tpchAgg struct {
	name         string // the column as the table shows it
	kind         string // count, countunits, sum, avg, median
	col          int    // index of the value in the library's row (after unit and key)
	lower, upper float64
}

// tpchQuery is one query of the table.
type tpchQuery struct {
	name, title string
	sql         string // through dpproxy; the same text run directly is the truth
	keys        int    // leading group-key columns of sql's result
	libSQL      string // the library's rows: unit, key (text), values (float8)
	aggs        []tpchAgg
	l0, linf    int
	// public lists the public groups (nil: partition selection); publicSQL
	// reads them.
	publicSQL string
}

var tpchQueries = []tpchQuery{
	{
		name: "Q1", title: "pricing summary (GROUP BY return flag, line status; public values)",
		sql: `SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_price,
		             avg(l_quantity) AS avg_qty, count(*) AS count_order
		        FROM lineitem WHERE l_shipdate <= date '1998-09-02' GROUP BY l_returnflag, l_linestatus`,
		keys:   2,
		libSQL: `SELECT l_custkey, l_returnflag || '|' || l_linestatus, l_quantity::float8, l_extendedprice::float8 FROM lineitem WHERE l_shipdate <= date '1998-09-02'`,
		aggs: []tpchAgg{
			{name: "sum_qty", kind: "sum", col: 0, lower: 1, upper: 50},
			{name: "sum_price", kind: "sum", col: 1, lower: 0, upper: 105000},
			{name: "avg_qty", kind: "avg", col: 0, lower: 1, upper: 50},
			{name: "count_order", kind: "count"},
		},
		l0: 4, linf: 32,
		publicSQL: `SELECT f || '|' || s FROM unnest(ARRAY['A','N','R']) f, unnest(ARRAY['F','O']) s`,
	},
	{
		name: "Q6", title: "forecast revenue change (filtered SUM of a product)",
		sql: `SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
		       WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01'
		         AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24`,
		libSQL: `SELECT l_custkey, '', (l_extendedprice * l_discount)::float8 FROM lineitem
		       WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01'
		         AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24`,
		aggs: []tpchAgg{{name: "revenue", kind: "sum", col: 0, lower: 0, upper: 10500}},
		l0:   1, linf: 32,
		publicSQL: `SELECT ''`,
	},
	{
		name: "Q3", title: "COUNT(DISTINCT customer) with orders since 1995",
		sql:    `SELECT count(DISTINCT o_custkey) AS customers FROM orders WHERE o_orderdate >= date '1995-01-01'`,
		libSQL: `SELECT DISTINCT o_custkey, '' FROM orders WHERE o_orderdate >= date '1995-01-01'`,
		aggs:   []tpchAgg{{name: "customers", kind: "countunits"}},
		l0:     1, linf: 1,
		publicSQL: `SELECT ''`,
	},
	{
		name: "Q4", title: "customers per nation (join with the public nation table)",
		sql:    `SELECT n_name, count(*) AS customers FROM customer JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name`,
		keys:   1,
		libSQL: `SELECT c_custkey, n_name FROM customer JOIN nation ON c_nationkey = n_nationkey`,
		aggs:   []tpchAgg{{name: "customers", kind: "count"}},
		l0:     1, linf: 1,
		publicSQL: `SELECT n_name FROM nation`,
	},
	{
		name: "Q5", title: "median order total (percentile_cont)",
		sql:    `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY o_totalprice) AS median_total FROM orders`,
		libSQL: `SELECT o_custkey, '', o_totalprice::float8 FROM orders`,
		aggs:   []tpchAgg{{name: "median_total", kind: "median", col: 0, lower: 0, upper: 600000}},
		l0:     1, linf: 8,
		publicSQL: `SELECT ''`,
	},
	{
		name: "Q7", title: "orders per month (time buckets, partition selection)",
		sql:    `SELECT date_trunc('month', o_orderdate) AS month, count(*) AS orders FROM orders GROUP BY 1`,
		keys:   1,
		libSQL: `SELECT o_custkey, date_trunc('month', o_orderdate)::text FROM orders`,
		aggs:   []tpchAgg{{name: "orders", kind: "count"}},
		l0:     4, linf: 8,
	},
}

// accTableRow is one line of the table: a query's column at one ε.
type accTableRow struct {
	Query, Title, Column string
	Epsilon              float64
	Groups               int // true groups
	// Median relative error over released true groups and runs, share of
	// true groups released, and median relative error of bounding alone.
	ProxyErr, ProxyShare, ProxyBias float64
	LibErr, LibShare, LibBias       float64
	// ProxySE and LibSE are the bootstrap standard errors of the two
	// median errors: with 20 runs of a few groups a median moves by
	// several percent between runs of the same mechanism.
	ProxySE, LibSE     float64
	ProxyRuns, LibRuns int
	// ProxyRefused holds dpproxy's refusal when it does not answer the query.
	ProxyRefused string
}

// resultRows is a result keyed by its group keys joined with "|", each
// with its released columns as text.
type resultRows map[string][]string

// rawQuery runs sql (after setup) over the simple protocol and returns the
// last result's rows as text, exactly as a client sees them.
func rawQuery(ctx context.Context, url string, setup []string, sql string) ([][]string, error) {
	c, err := pgconn.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	for _, s := range setup {
		if _, err := c.Exec(ctx, s).ReadAll(); err != nil {
			return nil, err
		}
	}
	res, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, r := range res[len(res)-1].Rows {
		row := make([]string, len(r))
		for i, v := range r {
			if v == nil {
				row[i] = "NULL"
			} else {
				row[i] = string(v)
			}
		}
		out = append(out, row)
	}
	return out, nil
}

func keyed(rows [][]string, keys int) resultRows {
	m := resultRows{}
	for _, r := range rows {
		m[strings.Join(r[:keys], "|")] = r[keys:]
	}
	return m
}

// relErrs appends, for every true group released in got, the relative
// error of column i, and returns how many true groups were released.
func relErrs(errs []float64, truth, got resultRows, i int) ([]float64, int) {
	n := 0
	for k, tv := range truth {
		gv, ok := got[k]
		if !ok {
			continue
		}
		n++
		t, err1 := strconv.ParseFloat(tv[i], 64)
		g, err2 := strconv.ParseFloat(gv[i], 64)
		if err1 != nil || err2 != nil || t == 0 {
			continue
		}
		errs = append(errs, math.Abs(g-t)/math.Abs(t))
	}
	return errs, n
}

// medianNaN is the median (the mean of the middle two for an even count),
// NaN for no values.
func medianNaN(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// measureAccuracyTable fills the table: proxyRuns releases through dpproxy
// and libRuns in-process releases of the library per query and ε.
func measureAccuracyTable(ctx context.Context, e *benchEnv, proxyRuns, libRuns int) ([]accTableRow, string, error) {
	epsilons := []float64{0.1, 1}
	t, err := setupTPCH(ctx, e, proxyRuns*len(epsilons)+1)
	if err != nil {
		return nil, "", err
	}
	defer t.close()
	var out []accTableRow
	for _, q := range tpchQueries {
		truthRows, err := rawQuery(ctx, t.dbURL, nil, q.sql)
		if err != nil {
			return nil, "", fmt.Errorf("%s truth: %w", q.name, err)
		}
		truth := keyed(truthRows, q.keys)
		lib, err := loadLibRows(ctx, t.dbURL, q)
		if err != nil {
			return nil, "", fmt.Errorf("%s library rows: %w", q.name, err)
		}
		// dpproxy's bias: one release at ε = 10^6, by the last analyst.
		var bias resultRows
		refused := ""
		biasRows, err := rawQuery(ctx, t.proxyURL(t.analysts-1), []string{"SET dp.epsilon = 1000000", "SET dp.notices = off"}, q.sql)
		if err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				return nil, "", fmt.Errorf("%s through dpproxy: %w", q.name, err)
			}
			refused = pgErr.Code + ": " + pgErr.Message
			log.Printf("accuracy table: dpproxy refuses %s: %s", q.name, refused)
		} else {
			bias = keyed(biasRows, q.keys)
		}
		for ei, eps := range epsilons {
			var proxyReleases []resultRows
			if refused == "" {
				for r := 0; r < proxyRuns; r++ {
					rows, err := rawQuery(ctx, t.proxyURL(ei*proxyRuns+r), []string{fmt.Sprintf("SET dp.epsilon = %g", eps), "SET dp.notices = off"}, q.sql)
					if err != nil {
						return nil, "", fmt.Errorf("%s at ε = %g through dpproxy: %w", q.name, eps, err)
					}
					proxyReleases = append(proxyReleases, keyed(rows, q.keys))
				}
			}
			libReleases := make([]resultRows, libRuns)
			for r := range libReleases {
				if libReleases[r], err = lib.release(q, eps, false); err != nil {
					return nil, "", fmt.Errorf("%s at ε = %g in the library: %w", q.name, eps, err)
				}
			}
			libExact, err := lib.release(q, eps, true)
			if err != nil {
				return nil, "", err
			}
			for i, a := range q.aggs {
				row := accTableRow{Query: q.name, Title: q.title, Column: a.name, Epsilon: eps, Groups: len(truth),
					ProxyRuns: len(proxyReleases), LibRuns: libRuns, ProxyRefused: refused}
				row.ProxyErr, row.ProxyShare, row.ProxySE = errShareSE(truth, proxyReleases, i)
				row.LibErr, row.LibShare, row.LibSE = errShareSE(truth, libReleases, i)
				if bias != nil {
					row.ProxyBias, _ = errAndShare(truth, []resultRows{bias}, i)
				} else {
					row.ProxyBias = math.NaN()
				}
				row.LibBias, _ = errAndShare(truth, []resultRows{libExact}, i)
				out = append(out, row)
			}
		}
	}
	return out, t.summary, nil
}

// errShareSE is errAndShare with the bootstrap standard error of the
// median error (200 resamples of the (group, run) errors).
func errShareSE(truth resultRows, releases []resultRows, i int) (medErr, share, se float64) {
	medErr, share = errAndShare(truth, releases, i)
	var errs []float64
	for _, r := range releases {
		errs, _ = relErrs(errs, truth, r, i)
	}
	if len(errs) < 2 {
		return medErr, share, math.NaN()
	}
	var meds []float64
	re := make([]float64, len(errs))
	for range 200 {
		for j := range re {
			re[j] = errs[rand.IntN(len(errs))]
		}
		meds = append(meds, medianNaN(re))
	}
	var m, v float64
	for _, x := range meds {
		m += x
	}
	m /= float64(len(meds))
	for _, x := range meds {
		v += (x - m) * (x - m)
	}
	return medErr, share, math.Sqrt(v / float64(len(meds)-1))
}

func errAndShare(truth resultRows, releases []resultRows, i int) (medErr, share float64) {
	if len(releases) == 0 || len(truth) == 0 {
		return math.NaN(), math.NaN()
	}
	var errs []float64
	released := 0
	for _, r := range releases {
		var n int
		errs, n = relErrs(errs, truth, r, i)
		released += n
	}
	return medianNaN(errs), float64(released) / float64(len(releases)*len(truth))
}

// libData is a query's rows for the library, grouped by unit.
type libData struct {
	units  map[string]map[string][][]float64 // unit → group → rows of values
	public []string                          // nil: partition selection
}

func loadLibRows(ctx context.Context, url string, q tpchQuery) (*libData, error) {
	rows, err := rawQuery(ctx, url, nil, q.libSQL)
	if err != nil {
		return nil, err
	}
	d := &libData{units: map[string]map[string][][]float64{}}
	for _, r := range rows {
		vals := make([]float64, len(r)-2)
		for i, s := range r[2:] {
			if vals[i], err = strconv.ParseFloat(s, 64); err != nil {
				return nil, err
			}
		}
		g := d.units[r[0]]
		if g == nil {
			g = map[string][][]float64{}
			d.units[r[0]] = g
		}
		g[r[1]] = append(g[r[1]], vals)
	}
	if q.publicSQL != "" {
		pub, err := rawQuery(ctx, url, nil, q.publicSQL)
		if err != nil {
			return nil, err
		}
		for _, p := range pub {
			d.public = append(d.public, p[0])
		}
	}
	return d, nil
}

// release is one run of the library: bounding (random, as its Beam front
// end does), then each group's aggregates with ε split evenly among them;
// exact skips the noise (the bias of bounding alone). The result is keyed
// like dpproxy's, by the group key's text.
func (d *libData) release(q tpchQuery, eps float64, exact bool) (resultRows, error) {
	const delta = 1e-7
	// Contribution bounding: per unit at most l0 groups and linf rows in
	// each; perGroup holds each group's units, each its kept rows.
	perGroup := map[string][][][]float64{}
	for _, groups := range d.units {
		keys := make([]string, 0, len(groups))
		for k := range groups {
			keys = append(keys, k)
		}
		slices.Sort(keys) // then shuffled: Go's map order is not a uniform shuffle
		rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		if len(keys) > q.l0 {
			keys = keys[:q.l0]
		}
		for _, k := range keys {
			rows := slices.Clone(groups[k])
			rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			if len(rows) > q.linf {
				rows = rows[:q.linf]
			}
			perGroup[k] = append(perGroup[k], rows)
		}
	}
	groups := d.public
	if groups == nil {
		for k := range perGroup {
			groups = append(groups, k)
		}
	}
	share := eps / float64(len(q.aggs))
	out := resultRows{}
	for _, g := range groups {
		vals := make([]string, len(q.aggs))
		keep := true
		for i, a := range q.aggs {
			v, ok, err := libAggregate(a, perGroup[g], share, delta, int64(q.l0), int64(q.linf), exact, d.public == nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.name, err)
			}
			if !ok {
				keep = false
			}
			vals[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		if keep {
			out[g] = vals
		}
	}
	return out, nil
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

// libAggregate computes one aggregate of one group from each unit's kept
// rows. selection: the group is not public, so the aggregate is released
// only if the library's thresholding keeps it (counts only: the table's
// selected queries are counts).
func libAggregate(a tpchAgg, units [][][]float64, eps, delta float64, l0, linf int64, exact, selection bool) (float64, bool, error) {
	switch a.kind {
	case "count", "countunits":
		per := linf
		if a.kind == "countunits" {
			per = 1
		}
		if exact {
			var n int64
			for _, rows := range units {
				n += min(int64(len(rows)), per)
			}
			return float64(n), true, nil
		}
		s, err := dpagg.NewBoundedSumInt64(&dpagg.BoundedSumInt64Options{Epsilon: eps, MaxPartitionsContributed: l0, Lower: 0, Upper: per})
		if err != nil {
			return 0, false, err
		}
		for _, rows := range units {
			if err := s.Add(min(int64(len(rows)), per)); err != nil {
				return 0, false, err
			}
		}
		if selection {
			r, err := s.ThresholdedResult(delta)
			if err != nil || r == nil {
				return 0, false, err
			}
			return float64(*r), true, nil
		}
		r, err := s.Result()
		return float64(r), true, err
	case "sum":
		col := a.col
		lo, hi := a.lower, a.upper
		if exact {
			var t float64
			for _, rows := range units {
				for _, r := range rows {
					t += clamp(r[col], lo, hi)
				}
			}
			return t, true, nil
		}
		// Each unit's sum over its kept rows lies in [linf·lower, linf·upper]:
		// the library clamps that per-unit sum (its sensitivity per group).
		s, err := dpagg.NewBoundedSumFloat64(&dpagg.BoundedSumFloat64Options{Epsilon: eps, MaxPartitionsContributed: l0,
			Lower: float64(linf) * math.Min(lo, 0), Upper: float64(linf) * hi})
		if err != nil {
			return 0, false, err
		}
		for _, rows := range units {
			var t float64
			for _, r := range rows {
				t += clamp(r[col], lo, hi)
			}
			if err := s.Add(t); err != nil {
				return 0, false, err
			}
		}
		r, err := s.Result()
		return r, true, err
	case "avg":
		if exact {
			var t, n float64
			for _, rows := range units {
				for _, r := range rows {
					t += clamp(r[a.col], a.lower, a.upper)
					n++
				}
			}
			return t / n, n > 0, nil
		}
		m, err := dpagg.NewBoundedMean(&dpagg.BoundedMeanOptions{Epsilon: eps, MaxPartitionsContributed: l0, MaxContributionsPerPartition: linf, Lower: a.lower, Upper: a.upper})
		if err != nil {
			return 0, false, err
		}
		for _, rows := range units {
			for _, r := range rows {
				if err := m.Add(r[a.col]); err != nil {
					return 0, false, err
				}
			}
		}
		r, err := m.Result()
		return r, true, err
	case "median":
		if exact {
			var xs []float64
			for _, rows := range units {
				for _, r := range rows {
					xs = append(xs, clamp(r[a.col], a.lower, a.upper))
				}
			}
			return medianNaN(xs), true, nil
		}
		bq, err := dpagg.NewBoundedQuantiles(&dpagg.BoundedQuantilesOptions{Epsilon: eps, MaxPartitionsContributed: l0, MaxContributionsPerPartition: linf, Lower: a.lower, Upper: a.upper})
		if err != nil {
			return 0, false, err
		}
		for _, rows := range units {
			for _, r := range rows {
				if err := bq.Add(r[a.col]); err != nil {
					return 0, false, err
				}
			}
		}
		r, err := bq.Result(0.5)
		return r, true, err
	}
	return 0, false, fmt.Errorf("unknown aggregate kind %q", a.kind)
}
