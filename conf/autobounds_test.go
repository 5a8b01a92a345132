package conf

import (
	"strings"
	"testing"
)

func TestAutoBounds(t *testing.T) {
	base := strings.Replace(good, "amount: {lower: -5, upper: 500}", "amount: {bounds: auto}", 1)
	c, err := Parse("good.yaml", []byte(base), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	a := c.Table("public", "orders").Columns["amount"]
	if !a.AutoBounds() || a.HasBounds() {
		t.Errorf("amount = %+v, want bounds: auto and no lower/upper", a)
	}
	if c.Privacy.AutoBoundsShare != DefaultAutoBoundsShare {
		t.Errorf("auto_bounds_share = %v, want default %v", c.Privacy.AutoBoundsShare, DefaultAutoBoundsShare)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"amount: {bounds: auto}", "amount: {bounds: auto, lower: 0, upper: 5}", "auto and lower/upper exclude each other"},
		{"amount: {bounds: auto}", "amount: {bounds: automatic}", `"automatic" is not a valid value`},
		{"amount: {bounds: auto}", "amount: {bounds: auto, upper: 5}", "auto and lower/upper exclude each other"},
		{"delta: 1.0e-8", "delta: 1.0e-8\n  auto_bounds_share: 1", "privacy.auto_bounds_share: must lie strictly between 0 and 1"},
		{"delta: 1.0e-8", "delta: 1.0e-8\n  auto_bounds_share: -0.5", "privacy.auto_bounds_share: must lie strictly between 0 and 1"},
		{"amount: {bounds: auto}", "amount: {}", "give lower and upper, bounds: auto, or public_values"},
		{"amount: {bounds: auto}", "amount: {bounds: auto, auto_bounds_share: 1.5}", "columns.amount.auto_bounds_share: must lie strictly between 0 and 1"},
		{"amount: {bounds: auto}", "amount: {lower: 0, upper: 5, auto_bounds_share: 0.5}", "only a column with bounds: auto takes a share"},
	} {
		_, err := Parse("bad.yaml", []byte(strings.Replace(base, tc.from, tc.to, 1)), env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse error %v, want one containing %q", tc.to, err, tc.want)
		}
	}
	if got := c.AutoBoundsShareOf(a); got != DefaultAutoBoundsShare {
		t.Errorf("share of amount = %v, want the default", got)
	}
	own, err := Parse("own.yaml", []byte(strings.Replace(base, "amount: {bounds: auto}", "amount: {bounds: auto, auto_bounds_share: 0.3}", 1)), env)
	if err != nil {
		t.Fatal(err)
	}
	if got := own.AutoBoundsShareOf(own.Table("public", "orders").Columns["amount"]); got != 0.3 {
		t.Errorf("share of amount = %v, want its own 0.3", got)
	}
	ok, err := Parse("ok.yaml", []byte(strings.Replace(base, "delta: 1.0e-8", "delta: 1.0e-8\n  auto_bounds_share: 0.25", 1)), env)
	if err != nil || ok.Privacy.AutoBoundsShare != 0.25 {
		t.Errorf("auto_bounds_share 0.25: %v, %v", err, ok)
	}
}
