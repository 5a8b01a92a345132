package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ptProfile is where a pass-through proxy's CPU goes: a Go CPU profile of
// a separate dpproxy process (serve -cpuprofile) under the same pgbench
// load, grouped by what the code does.
type ptProfile struct {
	mode      string
	clients   int
	tps       float64
	queries   float64
	total     time.Duration // CPU time sampled
	wall      time.Duration // the profile's duration
	buckets   []profBucket
	top       []profLine
	cpuPerQry float64 // µs of proxy CPU per query
}

type profBucket struct {
	name string
	flat time.Duration
}

type profLine struct {
	name string
	flat time.Duration
}

// profileProxy runs pgbench against a second proxy started with
// -cpuprofile, then reads the profile with `go tool pprof -top`.
func profileProxy(ctx context.Context, e *benchEnv, mode string, clients int, d time.Duration) (*ptProfile, error) {
	prof := filepath.Join(e.dir, "passthrough.cpu.prof")
	cmd, url, err := e.runProxy(ctx, "dpproxy-profiled", "-cpuprofile", prof)
	if err != nil {
		return nil, err
	}
	tps, _, err := pgbench(ctx, e, url, mode, clients, d)
	cmd.Process.Signal(syscall.SIGINT)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("profiled proxy: %w", werr)
	}
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=1000000", e.proxyBin, prof).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof: %w", err)
	}
	p, err := parsePprofTop(string(out))
	if err != nil {
		return nil, err
	}
	p.mode, p.clients, p.tps = mode, clients, tps
	p.queries = tps * float64(max(1, int(d.Seconds())))
	if p.queries > 0 {
		p.cpuPerQry = float64(p.total.Microseconds()) / p.queries
	}
	return p, nil
}

var (
	pprofTotalRE = regexp.MustCompile(`Duration: ([0-9.]+[a-zµ]+), Total samples = ([0-9.]+[a-zµ]+)`)
	pprofLineRE  = regexp.MustCompile(`^\s*([0-9.]+[a-zµ]+)\s+[0-9.]+%\s+[0-9.]+%\s+[0-9.]+[a-zµ]+\s+[0-9.]+%\s+(.+)$`)
)

// parsePprofTop reads `go tool pprof -top` text: the total sampled and each
// function's flat time, summed into buckets (profBucketOf).
func parsePprofTop(out string) (*ptProfile, error) {
	m := pprofTotalRE.FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("pprof: no total in output:\n%s", out)
	}
	p := &ptProfile{}
	var err error
	if p.wall, err = time.ParseDuration(m[1]); err != nil {
		return nil, err
	}
	if p.total, err = time.ParseDuration(m[2]); err != nil {
		return nil, err
	}
	sums := map[string]time.Duration{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := pprofLineRE.FindStringSubmatch(sc.Text())
		if l == nil {
			continue
		}
		flat, err := time.ParseDuration(l[1])
		if err != nil {
			return nil, fmt.Errorf("pprof line %q: %w", sc.Text(), err)
		}
		name := strings.TrimSpace(strings.TrimSuffix(l[2], " (inline)"))
		sums[profBucketOf(name)] += flat
		p.top = append(p.top, profLine{name, flat})
	}
	for _, b := range profBuckets {
		p.buckets = append(p.buckets, profBucket{b, sums[b]})
	}
	slices.SortStableFunc(p.top, func(a, b profLine) int { return int(b.flat - a.flat) })
	p.top = p.top[:min(len(p.top), 12)]
	return p, nil
}

// The buckets, in report order.
var profBuckets = []string{
	"kernel: socket reads, writes and epoll (system calls)",
	"Go runtime: scheduler, netpoll, timers, locks",
	"Go runtime: allocation, copying, garbage collection",
	"pgx/pgproto3: wire messages decoded and encoded",
	"dpproxy: analysis cache, session, metrics",
	"logging, Prometheus and the rest",
}

func profBucketOf(fn string) string {
	switch {
	case strings.HasPrefix(fn, "internal/runtime/syscall"), strings.HasPrefix(fn, "syscall."), strings.HasPrefix(fn, "runtime/internal/syscall"):
		return profBuckets[0]
	case strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/") || strings.HasPrefix(fn, "net."):
		if strings.HasPrefix(fn, "internal/runtime/gc") || gcFuncRE.MatchString(fn) {
			return profBuckets[2]
		}
		return profBuckets[1]
	case strings.HasPrefix(fn, "github.com/jackc/"):
		return profBuckets[3]
	case strings.HasPrefix(fn, "github.com/dpproxy/"):
		return profBuckets[4]
	}
	return profBuckets[5]
}

var gcFuncRE = regexp.MustCompile(`^runtime\.(.*malloc|.*[gG][cC]|scan|.*[sS]weep|.*[mM]ark|.*[hH]eap|.*[sS]pan|memclr|memmove|greyobject|findObject|wbBuf|bulkBarrier|newobject|makeslice|growslice|nextFree|typePointers)`)
