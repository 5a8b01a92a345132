package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestTestScriptPhasesDocumented: the default ./scripts/test.sh run skips
// the fuzz phase (so that it stays within 10 minutes on two busy cores),
// CI turns it on, and the README says so.
func TestTestScriptPhasesDocumented(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	script, ci, readme := read("../scripts/test.sh"), read("../.ci/run"), read("../README.md")
	m := regexp.MustCompile(`fuzztime="\$\{DPPROXY_FUZZTIME:-([^}]*)\}"`).FindStringSubmatch(script)
	if m == nil || m[1] != "0" {
		t.Errorf("scripts/test.sh: the fuzz phase must be off by default (DPPROXY_FUZZTIME:-0), got %q", m)
	}
	if !regexp.MustCompile(`export DPPROXY_FUZZTIME="\$\{DPPROXY_FUZZTIME:-10s\}"`).MatchString(ci) {
		t.Error(".ci/run does not turn the fuzz phase on (DPPROXY_FUZZTIME=10s)")
	}
	for _, want := range []string{"`scripts/test.sh`", "`go vet`", "`-race`", "at most 10", "DPPROXY_FUZZTIME=10s", "`.ci/run`"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README does not say %q about the test script", want)
		}
	}
}
