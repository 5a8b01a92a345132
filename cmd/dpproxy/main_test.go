package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

func TestLogFlagsOverrideTheConfiguration(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		cfg       conf.Log
		json      bool
		debugOn   bool
		infoOn    bool
		nameInMsg string
	}{
		{nil, conf.Log{Format: "text", Level: "info"}, false, false, true, "text from the file"},
		{nil, conf.Log{Format: "json", Level: "warn"}, true, false, false, "json/warn from the file"},
		{[]string{"-log-format", "json"}, conf.Log{Format: "text", Level: "info"}, true, false, true, "flag format wins"},
		{[]string{"-log-level", "debug"}, conf.Log{Format: "json", Level: "warn"}, true, true, true, "flag level wins"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		build := logFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg := tc.cfg
		if got := build(cfg).Enabled(context.Background(), slog.LevelDebug); got != tc.debugOn {
			t.Errorf("%s: debug enabled = %v, want %v", tc.nameInMsg, got, tc.debugOn)
		}
		if got := build(cfg).Enabled(context.Background(), slog.LevelInfo); got != tc.infoOn {
			t.Errorf("%s: info enabled = %v, want %v", tc.nameInMsg, got, tc.infoOn)
		}
		// The format: write one line with the same settings to a buffer.
		if f := fs.Lookup("log-format").Value.String(); f != "" {
			cfg.Format = f
		}
		var buf bytes.Buffer
		newLogger(&buf, cfg).Error("x")
		if isJSON := json.Valid(bytes.TrimSpace(buf.Bytes())); isJSON != tc.json {
			t.Errorf("%s: JSON output = %v, want %v (%q)", tc.nameInMsg, isJSON, tc.json, buf.String())
		}
	}
}

func TestLogAndMetricsKeysAreValidated(t *testing.T) {
	base := `
upstream: postgres://x@127.0.0.1/db
auth: {method: trust, users: [{name: a, budget: {epsilon: 1, delta: 0}}]}
tables: {t: {public: true}}
`
	cfg, err := conf.Parse("ok.yaml", []byte(base), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Format != "text" || cfg.Log.Level != "info" || cfg.Metrics.Listen != "" {
		t.Errorf("defaults: log %+v, metrics %+v", cfg.Log, cfg.Metrics)
	}
	_, err = conf.Parse("bad.yaml", []byte(base+"log: {format: xml, level: loud}\nmetrics: {listen: nope}\n"), func(string) string { return "" })
	for _, want := range []string{"bad.yaml:5: log.format", "bad.yaml:5: log.level", "bad.yaml:6: metrics.listen"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse error %v lacks %q", err, want)
		}
	}
}
