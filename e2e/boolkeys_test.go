package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/dpproxy/dpproxy/internal/testconf"
)

// TestBoolPublicValues: a boolean key with public_values releases its
// groups' counts whichever spelling of true and false the configuration
// uses (red team, issue 17: the filter compared flag::text, 'true', while
// the released key is PostgreSQL's output, 't', so every group came out
// as a noised zero, under [true, false] and [t, f] alike).
func TestBoolPublicValues(t *testing.T) {
	var b [4]byte
	rand.Read(b[:])
	tbl := "e2e_bool_keys_" + hex.EncodeToString(b[:])
	if _, err := direct(t).Exec(ctx, fmt.Sprintf(`
		CREATE TABLE %[1]s (uid int, flag bool);
		INSERT INTO %[1]s SELECT u, u %% 3 = 0 FROM generate_series(1, 3000) u;
		ANALYZE %[1]s`, tbl)); err != nil {
		t.Fatal(err)
	}
	for _, spelling := range []string{"[true, false]", "[t, f]", "['YES', 'off']"} {
		t.Run(spelling, func(t *testing.T) {
			yaml := testconf.Get("e2e_proxy").
				Merge("users:\n  - {name: bool_keys, password_env: PW, budget: {epsilon: 1000, delta: 1.0e-3}}\n", "auth").
				Merge(fmt.Sprintf("{public.%s: {privacy_unit: uid, max_groups_per_unit: 2, max_rows_per_unit: 1, columns: {flag: {public_values: %s}}}}", tbl, spelling), "tables").String()
			cfg := configFor(t, yaml, map[string]string{"PW": "pw"})
			_, addr, _ := startProxyWith(t, cfg)
			conn, err := dialAt(addr, "bool_keys", "pw")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "SET dp.epsilon = 5"); err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(ctx, fmt.Sprintf("SELECT flag, count(*) FROM %s GROUP BY flag", tbl))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for rows.Next() {
				raw := rows.RawValues()
				var n float64
				fmt.Sscan(string(raw[1]), &n)
				got[string(raw[0])] = n
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got["t"] < 900 || got["t"] > 1100 || got["f"] < 1900 || got["f"] > 2100 {
				t.Errorf("SELECT flag, count(*) with public_values %s = %v, want t about 1000 and f about 2000", spelling, got)
			}
		})
	}
}
