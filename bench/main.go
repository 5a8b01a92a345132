// Command bench measures dpproxy against PostgreSQL itself and pgbouncer,
// and writes bench/RESULTS.md. Run it from the repository root:
//
//	go run ./bench                 # default sizes (DP cost on 1M and 10M rows), about 15 minutes
//	go run ./bench -rows 1000000   # the DP cost on 1M rows only, a few minutes
//
// It starts a throwaway PostgreSQL (internal/pgtest) tuned for benchmarks,
// loads the pgbench tables and a skewed private table, builds and starts
// the dpproxy binary and a pgbouncer (transaction pooling; installed from
// Debian if missing), then measures, interleaving the systems compared in
// every round so that a drifting machine load hits them alike:
//
//  1. pass-through overhead: pgbench select-only, direct vs dpproxy vs
//     pgbouncer, at 1, 8 and 64 clients, simple and extended protocol;
//  2. DP query cost in the database: raw aggregate vs per-unit
//     pre-aggregation (both direct) vs the DP query through the proxy, and
//     the EXPLAIN ANALYZE of the rewritten SQL;
//  3. proxy CPU per query: the proxy package's Go benchmarks;
//  4. scale: RSS per idle connection at -conns connections, and a DP query
//     mix from 64 clients (ledger transactions per second, errors), and
//     transaction pooling: -pool-conns clients, -pool-active of them busy,
//     on -pool-backends backends (pool.go);
//  5. accuracy: RMSE of the release path vs the theoretical standard
//     deviation, and bench/accuracy.png;
//  6. the accuracy table: six TPC-H-like queries through dpproxy and in
//     Google's DP library on the same rows (acctable.go), and
//     bench/accuracy-table.png;
//  7. accounting: how many queries each accountant admits within one
//     analyst's budget, through the proxy (accounting.go);
//  8. algorithms: partition selection's release probabilities and
//     percentile errors, dpproxy's mechanisms next to Google's library, in
//     process (`-only algorithms` runs it alone, without a database).
//
// -only runs some sections; the sections not run keep their text from the
// RESULTS.md already there (merge.go), so one section can be re-measured
// alone:
//
//	go run ./bench -only acctable  # the accuracy table, a few minutes
//
// Nothing here runs in `go test ./...` beyond the unit tests of its parsers.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	sizes       []int // rows of each events table (DP cost measured for each)
	scale       int
	duration    time.Duration
	rounds      int
	clients     []int
	modes       []string
	conns       int
	mixDuration time.Duration
	dpRounds    int
	accRuns     int
	algoRuns    int
	out         string
	plot        string
	skip        map[string]bool
	tableRuns   int // dpproxy releases per query and ε in the accuracy table
	tableLib    int // library releases per query and ε
	tablePlot   string

	// The scale section's transaction pooling part (pool.go).
	poolConns, poolActive, poolBackends int
	poolDuration                        time.Duration
}

// sections are the measurements -skip and -only name, in report order.
var sections = []string{"passthrough", "dpcost", "cpu", "scale", "accuracy", "acctable", "accounting", "algorithms"}

// needsEvents reports whether a section to run needs the pgbench and
// events tables and the bench proxy (all but the in-process accuracy and
// the accuracy table, which loads its own data).
func (o options) needsEvents() bool {
	return !o.skip["passthrough"] || !o.skip["dpcost"] || !o.skip["scale"] || !o.skip["accounting"]
}

func main() {
	var o options
	var clients, modes, skip, only, sizes string
	flag.StringVar(&sizes, "rows", "1000000,10000000", "rows of the private tables, comma-separated: the DP cost is measured on each (the first also serves the scale section)")
	flag.IntVar(&o.scale, "scale", 10, "pgbench scale factor (100k accounts each)")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "length of one pgbench run")
	flag.IntVar(&o.rounds, "rounds", 5, "interleaved rounds per measurement (medians are reported)")
	flag.StringVar(&clients, "clients", "1,8,64", "pgbench client counts")
	flag.StringVar(&modes, "modes", "simple,extended", "pgbench protocols (simple, extended, prepared; pgbouncer is skipped for prepared)")
	flag.IntVar(&o.conns, "conns", 500, "idle connections held for the memory measurement")
	flag.DurationVar(&o.mixDuration, "mix-duration", 60*time.Second, "length of the 64-client DP query mix")
	flag.IntVar(&o.poolConns, "pool-conns", 1000, "client connections of the transaction pooling measurement (0: skip it)")
	flag.IntVar(&o.poolActive, "pool-active", 100, "of -pool-conns, the active ones")
	flag.IntVar(&o.poolBackends, "pool-backends", 20, "limits.pool.max_backends of the transaction pooling measurement")
	flag.DurationVar(&o.poolDuration, "pool-duration", 30*time.Second, "how long the active connections of the pooling measurement run")
	flag.IntVar(&o.dpRounds, "dp-rounds", 5, "interleaved rounds of the DP cost measurement")
	flag.IntVar(&o.accRuns, "accuracy-runs", 20000, "releases per accuracy cell")
	flag.StringVar(&o.out, "out", "bench/RESULTS.md", "report to write")
	flag.StringVar(&o.plot, "plot", "bench/accuracy.png", "accuracy plot to write")
	flag.StringVar(&skip, "skip", "", "sections to skip: comma-separated of "+strings.Join(sections, ", "))
	flag.StringVar(&only, "only", "", "sections to run (the others keep their text in -out): comma-separated of "+strings.Join(sections, ", "))
	flag.IntVar(&o.tableRuns, "table-runs", 20, "dpproxy releases per query and ε in the accuracy table")
	flag.IntVar(&o.tableLib, "table-lib-runs", 100, "library releases per query and ε in the accuracy table")
	flag.StringVar(&o.tablePlot, "table-plot", "bench/accuracy-table.png", "accuracy table plot to write")
	flag.IntVar(&o.algoRuns, "algorithm-runs", 1000, "releases per percentile cell of the algorithms section")
	flag.Parse()
	var err error
	if o.clients, err = parseInts(clients); err != nil {
		log.Fatalf("-clients: %v", err)
	}
	if o.sizes, err = parseInts(sizes); err != nil {
		log.Fatalf("-rows: %v", err)
	}
	o.modes = strings.Split(modes, ",")
	o.skip = map[string]bool{}
	for _, s := range strings.Split(skip, ",") {
		if s != "" {
			o.skip[s] = true
		}
	}
	if only != "" {
		for _, s := range sections {
			o.skip[s] = true
		}
		for _, s := range strings.Split(only, ",") {
			delete(o.skip, s)
		}
	}
	for s := range o.skip {
		if !slices.Contains(sections, s) {
			log.Fatalf("unknown section %q (known: %s)", s, strings.Join(sections, ", "))
		}
	}
	if _, err := os.Stat("cmd/dpproxy"); err != nil {
		log.Fatal("run from the repository root: go run ./bench")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Args[1:]); err != nil {
		log.Fatal(err)
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(ctx context.Context, o options, args []string) error {
	began := time.Now()
	rep := &report{command: "go run ./bench " + strings.Join(args, " "), machine: machineInfo()}
	rep.loadBefore = loadAvg()

	var env *benchEnv
	var err error
	if o.needsEvents() || !o.skip["acctable"] {
		if env, err = setup(ctx, o); err != nil {
			return err
		}
		defer env.close()
		rep.setup = env.summary
	}

	if !o.skip["passthrough"] {
		log.Printf("pass-through: pgbench %v clients × %v, %d rounds of %v", o.clients, o.modes, o.rounds, o.duration)
		if rep.passthrough, err = measurePassThrough(ctx, env, o); err != nil {
			return fmt.Errorf("pass-through: %w", err)
		}
	}
	if !o.skip["dpcost"] {
		for i, rows := range o.sizes {
			// Fewer rounds on the big tables, whose queries take seconds.
			rounds := o.dpRounds
			if rows > 2_000_000 {
				rounds = min(rounds, 3)
			}
			log.Printf("DP cost on %d rows, %d rounds", rows, rounds)
			d, err := measureDPCost(ctx, env, eventsTable(i, rows), rows, rounds)
			if err != nil {
				return fmt.Errorf("dp cost on %d rows: %w", rows, err)
			}
			rep.dpcost = append(rep.dpcost, d)
		}
	}
	if !o.skip["scale"] {
		log.Printf("scale: %d idle connections, then a 64-client DP mix for %v", o.conns, o.mixDuration)
		if rep.scale, err = measureScale(ctx, env, o); err != nil {
			return fmt.Errorf("scale: %w", err)
		}
	}
	if !o.skip["cpu"] {
		log.Print("proxy CPU: go test -bench")
		if rep.cpu, err = measureCPU(ctx); err != nil {
			return fmt.Errorf("cpu: %w", err)
		}
	}
	if !o.skip["accuracy"] {
		log.Printf("accuracy: %d releases per cell", o.accRuns)
		if rep.accuracy, err = measureAccuracy(ctx, o); err != nil {
			return fmt.Errorf("accuracy: %w", err)
		}
		if err := plotAccuracy(rep.accuracy, o.plot); err != nil {
			return fmt.Errorf("accuracy plot: %w", err)
		}
		rep.plot = o.plot
	}
	if !o.skip["acctable"] {
		log.Printf("accuracy table: %d dpproxy and %d library releases per query and ε", o.tableRuns, o.tableLib)
		rows, setup, err := measureAccuracyTable(ctx, env, o.tableRuns, o.tableLib)
		if err != nil {
			return fmt.Errorf("accuracy table: %w", err)
		}
		rep.acctable = &accTable{rows: rows, setup: setup, proxyN: o.tableRuns, libN: o.tableLib, queries: tpchQueries}
		if err := plotAccuracyTable(rows, o.tablePlot); err != nil {
			return fmt.Errorf("accuracy table plot: %w", err)
		}
		rep.acctable.plot = o.tablePlot
	}
	if !o.skip["accounting"] {
		log.Print("accounting: queries admitted per budget, by accountant")
		if rep.accounting, err = measureAccounting(ctx, env); err != nil {
			return fmt.Errorf("accounting: %w", err)
		}
	}
	if !o.skip["algorithms"] {
		log.Printf("algorithms: partition selection and percentiles in process, %d releases per cell", o.algoRuns)
		if rep.algorithms, err = measureAlgorithms(o.algoRuns); err != nil {
			return fmt.Errorf("algorithms: %w", err)
		}
	}
	rep.loadAfter = loadAvg()
	rep.elapsed = time.Since(began)
	var fresh strings.Builder
	if err := rep.write(&fresh); err != nil {
		return err
	}
	var skipped []string
	for _, s := range sections {
		if o.skip[s] {
			skipped = append(skipped, s)
		}
	}
	old, _ := os.ReadFile(o.out) // none yet: nothing to keep
	if err := os.WriteFile(o.out, []byte(mergeReport(string(old), fresh.String(), skipped)), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s in %v", o.out, rep.elapsed.Round(time.Second))
	return nil
}
