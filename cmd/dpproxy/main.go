// Command dpproxy is a PostgreSQL-compatible proxy that answers SQL over
// private tables with differentially private results.
//
//	dpproxy serve -config dpproxy.yaml     run the proxy
//	dpproxy check-config -config FILE      validate a configuration against its upstream
//	dpproxy demo                           run on a throwaway database with sample data
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
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
  dpproxy demo [-listen ADDR]        run on a throwaway PostgreSQL with sample data
                                     (DPPROXY_UPSTREAM=URL uses an existing database instead)
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

// logFlags adds the logging flags shared by serve and demo.
func logFlags(fs *flag.FlagSet) func() *slog.Logger {
	format := fs.String("log-format", "text", "log format: text or json")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	return func() *slog.Logger {
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(*level)); err != nil {
			lv = slog.LevelInfo
		}
		opts := &slog.HandlerOptions{Level: lv}
		if *format == "json" {
			return slog.New(slog.NewJSONHandler(os.Stderr, opts))
		}
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	path := fs.String("config", "dpproxy.yaml", "configuration file")
	logger := logFlags(fs)
	fs.Parse(args)
	cfg, err := conf.Load(*path)
	if err != nil {
		return err
	}
	log := logger()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, cfg, log, nil)
}

// run serves cfg until ctx ends, then shuts down gracefully: running
// queries finish (up to 30 s), idle sessions are closed.
func run(ctx context.Context, cfg *conf.Config, log *slog.Logger, ready func(addr string)) error {
	srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: log})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	log.Info("dpproxy listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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

func checkConfig(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("check-config", flag.ExitOnError)
	path := fs.String("config", "dpproxy.yaml", "configuration file")
	fs.Parse(args)
	cfg, err := conf.Load(*path)
	if err != nil {
		return fmt.Errorf("configuration is invalid:\n%w", err)
	}
	fmt.Fprintf(out, "%s: configuration is valid: listen %s, auth %s, %d analysts, mechanism %s, ε=%v per query (max %v), δ=%v\n",
		*path, cfg.Listen, cfg.Auth.Method, len(cfg.Auth.Users), cfg.Privacy.Mechanism, cfg.Privacy.Epsilon, cfg.Privacy.MaxEpsilonPerQuery, cfg.Privacy.Delta)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	report, err := proxy.CheckSchema(ctx, cfg)
	for _, line := range report {
		fmt.Fprintln(out, "  "+line)
	}
	if err != nil {
		return fmt.Errorf("upstream schema does not match the configuration:\n%w", err)
	}
	fmt.Fprintln(out, "upstream schema matches the configuration")
	return nil
}

func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:6432", "address the proxy listens on")
	logger := logFlags(fs)
	fs.Parse(args)
	log := logger()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	upstream := os.Getenv("DPPROXY_UPSTREAM")
	if upstream == "" {
		fmt.Println("Starting a throwaway PostgreSQL ...")
		pg, err := pgtest.Start(ctx, pgtest.Options{})
		if err != nil {
			return fmt.Errorf("demo: %w (install PostgreSQL server binaries, e.g. apt-get install postgresql, or set DPPROXY_UPSTREAM)", err)
		}
		defer pg.Stop()
		if upstream, err = pg.CreateDatabase(ctx, "shop"); err != nil {
			return err
		}
	}
	fmt.Println("Loading the sample shop (customers, orders, products) ...")
	if err := demo.Load(ctx, upstream); err != nil {
		return err
	}
	cfg, err := conf.Parse("demo.yaml", demo.ConfigFor(upstream), os.Getenv)
	if err != nil {
		return err
	}
	cfg.Listen = *listen
	return run(ctx, cfg, log, func(addr string) {
		host, port, _ := net.SplitHostPort(addr)
		fmt.Printf("\ndpproxy demo is running. Connect with:\n\n  psql \"host=%s port=%s user=alice dbname=shop sslmode=disable\"\n\n", host, port)
		fmt.Println("Private tables: orders and customers (one person = one customer_id); public: products.")
		fmt.Println("Try:")
		for _, q := range demo.Queries {
			fmt.Printf("  %s\n      -- %s\n", q.SQL, q.Note)
		}
		fmt.Println("\nPress Ctrl-C to stop; the throwaway database is removed.")
	})
}
