package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct{ text, intent, sql string }{
		{"-- intent: why\nSELECT 1\n", "why", "SELECT 1\n"},
		{"-- intent:why", "why", ""},
		{"-- a comment\nSELECT 1", "", "-- a comment\nSELECT 1"},
		{"SELECT 1 -- intent: no", "", "SELECT 1 -- intent: no"},
	} {
		intent, sql := Split(c.text)
		if intent != c.intent || sql != c.sql {
			t.Errorf("Split(%q) = %q, %q; want %q, %q", c.text, intent, sql, c.intent, c.sql)
		}
	}
}

// TestCases: cases are read from every subdirectory, in the order of
// their file names, and a name may not repeat.
func TestCases(t *testing.T) {
	dir := t.TempDir()
	write := func(path, text string) {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b/ok_a.sql", "-- intent: first\nSELECT 1")
	write("a/refuse_b.sql", "SELECT 2")
	write("a/ok_a-b.sql", "-- intent: x\nSELECT 3")
	write("a/ok_a.golden", "not a case")
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cases {
		got = append(got, c.Name+"="+c.SQL)
	}
	if want := "ok_a-b=SELECT 3 ok_a=SELECT 1 refuse_b=SELECT 2"; strings.Join(got, " ") != want {
		t.Errorf("Cases = %v, want %s", got, want)
	}
	if g := cases[1].Golden(); g != filepath.Join(dir, "b/ok_a.golden") {
		t.Errorf("Golden() = %s", g)
	}
	write("c/ok_a.sql", "SELECT 4")
	if _, err := Cases(dir); err == nil {
		t.Error("Cases accepted two cases named ok_a")
	}
}
