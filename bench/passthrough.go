package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// target is a system pgbench talks to.
type target struct {
	name string
	url  string
}

// ptCell is one (mode, clients, target) measurement over all rounds.
type ptCell struct {
	mode    string
	clients int
	target  string
	tps     []float64
	p50     []float64 // µs
	p99     []float64 // µs
}

type ptResult struct {
	cells    []*ptCell
	duration time.Duration
	rounds   int
	profile  *ptProfile
}

func (r *ptResult) cell(mode string, clients int, target string) *ptCell {
	for _, c := range r.cells {
		if c.mode == mode && c.clients == clients && c.target == target {
			return c
		}
	}
	return nil
}

func measurePassThrough(ctx context.Context, e *benchEnv, o options) (*ptResult, error) {
	res := &ptResult{duration: o.duration, rounds: o.rounds}
	targets := []target{{"direct", e.directURL()}, {"dpproxy", e.proxyURL}, {"pgbouncer", e.bouncerURL()}}
	for _, mode := range o.modes {
		for _, clients := range o.clients {
			for round := range o.rounds {
				// Rotate the order every round so no system always runs
				// first (or right after the most expensive one).
				for i := range targets {
					t := targets[(i+round)%len(targets)]
					if mode == "prepared" && t.name == "pgbouncer" {
						continue // pgbouncer 1.18 in transaction mode cannot keep named statements
					}
					c := res.cell(mode, clients, t.name)
					if c == nil {
						c = &ptCell{mode: mode, clients: clients, target: t.name}
						res.cells = append(res.cells, c)
					}
					tps, lat, err := pgbench(ctx, e, t.url, mode, clients, o.duration)
					if err != nil {
						return nil, fmt.Errorf("%s %s %d clients: %w", t.name, mode, clients, err)
					}
					c.tps = append(c.tps, tps)
					c.p50 = append(c.p50, percentile(lat, 0.50))
					c.p99 = append(c.p99, percentile(lat, 0.99))
				}
			}
		}
	}
	// Where the proxy's CPU goes, on the simple protocol at 8 clients
	// (CPU-bound on these machines), in a separate profiled process so the
	// measurement above runs unprofiled.
	var err error
	if res.profile, err = profileProxy(ctx, e, "simple", 8, 2*o.duration); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return res, nil
}

var tpsRE = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench runs the select-only script and returns its TPS and the latency
// of every transaction in µs (from its --log files).
func pgbench(ctx context.Context, e *benchEnv, url, mode string, clients int, d time.Duration) (float64, []float64, error) {
	logDir, err := os.MkdirTemp(e.dir, "pgbench-")
	if err != nil {
		return 0, nil, err
	}
	defer os.RemoveAll(logDir)
	prefix := filepath.Join(logDir, "tx")
	threads := min(clients, 2)
	cmd := exec.CommandContext(ctx, e.pgbench,
		"-n", "-S", "-M", mode, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads),
		"-T", strconv.Itoa(max(1, int(d.Seconds()))), "--log", "--log-prefix="+prefix, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, nil, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		return 0, nil, fmt.Errorf("pgbench: no tps in output:\n%s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	files, _ := filepath.Glob(prefix + ".*")
	var lat []float64
	for _, f := range files {
		l, err := readPgbenchLog(f)
		if err != nil {
			return 0, nil, err
		}
		lat = append(lat, l...)
	}
	if len(lat) == 0 {
		return 0, nil, fmt.Errorf("pgbench wrote no transaction log")
	}
	return tps, lat, nil
}

// readPgbenchLog reads the latencies (third field, µs) of a pgbench
// per-transaction log: "client_id transaction_no time script_no
// time_epoch time_us [schedule_lag]".
func readPgbenchLog(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parsePgbenchLog(bufio.NewScanner(f))
}

func parsePgbenchLog(sc *bufio.Scanner) ([]float64, error) {
	var lat []float64
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("pgbench log line %q: %w", sc.Text(), err)
		}
		lat = append(lat, v)
	}
	return lat, sc.Err()
}

// percentile of unsorted values (nearest rank); it sorts a copy.
func percentile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func median(v []float64) float64 { return percentile(v, 0.5) }
