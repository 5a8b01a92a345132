package conf

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
)

const good = `
listen: 127.0.0.1:7000
upstream: postgres://dp@127.0.0.1/shop
auth:
  method: scram-sha-256
  users:
    - {name: alice, password_env: PW_ALICE, budget: {epsilon: 10, delta: 1.0e-6}}
privacy:
  epsilon: 0.5
  delta: 1.0e-8
tables:
  Public.Orders:
    privacy_unit: Customer_ID
    columns:
      amount: {lower: -5, upper: 500}
      region: {public_values: [north, south]}
  products: {public: true}
`

func env(k string) string {
	if k == "PW_ALICE" {
		return "s3cret"
	}
	return ""
}

func TestParseGoodConfigWithDefaults(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.Listen != "127.0.0.1:7000" || c.Privacy.Mechanism != Laplace || c.Privacy.Ledger != "postgres" {
		t.Errorf("defaults: %+v", c.Privacy)
	}
	if c.Privacy.MaxEpsilonPerQuery != DefaultMaxEpsilonPerQuery {
		t.Errorf("max_epsilon_per_query = %v, want default %v", c.Privacy.MaxEpsilonPerQuery, DefaultMaxEpsilonPerQuery)
	}
	o := c.Table("public", "orders")
	if o == nil {
		t.Fatalf("tables: %v; want public.orders (names fold to lower case)", c.Tables)
	}
	if o.PrivacyUnit != "customer_id" || o.MaxGroupsPerUnit != DefaultMaxGroupsPerUnit || o.MaxRowsPerUnit != DefaultMaxRowsPerUnit {
		t.Errorf("orders = %+v", o)
	}
	if a := o.Columns["amount"]; !a.HasBounds() || *a.Lower != -5 || *a.Upper != 500 {
		t.Errorf("amount = %+v", a)
	}
	if p := c.Table("public", "products"); p == nil || !p.Public {
		t.Errorf("products: %+v", p)
	}
	if u := c.UserByName("alice"); u == nil || u.Password.Reveal() != "s3cret" {
		t.Errorf("alice's password not read from PW_ALICE")
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	s := Secret("hunter2")
	if strings.Contains(s.String(), "hunter2") || strings.Contains(s.LogValue().String(), "hunter2") {
		t.Errorf("a Secret prints its value")
	}
}

// TestParseReportsEveryProblem checks that each bad input is refused with
// file, key and reason, and that several problems come back at once.
func TestParseReportsEveryProblem(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           []string
	}{
		{"unknown key", "listen: 127.0.0.1:7000", "listen: 127.0.0.1:7000\nlisten_port: 5", []string{"good.yaml", "listen_port"}},
		{"unknown table key", "privacy_unit: Customer_ID", "privacy_unit: Customer_ID\n    max_rows: 3", []string{"max_rows"}},
		{"no privacy unit", "privacy_unit: Customer_ID", "max_rows_per_unit: 3", []string{"tables.Public.Orders.privacy_unit", "missing"}},
		{"privacy unit not a name", "privacy_unit: Customer_ID", "privacy_unit: \"a b\"", []string{"privacy_unit", "not a column name"}},
		{"one bound", "amount: {lower: -5, upper: 500}", "amount: {lower: -5}", []string{"columns.amount", "both lower and upper"}},
		{"lower above upper", "amount: {lower: -5, upper: 500}", "amount: {lower: 9, upper: 5}", []string{"columns.amount", "greater than upper"}},
		{"epsilon zero", "epsilon: 0.5", "epsilon: -1", []string{"privacy.epsilon", "finite number > 0"}},
		{"epsilon nan", "epsilon: 0.5", "epsilon: .nan", []string{"privacy.epsilon"}},
		{"epsilon inf", "epsilon: 0.5", "epsilon: .inf", []string{"privacy.epsilon"}},
		{"delta one", "delta: 1.0e-8", "delta: 1", []string{"privacy.delta", "(0, 1)"}},
		{"budget delta", "delta: 1.0e-6}", "delta: 2}", []string{"auth.users[0].budget.delta"}},
		{"budget epsilon", "epsilon: 10,", "epsilon: 0,", []string{"auth.users[0].budget.epsilon"}},
		{"mechanism", "delta: 1.0e-8", "delta: 1.0e-8\n  mechanism: uniform", []string{"privacy.mechanism", "uniform"}},
		{"auth method", "method: scram-sha-256", "method: password", []string{"auth.method"}},
		{"password unset", "PW_ALICE", "PW_NOBODY", []string{"password_env", "PW_NOBODY"}},
		{"epsilon above max", "epsilon: 0.5", "epsilon: 3\n  max_epsilon_per_query: 2", []string{"exceeds privacy.max_epsilon_per_query"}},
		{"file ledger", "delta: 1.0e-8", "delta: 1.0e-8\n  ledger: file:/tmp/x", []string{"privacy.ledger"}},
		{"accounting", "delta: 1.0e-8", "delta: 1.0e-8\n  accounting: pld", []string{"privacy.accounting", "pld"}},
		{"rdp delta share one", "delta: 1.0e-8", "delta: 1.0e-8\n  rdp_delta_share: 1", []string{"privacy.rdp_delta_share", "(0, 1)"}},
		{"rdp delta share negative", "delta: 1.0e-8", "delta: 1.0e-8\n  rdp_delta_share: -0.5", []string{"privacy.rdp_delta_share"}},
		{"advanced delta one", "delta: 1.0e-8", "delta: 1.0e-8\n  accounting: advanced\n  advanced_delta: 1", []string{"privacy.advanced_delta", "(0, 1)"}},
		{"advanced delta negative", "delta: 1.0e-8", "delta: 1.0e-8\n  advanced_delta: -1.0e-7", []string{"privacy.advanced_delta"}},
		{"advanced delta nan", "delta: 1.0e-8", "delta: 1.0e-8\n  advanced_delta: .nan", []string{"privacy.advanced_delta"}},
		{"public with unit", "products: {public: true}", "products: {public: true, privacy_unit: id}", []string{"tables.products", "public table"}},
		{"bad table name", "products: {public: true}", "a.b.c: {public: true}", []string{"tables.a.b.c"}},
		{"no upstream", "upstream: postgres://dp@127.0.0.1/shop", "", []string{"upstream", "missing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(good, c.from) {
				t.Fatalf("test setup: %q not in the good config", c.from)
			}
			_, err := Parse("good.yaml", []byte(strings.Replace(good, c.from, c.to, 1)), env)
			if err == nil {
				t.Fatalf("Parse accepted the config with %s", c.name)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// Two problems at once are both reported.
	bad := strings.Replace(strings.Replace(good, "epsilon: 0.5", "epsilon: -1", 1), "method: scram-sha-256", "method: nope", 1)
	_, err := Parse("good.yaml", []byte(bad), env)
	if err == nil || !strings.Contains(err.Error(), "privacy.epsilon") || !strings.Contains(err.Error(), "auth.method") {
		t.Errorf("want both problems reported, got %v", err)
	}
}

func TestValidEpsilonDelta(t *testing.T) {
	for _, e := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if ValidEpsilon(e) {
			t.Errorf("ValidEpsilon(%v) = true", e)
		}
	}
	for _, d := range []float64{-1e-9, 1, 2, math.NaN(), math.Inf(1)} {
		if ValidDelta(d) {
			t.Errorf("ValidDelta(%v) = true", d)
		}
	}
	if !ValidEpsilon(0.1) || !ValidDelta(0) || !ValidDelta(1e-9) {
		t.Errorf("valid values refused")
	}
}

// TestLedgerUpstream: ledger_upstream is the ledger role's DSN; absent, it
// is upstream (the demo's one-role set-up, which SharedLedger reports).
func TestLedgerUpstream(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.LedgerUpstream != c.Upstream || !c.SharedLedger() {
		t.Errorf("without ledger_upstream: LedgerUpstream = %q, SharedLedger() = %v; want upstream's DSN and true", c.LedgerUpstream.Reveal(), c.SharedLedger())
	}

	const ledger = "postgres://dp_ledger:l3dger-pw@127.0.0.1/shop"
	two := strings.Replace(good, "upstream: postgres://dp@127.0.0.1/shop", "upstream: postgres://dp@127.0.0.1/shop\nledger_upstream: "+ledger, 1)
	c, err = Parse("two.yaml", []byte(two), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.LedgerUpstream.Reveal() != ledger || c.Upstream.Reveal() != "postgres://dp@127.0.0.1/shop" || c.SharedLedger() {
		t.Errorf("with ledger_upstream: LedgerUpstream = %q, Upstream = %q, SharedLedger() = %v", c.LedgerUpstream.Reveal(), c.Upstream.Reveal(), c.SharedLedger())
	}

	// The same DSN written twice is one role: shared.
	same := strings.Replace(good, "upstream: postgres://dp@127.0.0.1/shop", "upstream: postgres://dp@127.0.0.1/shop\nledger_upstream: postgres://dp@127.0.0.1/shop", 1)
	if c, err := Parse("same.yaml", []byte(same), env); err != nil || !c.SharedLedger() {
		t.Errorf("ledger_upstream equal to upstream: SharedLedger() = %v, %v; want true", c != nil && c.SharedLedger(), err)
	}

	// Keys near the new one are still unknown keys.
	for _, bad := range []string{
		good + "ledger_upstrem: " + ledger + "\n",
		strings.Replace(good, "  delta: 1.0e-8", "  delta: 1.0e-8\n  ledger_upstream: "+ledger, 1),
	} {
		_, err := Parse("bad.yaml", []byte(bad), env)
		if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "ledger_upst") {
			t.Errorf("Parse(%q) = %v, want an unknown-key error", bad, err)
		}
	}

	// The ledger DSN's password never reaches a log or a %+v.
	c, err = Parse("two.yaml", []byte(two), env)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "ledger_upstream", c.LedgerUpstream, "config", c)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "ledger_upstream", c.LedgerUpstream)
	buf.WriteString(fmt.Sprintf("%v %+v %s", c.LedgerUpstream, *c, c.LedgerUpstream))
	if strings.Contains(buf.String(), "l3dger-pw") {
		t.Errorf("the ledger password was printed:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "REDACTED") {
		t.Errorf("no REDACTED in:\n%s", buf.String())
	}
}

// TestPrivacyClock: private queries are answered on a fixed clock
// (privacy.response_quantum) and cut off at privacy.max_query_time.
func TestPrivacyClock(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.Privacy.ResponseQuantum != DefaultResponseQuantum || c.Privacy.MaxQueryTime != DefaultMaxQueryTime {
		t.Errorf("defaults: response_quantum %v, max_query_time %v; want %v, %v",
			c.Privacy.ResponseQuantum, c.Privacy.MaxQueryTime, DefaultResponseQuantum, DefaultMaxQueryTime)
	}
	set := strings.Replace(good, "delta: 1.0e-8", "delta: 1.0e-8\n  response_quantum: 250ms\n  max_query_time: 10s", 1)
	if c, err = Parse("good.yaml", []byte(set), env); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.Privacy.ResponseQuantum.Milliseconds() != 250 || c.Privacy.MaxQueryTime.Seconds() != 10 {
		t.Errorf("set: response_quantum %v, max_query_time %v; want 250ms, 10s", c.Privacy.ResponseQuantum, c.Privacy.MaxQueryTime)
	}
	for _, bad := range []struct{ set, want string }{
		{"response_quantum: -1s", "privacy.response_quantum"},
		{"response_quantum: 500us", "privacy.response_quantum"},
		{"response_quantum: 2m", "privacy.response_quantum"},
		{"max_query_time: -1s", "privacy.max_query_time"},
		{"response_quantum: 1s\n  max_query_time: 500ms", "privacy.max_query_time"},
		{"max_query_time: 50ms", "privacy.max_query_time"},
	} {
		_, err := Parse("good.yaml", []byte(strings.Replace(good, "delta: 1.0e-8", "delta: 1.0e-8\n  "+bad.set, 1)), env)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Parse with %q = %v, want an error naming %s", bad.set, err, bad.want)
		}
	}
}

// TestAdvancedAccounting: advanced is an accepted accounting, and
// privacy.advanced_delta defaults to DefaultAdvancedDelta.
func TestAdvancedAccounting(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Privacy.Accounting != AccountingRDP || c.Privacy.AdvancedDelta != DefaultAdvancedDelta || c.Privacy.RDPDeltaShare != DefaultRDPDeltaShare {
		t.Errorf("defaults: accounting %q, advanced_delta %v", c.Privacy.Accounting, c.Privacy.AdvancedDelta)
	}
	c, err = Parse("good.yaml", []byte(strings.Replace(good, "delta: 1.0e-8", "delta: 1.0e-8\n  accounting: advanced\n  advanced_delta: 1.0e-6", 1)), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Privacy.Accounting != AccountingAdvanced || c.Privacy.AdvancedDelta != 1e-6 {
		t.Errorf("accounting %q, advanced_delta %v", c.Privacy.Accounting, c.Privacy.AdvancedDelta)
	}
}
