package budget

import (
	"context"
	"math"
	"testing"

	"github.com/jackc/pgx/v5"
)

func mustNumeric(t *testing.T, s string) Numeric {
	t.Helper()
	n, err := ParseNumeric(s)
	if err != nil {
		t.Fatalf("ParseNumeric(%q): %v", s, err)
	}
	return n
}

func TestNumericParseAndString(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "0.1": "0.1", "1.0": "1.0", "-12.50": "-12.50", "+3": "3", ".5": "0.5", "5.": "5",
		"1e-07": "0.0000001", "2.5e-05": "0.000025", "1e+21": "1000000000000000000000",
		"1.5e3": "1500", "1.25E1": "12.5", "0.000001": "0.000001", "-0": "0",
	} {
		if got := mustNumeric(t, in).String(); got != want {
			t.Errorf("ParseNumeric(%q).String() = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"", "-", ".", "NaN", "Infinity", "-Infinity", "1e", "1e5000", "abc", "1.2.3", "1 ", "0x10", "1e+-2"} {
		if n, err := ParseNumeric(in); err == nil {
			t.Errorf("ParseNumeric(%q) = %v, want an error", in, n)
		}
	}
	if got := (Numeric{}).String(); got != "0" {
		t.Errorf("zero Numeric = %q, want 0", got)
	}
}

// TestNumericArithmetic: sums keep the larger scale, as PostgreSQL's
// numeric does, and comparisons are exact.
func TestNumericArithmetic(t *testing.T) {
	sum := Numeric{}
	for range 10 {
		sum = sum.Add(mustNumeric(t, "0.1"))
	}
	if sum.String() != "1.0" || sum.Cmp(mustNumeric(t, "1")) != 0 || sum.Float64() != 1 {
		t.Errorf("ten times 0.1 = %s (%v), want 1.0", sum, sum.Float64())
	}
	if got := mustNumeric(t, "1.0").Sub(mustNumeric(t, "0.7")); got.String() != "0.3" || got.Float64() != 0.3 {
		t.Errorf("1.0 - 0.7 = %s (%v), want 0.3", got, got.Float64())
	}
	if got := mustNumeric(t, "0.1").Add(mustNumeric(t, "0.2")); got.Cmp(mustNumeric(t, "0.3")) != 0 {
		t.Errorf("0.1 + 0.2 = %s, want 0.3", got)
	}
	if got := mustNumeric(t, "1e-07").Add(mustNumeric(t, "3e-07")); got.String() != "0.0000004" {
		t.Errorf("1e-07 + 3e-07 = %s, want 0.0000004", got)
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"0.3", "0.30", 0}, {"0.30000000000000001", "0.3", 1}, {"-1", "0", -1}, {"1e-300", "0", 1}, {"2", "10", -1},
	} {
		if got := mustNumeric(t, tc.a).Cmp(mustNumeric(t, tc.b)); got != tc.want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	if got := numericOf(0.1); got.String() != "0.1" {
		t.Errorf("numericOf(0.1) = %s, want 0.1 (the shortest decimal, not the binary value)", got)
	}
}

// TestNumericAsPostgreSQL: Numeric reads, adds, prints and rounds to
// float64 exactly as PostgreSQL's numeric does, so the totals the ledger
// writes back read as PostgreSQL's own sums would have.
func TestNumericAsPostgreSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	values := []string{"0", "0.1", "0.2", "1.0", "0.7", "1e-07", "2.5e-05", "1e+21", "1.5e3", "0.30000000000000004",
		decimal(1.0 / 3), decimal(math.SmallestNonzeroFloat64), decimal(math.MaxFloat64), decimal(PureRho(0.3)), "-0.125", "123456789.000000001"}
	for _, a := range values {
		var text string
		var f float64
		if err := conn.QueryRow(ctx, `SELECT $1::numeric::text, $1::numeric::float8`, a).Scan(&text, &f); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		n := mustNumeric(t, a)
		if n.String() != text || n.Float64() != f {
			t.Errorf("ParseNumeric(%q) = %s (%v); PostgreSQL reads %s (%v)", a, n, n.Float64(), text, f)
		}
		for _, b := range values {
			var sum, diff string
			var cmp int
			if err := conn.QueryRow(ctx, `SELECT ($1::numeric + $2::numeric)::text, ($1::numeric - $2::numeric)::text,
				CASE WHEN $1::numeric < $2::numeric THEN -1 WHEN $1::numeric > $2::numeric THEN 1 ELSE 0 END`, a, b).Scan(&sum, &diff, &cmp); err != nil {
				t.Fatalf("%s, %s: %v", a, b, err)
			}
			m := mustNumeric(t, b)
			if got := n.Add(m).String(); got != sum {
				t.Errorf("%s + %s = %s; PostgreSQL: %s", a, b, got, sum)
			}
			if got := n.Sub(m).String(); got != diff {
				t.Errorf("%s - %s = %s; PostgreSQL: %s", a, b, got, diff)
			}
			if got := n.Cmp(m); got != cmp {
				t.Errorf("Cmp(%s, %s) = %d; PostgreSQL: %d", a, b, got, cmp)
			}
		}
	}
}
