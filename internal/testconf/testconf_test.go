package testconf

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

// TestEntriesParse: every entry of dpproxy.yaml resolves, and every
// whole configuration parses once its placeholders are filled in.
func TestEntriesParse(t *testing.T) {
	fill := strings.NewReplacer("upstream: UPSTREAM", "upstream: postgres://u@127.0.0.1:1/db", "listen: LISTEN", "listen: 127.0.0.1:0", "epsilon: BUDGET", "epsilon: 1")
	env := func(string) string { return "pw" }
	for _, name := range []string{Shop, Rewrite, E2ETables, E2EProxy, E2E, Bench, ProxyBench,
		Attack, WireFuzz, Proc, Clients, Operator, Resources, Semantic, Timing, TLS,
		Audit, AuditPrecision, Visits, PubKeys, AutoBounds, NoiseHook} {
		c, err := get(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == Shop || name == E2ETables || name == E2EProxy {
			continue // fragments, for other configurations
		}
		if _, err := conf.Parse(name+".yaml", []byte(fill.Replace(c.String())), env); err != nil {
			t.Errorf("%s: %v\n%s", name, err, c)
		}
	}
}

// TestExtends: an entry is its bases with its own keys merged in:
// mappings key by key, anything else replaced, ~ removing a key.
func TestExtends(t *testing.T) {
	cfg, err := Get(Rewrite).Parse(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	orders := cfg.Tables["public.orders"]
	if orders == nil || orders.PrivacyUnit != "customer_id" || orders.MaxGroupsPerUnit != 4 {
		t.Fatalf("rewrite's orders = %+v, want shop's", orders)
	}
	for _, col := range []string{"amount", "region", "discount", "channel"} {
		if _, ok := orders.Columns[col]; !ok {
			t.Errorf("rewrite's orders has no column %s (shop's and its own)", col)
		}
	}
	if cfg.Tables["public.products"] == nil || cfg.Tables["sales.visits"] == nil || cfg.Tables["public.customers"] != nil {
		t.Errorf("rewrite's tables = %v, want shop's and sales.visits", cfg.Tables)
	}

	pb, err := Get(ProxyBench).Parse(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if ev := pb.Tables["public.events"]; ev == nil || ev.MaxRowsPerUnit != 10 || ev.MaxGroupsPerUnit != 4 {
		t.Errorf("proxy_bench's events = %+v, want bench's with 10 rows per unit", ev)
	}
	if strings.Contains(YAML(ProxyBench), "limits") || len(pb.Auth.Users) != 1 || pb.Auth.Users[0].Budget.Epsilon != 1000 {
		t.Errorf("proxy_bench keeps bench's limits or users:\n%s", YAML(ProxyBench))
	}
	if !strings.HasPrefix(YAML(E2ETables), "tables:\n  public.orders:\n") {
		t.Errorf("e2e_tables is not a tables section tests can append to:\n%s", YAML(E2ETables))
	}
}

// TestSetCopy: a test changes its copy, never the shared entries.
func TestSetCopy(t *testing.T) {
	c := Get(Bench).SetString("127.0.0.1:5", "listen").SetString("postgres://x@h/db?a=b: c", "upstream").
		Copy([]string{"tables", "public.events"}, []string{"tables", "public.events_10"}).
		Set("{lower: 1, upper: 2}", "tables", "public.events_10", "columns", "val")
	cfg, err := c.Parse(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:5" || cfg.Upstream.Reveal() != "postgres://x@h/db?a=b: c" {
		t.Errorf("listen %q, upstream %q", cfg.Listen, cfg.Upstream.Reveal())
	}
	ev, ev10 := cfg.Tables["public.events"], cfg.Tables["public.events_10"]
	if ev10 == nil || ev10.PrivacyUnit != "unit_id" || ev10.Columns["val"].Upper == nil || *ev10.Columns["val"].Upper != 2 || *ev.Columns["val"].Upper != 100 {
		t.Errorf("events = %+v, events_10 = %+v", ev, ev10)
	}
	if strings.Contains(YAML(Bench), "events_10") || !strings.Contains(YAML(Bench), "listen: LISTEN") {
		t.Errorf("Set changed the shared entry:\n%s", YAML(Bench))
	}
}

// TestMergeIndex: Merge adds a test's lines to a section, creating it,
// and a path may go through a list by index.
func TestMergeIndex(t *testing.T) {
	c := Get(ProxyBench).Merge("  statement_timeout: 200ms\n  max_connections: 2\n", "limits").
		Merge("", "privacy").Merge("max_epsilon_per_query: 3", "privacy").
		SetString("eve", "auth", "users", "0", "name").Set("7", "auth", "users", "0", "budget", "epsilon")
	cfg, err := c.Parse(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits.MaxConnections != 2 || cfg.Limits.StatementTimeout.String() != "200ms" {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if cfg.Privacy.MaxEpsilonPerQuery != 3 || cfg.Privacy.Epsilon != 1 {
		t.Errorf("privacy = %+v, want bench's with 3 per query", cfg.Privacy)
	}
	if u := cfg.Auth.Users; len(u) != 1 || u[0].Name != "eve" || u[0].Budget.Epsilon != 7 {
		t.Errorf("users = %+v", u)
	}
	if strings.Contains(YAML(ProxyBench), "name: eve") {
		t.Errorf("Merge or Set changed the shared entry:\n%s", YAML(ProxyBench))
	}
}
