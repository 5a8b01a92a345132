package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// benchLine is one line of `go test -bench` output.
type benchLine struct {
	name     string
	nsOp     float64
	p50, p99 float64 // ns
	bytesOp  float64
	allocs   float64
}

// measureCPU runs the proxy package's pipeline benchmarks.
func measureCPU(ctx context.Context) ([]benchLine, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "./proxy", "-run", "^$", "-bench", "Pipeline|PassThroughAnalyze", "-benchmem", "-benchtime", "3000x", "-count", "1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench: %v\n%s", err, out)
	}
	lines := parseBench(out)
	if len(lines) == 0 {
		return nil, fmt.Errorf("no benchmark results in:\n%s", out)
	}
	// The noise library's share: one noised value, one threshold.
	cmd = exec.CommandContext(ctx, "go", "test", "./noise", "-run", "^$", "-bench", "Add|Threshold", "-benchmem", "-benchtime", "20000x", "-count", "1")
	out, err = cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench ./noise: %v\n%s", err, out)
	}
	noise := parseBench(out)
	if len(noise) == 0 {
		return nil, fmt.Errorf("no noise benchmark results in:\n%s", out)
	}
	for _, l := range noise {
		l.name = "noise/" + l.name
		lines = append(lines, l)
	}
	return lines, nil
}

// cpuGoal is the p99 goal of a proxy benchmark in µs, or 0 for none.
func cpuGoal(name string) float64 {
	switch {
	case strings.HasPrefix(name, "noise/"):
		return 0
	case strings.Contains(name, "uncached"):
		return 200
	}
	return 50
}

// parseBench reads "BenchmarkX-2  N  V unit  V unit ..." lines.
func parseBench(out []byte) []benchLine {
	var res []benchLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		b := benchLine{name: name, p50: math.NaN(), p99: math.NaN()}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				b.nsOp = v
			case "p50-ns":
				b.p50 = v
			case "p99-ns":
				b.p99 = v
			case "B/op":
				b.bytesOp = v
			case "allocs/op":
				b.allocs = v
			}
		}
		res = append(res, b)
	}
	return res
}

// accRow mirrors proxy's accuracyRow (bench_test.go).
type accRow struct {
	Agg       string  `json:"agg"`
	Mechanism string  `json:"mechanism"`
	Epsilon   float64 `json:"epsilon"`
	Runs      int     `json:"runs"`
	RMSE      float64 `json:"rmse"`
	Theory    float64 `json:"theory"`
	Ratio     float64 `json:"ratio"`
	Truth     float64 `json:"truth"`
}

// measureAccuracy runs the proxy's release path (in its package test, where
// the unexported release code is reachable) over the whole grid.
func measureAccuracy(ctx context.Context, o options) ([]accRow, error) {
	dir, err := os.MkdirTemp("", "dpproxy-accuracy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path, _ := filepath.Abs(filepath.Join(dir, "accuracy.json"))
	cmd := exec.CommandContext(ctx, "go", "test", "./proxy", "-run", "^TestReleaseAccuracyMatchesBounds$", "-count", "1")
	cmd.Env = append(os.Environ(), "DPPROXY_BENCH_ACCURACY="+path, fmt.Sprintf("DPPROXY_BENCH_ACCURACY_RUNS=%d", o.accRuns))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test: %v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []accRow
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, err
	}
	return rows, nil
}
