package conf

import (
	"strings"
	"testing"
)

// TestUnknownKeyNamesPathLineAndSuggestion: a mistyped key is reported
// with its key path, its line and the nearest known key, not as yaml's
// "field upsteam not found in type conf.Config".
func TestUnknownKeyNamesPathLineAndSuggestion(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"top level", "upstream: postgres://dp@127.0.0.1/shop", "upsteam: postgres://dp@127.0.0.1/shop",
			"good.yaml:3: upsteam: unknown key (did you mean upstream?)"},
		{"privacy", "  epsilon: 0.5", "  epsilom: 0.5",
			"good.yaml:9: privacy.epsilom: unknown key (did you mean privacy.epsilon?)"},
		{"table", "    privacy_unit: Customer_ID", "    privacy_unit: Customer_ID\n    max_rows_per_unt: 3",
			"good.yaml:14: tables.Public.Orders.max_rows_per_unt: unknown key (did you mean tables.Public.Orders.max_rows_per_unit?)"},
		{"column", "amount: {lower: -5, upper: 500}", "amount: {lower: -5, uper: 500}",
			"good.yaml:15: tables.Public.Orders.columns.amount.uper: unknown key (did you mean tables.Public.Orders.columns.amount.upper?)"},
		{"analyst", "budget: {epsilon: 10", "budgt: {epsilon: 10",
			"good.yaml:7: auth.users[0].budgt: unknown key (did you mean auth.users[0].budget?)"},
		{"nothing near", "listen: 127.0.0.1:7000", "listen: 127.0.0.1:7000\nfrobnicate: 5",
			"good.yaml:3: frobnicate: unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(good, c.from) {
				t.Fatalf("test setup: %q not in the good config", c.from)
			}
			_, err := Parse("good.yaml", []byte(strings.Replace(good, c.from, c.to, 1)), env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant a line %q", err, c.want)
			}
			if strings.Contains(err.Error(), "not found in type") {
				t.Errorf("yaml's own message leaked: %v", err)
			}
			if c.name == "nothing near" && strings.Contains(err.Error(), "did you mean") {
				t.Errorf("a far key got a suggestion: %v", err)
			}
		})
	}
}

// TestAllProblemsInOneRun: unknown keys, type errors and validation
// problems all come back from one Parse, each with its line.
func TestAllProblemsInOneRun(t *testing.T) {
	bad := strings.NewReplacer(
		"upstream: postgres://dp@127.0.0.1/shop", "upsteam: postgres://dp@127.0.0.1/shop",
		"method: scram-sha-256", "method: nope",
		"delta: 1.0e-8", "delta: lots",
		"amount: {lower: -5, upper: 500}", "amount: {lower: 9, upper: 5}",
	).Replace(good)
	_, err := Parse("good.yaml", []byte(bad), env)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"good.yaml:3: upsteam: unknown key (did you mean upstream?)",
		"good.yaml:5: auth.method: \"nope\" is not one of",
		"good.yaml:10: privacy.delta: cannot unmarshal !!str `lots` into float64",
		"good.yaml:15: tables.Public.Orders.columns.amount: lower 9 is greater than upper 5",
		"config: upstream: missing", // absent keys have no line
	} {
		want = strings.Replace(want, "config:", "good.yaml:", 1)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err lacks %q:\n%v", want, err)
		}
	}
	// In the order of the file's lines, those without a line last.
	msg, last := err.Error(), -1
	for _, w := range []string{"good.yaml:3:", "good.yaml:5:", "good.yaml:10:", "good.yaml:15:", "good.yaml: upstream: missing"} {
		i := strings.Index(msg, w)
		if i < last {
			t.Errorf("%q out of order in:\n%s", w, msg)
		}
		last = i
	}
	// ParseAll keeps what it could read, for check-config's upstream checks.
	c, err := ParseAll("good.yaml", []byte(bad), env)
	if err == nil || c == nil || c.Table("public", "orders") == nil {
		t.Errorf("ParseAll = %v, %v; want the partial configuration and the problems", c, err)
	}
	for _, key := range []string{"tables.Public.Orders.privacy_unit", "tables.public.orders.privacy_unit"} {
		if w := c.Where(key); w != "good.yaml:13" {
			t.Errorf("Where(%s) = %q, want good.yaml:13", key, w)
		}
	}
	if w := c.Where("tables.public.orders.columns.amount"); w != "good.yaml:15" {
		t.Errorf("Where(amount) = %q, want good.yaml:15", w)
	}
	// A file that is not YAML is one problem, with its line.
	if _, err := Parse("good.yaml", []byte("listen: [\n"), env); err == nil || !strings.Contains(err.Error(), "good.yaml") || !strings.Contains(err.Error(), "line") {
		t.Errorf("syntax error: %v", err)
	}
}

// TestExplicitZeroIsAnError: a key given as 0 (or "" or nothing) where the
// default would silently replace it is a problem: privacy.epsilon: 0 used
// to run with ε = 1.
func TestExplicitZeroIsAnError(t *testing.T) {
	cases := []struct{ from, to, want string }{
		{"epsilon: 0.5", "epsilon: 0", "good.yaml:9: privacy.epsilon: 0 is not a value here"},
		{"epsilon: 0.5", "epsilon: 0.0", "privacy.epsilon: 0.0 is not a value here"},
		{"epsilon: 0.5", "epsilon:", "privacy.epsilon: nothing is not a value here"},
		{"delta: 1.0e-8", "delta: 0", "privacy.delta: 0 is not a value here"},
		{"delta: 1.0e-8", "delta: 1.0e-8\n  max_epsilon_per_query: 0", "privacy.max_epsilon_per_query"},
		{"delta: 1.0e-8", "delta: 1.0e-8\n  mechanism: \"\"", `privacy.mechanism: "" is not a value here`},
		{"delta: 1.0e-8", "delta: 1.0e-8\n  response_quantum: 0s", "privacy.response_quantum: 0s is not a value here"},
		{"privacy_unit: Customer_ID", "privacy_unit: Customer_ID\n    max_rows_per_unit: 0", "tables.Public.Orders.max_rows_per_unit: 0 is not a value here"},
		{"listen: 127.0.0.1:7000", "listen: 127.0.0.1:7000\nlimits: {max_connections: 0}", "limits.max_connections: 0 is not a value here"},
		{"listen: 127.0.0.1:7000", "listen: \"\"", `listen: "" is not a value here`},
	}
	for _, c := range cases {
		if !strings.Contains(good, c.from) {
			t.Fatalf("test setup: %q not in the good config", c.from)
		}
		cfg, err := Parse("good.yaml", []byte(strings.Replace(good, c.from, c.to, 1)), env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.to, err, c.want)
			if cfg != nil {
				t.Errorf("  and it would run with ε = %v", cfg.Privacy.Epsilon)
			}
		}
	}
	// Absent keys still take their defaults, and explicit valid values pass.
	if c, err := Parse("good.yaml", []byte(strings.Replace(good, "  epsilon: 0.5\n", "", 1)), env); err != nil || c.Privacy.Epsilon != DefaultEpsilon {
		t.Errorf("absent epsilon: %v, %v", c, err)
	}
	// A bound of 0 and public: false are real values, not "unset".
	ok := strings.Replace(good, "amount: {lower: -5, upper: 500}", "amount: {lower: 0, upper: 500}", 1)
	ok = strings.Replace(ok, "products: {public: true}", "products: {public: true}\n  other: {public: false, privacy_unit: id}", 1)
	if _, err := Parse("good.yaml", []byte(ok), env); err != nil {
		t.Errorf("lower: 0 / public: false refused: %v", err)
	}
}
