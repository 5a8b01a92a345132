package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/testconf"
)

// TestGroupKeyTextIsTheGroup (red team, issue 16): PostgreSQL groups by a
// type's equality and returns the first row's text for the group, so for
// a type that holds different texts equal (numeric 1.0 and 1.00) the key
// released for a group was one row's spelling, chosen by the data: the
// unit ordered first. Here 2000 persons have v = 1.0 and one, ordered
// first, has 1.00. Read from the private rows (partition selection), the
// group of 2001 persons came out as "1.00": the one person's presence,
// certain, at any ε. From a joined public table (public keys), the key set
// held one spelling and the group's count went to whichever the first
// person wrote, the other released as a noised zero. Now every spelling
// is a group of its own: "1.00" is one person's group (released with
// probability at most δ), and the public keys are both spellings.
func TestGroupKeyTextIsTheGroup(t *testing.T) {
	var b [4]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:])
	priv, pub := "e2e_rt_keys_"+sfx, "e2e_rt_prices_"+sfx
	if _, err := direct(t).Exec(ctx, fmt.Sprintf(`
		CREATE TABLE %[2]s (pid int PRIMARY KEY, price numeric);
		INSERT INTO %[2]s VALUES (1, 1.0), (2, 1.00);
		CREATE TABLE %[1]s (uid int, v numeric, pid int);
		INSERT INTO %[1]s SELECT u, 1.0, 1 FROM generate_series(1, 2000) u;
		INSERT INTO %[1]s VALUES (0, 1.00, 2);
		ANALYZE %[1]s; ANALYZE %[2]s`, priv, pub)); err != nil {
		t.Fatal(err)
	}
	yaml := testconf.Get("e2e_proxy").
		Merge("users:\n  - {name: rt_keys, password_env: PW, budget: {epsilon: 1000, delta: 1.0e-3}}\n", "auth").
		Merge(fmt.Sprintf("{public.%s: {privacy_unit: uid, max_groups_per_unit: 1, max_rows_per_unit: 1}, public.%s: {public: true}}", priv, pub), "tables").String()
	cfg := configFor(t, yaml, map[string]string{"PW": "pw"})
	_, addr, _ := startProxyWith(t, cfg)
	conn, err := dialAt(addr, "rt_keys", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 5"); err != nil {
		t.Fatal(err)
	}
	keys := func(sql string) map[string]float64 {
		t.Helper()
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		out := map[string]float64{}
		for rows.Next() {
			raw := rows.RawValues()
			var n float64
			fmt.Sscan(string(raw[1]), &n)
			out[string(raw[0])] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	names := func(m map[string]float64) string {
		var s []string
		for k := range m {
			s = append(s, k)
		}
		sort.Strings(s)
		return strings.Join(s, ",")
	}
	// Keys read from the private rows: the group of 2000 is "1.0"; the
	// one person's "1.00" is not released.
	got := keys(fmt.Sprintf("SELECT v, count(*) FROM %s GROUP BY v", priv))
	if names(got) != "1.0" || got["1.0"] < 1900 {
		t.Errorf("keys from the private rows: %v, want only 1.0 with about 2000 (the one person's spelling 1.00 is a group of one)", got)
	}
	// Keys from the public table: both spellings, the 2000 in "1.0".
	got = keys(fmt.Sprintf("SELECT p.price, count(*) FROM %s o JOIN %s p ON p.pid = o.pid GROUP BY p.price", priv, pub))
	if names(got) != "1.0,1.00" || got["1.0"] < 1900 || got["1.00"] > 100 {
		t.Errorf("keys from the public table: %v, want 1.0 with about 2000 and 1.00 with about 1", got)
	}
}

// TestGroupKeyTextUnderNondeterministicCollation: a text column's type is
// one whose equality is text identity, except under a nondeterministic
// collation ('abc' = 'ABC' case-insensitively), which a column can carry
// whatever its type. Grouped natively, 2000 persons' "abc" and one
// person's "ABC", ordered first, came out as the key "ABC": that person's
// presence, at any ε. Text keys are grouped under COLLATE "C" (bytewise).
func TestGroupKeyTextUnderNondeterministicCollation(t *testing.T) {
	var b [4]byte
	rand.Read(b[:])
	priv := "e2e_rt_ci_" + hex.EncodeToString(b[:])
	if _, err := direct(t).Exec(ctx, fmt.Sprintf(`
		CREATE COLLATION IF NOT EXISTS e2e_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
		CREATE TABLE %[1]s (uid int, v text COLLATE e2e_ci);
		INSERT INTO %[1]s VALUES (0, 'ABC');
		INSERT INTO %[1]s SELECT u, 'abc' FROM generate_series(1, 2000) u;
		ANALYZE %[1]s`, priv)); err != nil {
		t.Skipf("no ICU collations here: %v", err)
	}
	yaml := testconf.Get("e2e_proxy").
		Merge("users:\n  - {name: rt_ci, password_env: PW, budget: {epsilon: 1000, delta: 1.0e-3}}\n", "auth").
		Merge(fmt.Sprintf("{public.%s: {privacy_unit: uid, max_groups_per_unit: 1, max_rows_per_unit: 1}}", priv), "tables").String()
	cfg := configFor(t, yaml, map[string]string{"PW": "pw"})
	_, addr, _ := startProxyWith(t, cfg)
	conn, err := dialAt(addr, "rt_ci", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 5"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT v, count(*) FROM %s GROUP BY v", priv))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		raw := rows.RawValues()
		got[string(raw[0])] = string(raw[1])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["ABC"]; ok || len(got) != 1 {
		t.Errorf("keys: %v, want only abc (the one person's ABC is a group of one)", got)
	}
}
