package e2e

import (
	"math"
	"testing"
)

// TestIntegerSumIsExactlyBoundedAndTyped: SUM and AVG of an integer column
// (clamped and summed natively in the rewrite) come back near the true
// bounded value, typed as PostgreSQL types the original query.
func TestIntegerSumIsExactlyBoundedAndTyped(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	rows, err := conn.Query(ctx, "SELECT sum(quantity), avg(quantity) FROM orders WHERE amount >= 0")
	if err != nil {
		t.Fatal(err)
	}
	if f := rows.FieldDescriptions(); len(f) != 2 || f[0].DataTypeOID != 20 || f[1].DataTypeOID != 1700 {
		t.Fatalf("types = %+v, want bigint, numeric", f)
	}
	var sum int64
	var avg float64
	if !rows.Next() {
		t.Fatal(rows.Err())
	}
	if err := rows.Scan(&sum, &avg); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	// The truth after bounding: per customer, the sum of their quantities
	// (clamped to [1, 4]) scaled to at most 8 rows.
	var truth float64
	if err := direct(t).QueryRow(ctx, `SELECT sum(s * least(1, 8::numeric / n))::float8 FROM
		(SELECT customer_id, count(*) n, sum(least(greatest(quantity, 1), 4)) s FROM orders WHERE amount >= 0 GROUP BY customer_id) p`).Scan(&truth); err != nil {
		t.Fatal(err)
	}
	// ε/2 for the sum, no GROUP BY: Laplace scale 8·4/0.5 = 64; P(|noise| > 64·13.8) = 1e-6.
	if math.Abs(float64(sum)-truth) > 64*13.8 {
		t.Errorf("sum(quantity) = %d, true bounded sum %.1f", sum, truth)
	}
	if avg < 1 || avg > 4 {
		t.Errorf("avg(quantity) = %v outside [1, 4]", avg)
	}
}
