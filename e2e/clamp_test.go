package e2e

import (
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/internal/testconf"
)

// TestClampSpecialValues: the clamp of SUM and AVG, written as a CASE so
// that postgres_fdw ships it (rewrite/histogram.go, clampSQL), means what
// least(greatest(x, lo), hi) meant for every value of every type it
// clamps: NULL stays NULL (left out, as SUM and AVG leave it), NaN (larger
// than every number in PostgreSQL's ordering) and +Infinity clamp to the
// upper bound, -Infinity to the lower, for float8, numeric and integer
// columns. Through an exact proxy (no noise, bounds that never drop a
// row), the released SUM and AVG equal the direct query with
// least(greatest(...)) clamps.
func TestClampSpecialValues(t *testing.T) {
	admin := direct(t)
	if _, err := admin.Exec(ctx, `
		DROP TABLE IF EXISTS public.dp_clamp_vals;
		CREATE TABLE public.dp_clamp_vals (uid int NOT NULL, g text NOT NULL, f float8, n numeric, i integer);
		INSERT INTO public.dp_clamp_vals VALUES
		  (1, 'a', 'NaN', 'NaN', 50), (1, 'a', 5, 5, -5), (1, 'b', NULL, NULL, NULL),
		  (2, 'a', 'Infinity', 'Infinity', 200), (2, 'b', '-Infinity', '-Infinity', 7),
		  (3, 'a', 150, 150.5, 100), (3, 'b', -3, -3.25, 0), (4, 'b', 42.125, 42.125, 42),
		  (5, 'a', 'NaN', 0, NULL), (5, 'b', 100, 100, 101)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct(t).Exec(ctx, "DROP TABLE IF EXISTS public.dp_clamp_vals") })
	c := testconf.Get(testconf.Semantic).
		Set(`[{name: clamp_analyst, password_env: PW, budget: {epsilon: 1.0e+9, delta: 0.5}}]`, "auth", "users").
		Set(`{privacy_unit: uid, max_groups_per_unit: 10, max_rows_per_unit: 100, columns: {f: {lower: 1, upper: 100}, n: {lower: 1, upper: 100}, i: {lower: 1, upper: 100}, g: {public_values: [a, b]}}}`,
			"tables", "public.dp_clamp_vals")
	_, addr := startExactProxy(t, configFor(t, c.String(), map[string]string{"PW": "clamp-secret"}))
	conn, err := dialAt(addr, "clamp_analyst", "clamp-secret")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	clamp := func(x string) string {
		return "CASE WHEN " + x + " IS NULL THEN NULL ELSE least(greatest(" + x + ", 1), 100) END"
	}
	var aggs, want []string
	for _, col := range []string{"f", "n", "i"} {
		cast := "(" + col + ")::numeric"
		if col == "i" {
			cast = col // an integer column is clamped natively
		}
		for _, fn := range []string{"sum", "avg"} {
			aggs = append(aggs, fn+"("+col+")")
			want = append(want, fn+"("+clamp(cast)+")::float8")
		}
	}
	for _, grouped := range []bool{false, true} {
		q := "SELECT " + strings.Join(aggs, ", ") + " FROM public.dp_clamp_vals"
		d := "SELECT " + strings.Join(want, ", ") + " FROM public.dp_clamp_vals"
		if grouped {
			q, d = "SELECT g, "+q[len("SELECT "):]+" GROUP BY g ORDER BY g", "SELECT g, "+d[len("SELECT "):]+" GROUP BY g ORDER BY g"
		}
		got, exp := floatRows(t, conn, q), floatRows(t, admin, d)
		if len(got) == 0 || len(got) != len(exp) {
			t.Fatalf("%s: %d rows, want %d", q, len(got), len(exp))
		}
		for r := range got {
			for i := range got[r] {
				if math.IsNaN(got[r][i]) || math.Abs(got[r][i]-exp[r][i]) > 1e-9*math.Max(1, math.Abs(exp[r][i])) {
					t.Errorf("%s: row %d column %d = %v, want %v (least/greatest clamp)", q, r, i, got[r][i], exp[r][i])
				}
			}
		}
	}
}

// floatRows runs q and reads every column but a leading text key as a
// float64.
func floatRows(t *testing.T, c *pgx.Conn, q string) [][]float64 {
	t.Helper()
	rows, err := c.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][]float64
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var r []float64
		for _, v := range vals {
			if _, ok := v.(string); ok {
				continue
			}
			switch x := v.(type) {
			case float64:
				r = append(r, x)
			case int64:
				r = append(r, float64(x))
			case int32:
				r = append(r, float64(x))
			default:
				f, err := toFloat(v)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				r = append(r, f)
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}
