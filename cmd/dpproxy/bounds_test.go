package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBoundsArguments: bad arguments are refused before anything is
// charged or read (no database is reachable here).
func TestBoundsArguments(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dpproxy.yaml")
	os.WriteFile(cfg, []byte(`upstream: postgres://nobody@127.0.0.1:1/none
auth: {method: trust, users: [{name: a, budget: {epsilon: 1, delta: 0}}]}
tables:
  orders: {privacy_unit: customer_id}
  products: {public: true}
`), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-config", cfg, "-exact", "-epsilon", "2"}, "-exact spends no ε"},
		{[]string{"-config", cfg, "a", "b"}, "at most one TABLE"},
		{[]string{"-config", cfg, "-nope"}, "flag provided but not defined"},
		{[]string{"-config", cfg, "products"}, "products is not a private table"},
		{[]string{"-config", cfg, "-epsilon", "-1"}, "-epsilon must be a finite number > 0"},
		{[]string{"-config", cfg, "-group-share", "2"}, "-group-share must lie in (0, 1]"},
		{[]string{"-config", filepath.Join(dir, "missing.yaml")}, "configuration is invalid"},
	} {
		var out bytes.Buffer
		err := boundsCmd(c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v printed %q before refusing", c.args, out.String())
		}
	}
}
