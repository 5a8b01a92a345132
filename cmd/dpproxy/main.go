// Command dpproxy is a PostgreSQL-compatible proxy that answers SQL over
// private tables with differentially private results.
//
//	dpproxy serve -config dpproxy.yaml     run the proxy
//	dpproxy check-config -config FILE      validate a configuration against its upstream
//	dpproxy demo                           run on a throwaway database with sample data
//	dpproxy version                        print the build's version and revision
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/proxy"
)

const usage = `usage:
  dpproxy serve -config FILE         run the proxy
  dpproxy check-config -config FILE  validate the configuration and the upstream schema
  dpproxy budget [-config FILE] list|show USER|grant USER EPS DELTA
                                     operator view of the budget ledger (grants are audited)
  dpproxy bounds [-config FILE] [-epsilon EPS | -exact] [-write] [-group-by COLS] [TABLE]
                                     measure the data, propose contribution bounds and their bias
  dpproxy demo [-listen ADDR]        run on a throwaway PostgreSQL with sample data
                                     (DPPROXY_UPSTREAM=URL uses an existing database instead)
  dpproxy version                    the version, VCS revision and Go version of this build
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "check-config":
		err = checkConfig(os.Args[2:], os.Stdout)
	case "demo":
		err = runDemo(os.Args[2:])
	case "budget":
		err = budgetCmd(os.Args[2:], os.Stdout)
	case "bounds":
		err = boundsCmd(os.Args[2:], os.Stdout)
	case "version", "-version", "--version":
		err = versionCmd(os.Stdout)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "dpproxy: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dpproxy: %v\n", err)
		os.Exit(1)
	}
}

// logFlags adds the logging flags shared by serve and demo. The returned
// function builds the logger: a flag given on the command line overrides
// the configuration's log section.
func logFlags(fs *flag.FlagSet) func(cfg conf.Log) *slog.Logger {
	format := fs.String("log-format", "", "log format: text or json (default: log.format of the configuration, else text)")
	level := fs.String("log-level", "", "log level: debug, info, warn, error (default: log.level of the configuration, else info)")
	return func(cfg conf.Log) *slog.Logger {
		if *format != "" {
			cfg.Format = *format
		}
		if *level != "" {
			cfg.Level = *level
		}
		return newLogger(os.Stderr, cfg)
	}
}

// newLogger writes structured logs to w. Unknown levels fall back to info
// (conf.Load rejects them in files; a flag typo should not stop a proxy).
func newLogger(w io.Writer, cfg conf.Log) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(cfg.Level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	path := fs.String("config", "dpproxy.yaml", "configuration file")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the whole run to this file (for benchmarks)")
	logger := logFlags(fs)
	fs.Parse(args)
	cfg, err := conf.Load(*path)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	log := logger(cfg.Log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, cfg, log, nil)
}

// run serves cfg until ctx ends, then shuts down gracefully: running
// queries finish (up to 30 s), idle sessions are closed.
func run(ctx context.Context, cfg *conf.Config, log *slog.Logger, ready func(addr string)) error {
	srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: log})
	if err != nil {
		// pgx's text of a failed connection starts with its first
		// attempt's error (with sslmode=prefer, "tls error: server
		// refused TLS connection"): name the real cause instead.
		return proxy.ExplainConnectErrors(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	log.Info("dpproxy listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if cfg.Metrics.Listen != "" {
		stopMetrics, err := serveMetrics(cfg.Metrics.Listen, srv, log)
		if err != nil {
			srv.Shutdown(ctx)
			<-errc
			return err
		}
		defer stopMetrics()
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: letting running queries finish")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown timed out; connections closed", "err", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// serveMetrics serves the Prometheus endpoint /metrics on addr. The
// returned function stops it.
func serveMetrics(addr string, srv *proxy.Server, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", srv.MetricsHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("metrics listening", "addr", ln.Addr().String(), "path", "/metrics")
	go hs.Serve(ln)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	}, nil
}

func checkConfig(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("check-config", flag.ExitOnError)
	path := fs.String("config", "dpproxy.yaml", "configuration file")
	fs.Parse(args)
	cfg, fileErr := conf.LoadAll(*path)
	if cfg == nil {
		return fmt.Errorf("configuration is invalid:\n%w", fileErr)
	}
	if fileErr != nil {
		if cfg.Upstream == "" {
			return fmt.Errorf("configuration is invalid:\n%w", fileErr)
		}
		// Check the upstream too, so that every problem shows in one run.
		fmt.Fprintf(out, "%s: the file has %d problem(s), listed below; checking the upstream as far as the file allows\n", *path, countErrs(fileErr))
	} else {
		fmt.Fprintf(out, "%s: the file is valid: listen %s, auth %s, %d analysts, %d tables, mechanism %s, ε=%v per query (max %v), δ=%v\n",
			*path, cfg.Listen, cfg.Auth.Method, len(cfg.Auth.Users), len(cfg.Tables), cfg.Privacy.Mechanism, cfg.Privacy.Epsilon, cfg.Privacy.MaxEpsilonPerQuery, cfg.Privacy.Delta)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	report, err := proxy.CheckSchema(ctx, cfg)
	for _, line := range report {
		fmt.Fprintln(out, "  "+line)
	}
	switch {
	case fileErr != nil && err != nil:
		return fmt.Errorf("configuration is invalid:\n%w\ncheck-config found %d problem(s) with the upstream:\n%w", fileErr, countErrs(err), err)
	case fileErr != nil:
		return fmt.Errorf("configuration is invalid:\n%w", fileErr)
	case err != nil:
		return fmt.Errorf("check-config found %d problem(s) with the upstream:\n%w", countErrs(err), err)
	}
	fmt.Fprintln(out, "OK: the upstream matches the configuration")
	return nil
}

// countErrs counts the problems an errors.Join holds.
func countErrs(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:6432", "address the proxy listens on")
	logger := logFlags(fs)
	fs.Parse(args)
	// The tour is on standard output; the per-query log would interleave
	// with it, so the demo logs warnings only unless -log-level says more.
	log := logger(conf.Log{Format: "text", Level: "warn"})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopWithParent() // after NotifyContext: the signal must find the handler

	upstream := os.Getenv("DPPROXY_UPSTREAM")
	if upstream == "" {
		fmt.Println("Starting a throwaway PostgreSQL ...")
		pg, err := pgtest.Start(ctx, pgtest.Options{})
		if err != nil {
			return fmt.Errorf("demo: %w (install PostgreSQL server binaries, e.g. apt-get install postgresql, or set DPPROXY_UPSTREAM)", err)
		}
		defer func() {
			pg.Stop()
			fmt.Println("The throwaway PostgreSQL is stopped and its directory removed.")
		}()
		if upstream, err = pg.CreateDatabase(ctx, "shop"); err != nil {
			return err
		}
	}
	fmt.Println("Loading the sample shop (customers, orders, products) ...")
	setup, cleanup, err := demo.Install(ctx, upstream)
	if err != nil {
		return err
	}
	if setup.Shared != "" {
		fmt.Printf("One upstream role for queries and the ledger (for a demo only): %s.\n", setup.Shared)
	} else {
		fmt.Printf("Query role %s (SELECT on the three tables only) and ledger role %s (owns schema dpproxy) created.\n",
			setup.Roles.QueryRole, setup.Roles.LedgerRole)
	}
	defer func() {
		// ctx is cancelled by now (Ctrl-C): clean up on a fresh one.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cleanup(cctx); err != nil {
			fmt.Fprintf(os.Stderr, "dpproxy demo: cleaning up the database: %v\n", err)
			return
		}
		if os.Getenv("DPPROXY_UPSTREAM") != "" {
			fmt.Println("The demo tables and roles (and the ledger, if the demo created it) are dropped.")
		}
	}()
	cfg, err := conf.Parse("demo.yaml", demo.ConfigFor(setup.Upstream, setup.LedgerUpstream), os.Getenv)
	if err != nil {
		return err
	}
	cfg.Listen = *listen
	cfg.Databases = append(cfg.Databases, "shop") // the name the tour connects to, whatever DPPROXY_UPSTREAM's
	return run(ctx, cfg, log, func(addr string) {
		host, port, _ := net.SplitHostPort(addr)
		fmt.Printf("\ndpproxy demo is running. Connect with:\n\n  psql \"host=%s port=%s user=alice dbname=shop sslmode=disable\"\n\n", host, port)
		demo.Tour(ctx, os.Stdout, fmt.Sprintf("postgres://alice@%s/shop?sslmode=disable", net.JoinHostPort(host, port)))
		fmt.Println("\nPress Ctrl-C to stop; everything the demo created is removed.")
	})
}
