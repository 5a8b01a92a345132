package main

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersion: "dpproxy version" prints the module version (a tag when
// installed with go install ...@vX.Y.Z), the VCS revision when the build
// recorded one, and the Go version.
func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/dpproxy/dpproxy", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3a1a505c0ffee"}, {Key: "vcs.time", Value: "2026-11-24T06:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	want := "dpproxy v1.4.0 (revision 3a1a505c0ffee of 2026-11-24T06:00:00Z, modified) go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH
	if got := versionLine(bi, true); got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	bi.Main.Version, bi.Settings = "(devel)", nil
	if got := versionLine(bi, true); !strings.HasPrefix(got, "dpproxy (devel) go1.26.8") {
		t.Errorf("without VCS information: %q", got)
	}
	var out bytes.Buffer
	if err := versionCmd(&out); err != nil || !strings.HasPrefix(out.String(), "dpproxy ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("versionCmd = %q, %v", out.String(), err)
	}
}

// TestReadmeSaysHowToInstall: the README's "Installing" section gives the
// go install line of this module's path (go.mod), go build and dpproxy
// version, and the set-up keeps its two commands.
func TestReadmeSaysHowToInstall(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(gomod), "\n", 2)[0], "module "))
	text := string(readme)
	_, install, ok := strings.Cut(text, "\n## Installing\n")
	if !ok {
		t.Fatal("README has no Installing section")
	}
	install, _, _ = strings.Cut(install, "\n## ")
	for _, want := range []string{"go install " + module + "/cmd/dpproxy@latest", "go build -o dpproxy ./cmd/dpproxy", "dpproxy version"} {
		if !strings.Contains(install, want) {
			t.Errorf("README's Installing section lacks %q", want)
		}
	}
	_, setup, _ := strings.Cut(text, "\n## Set-up: two commands\n")
	setup, _, _ = strings.Cut(setup, "\n## ")
	_, block, _ := strings.Cut(setup, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if n := strings.Count(strings.TrimSpace(block), "\n") + 1; n != 2 {
		t.Errorf("the set-up has %d commands, want 2:\n%s", n, block)
	}
}
