package dp

import (
	"slices"
	"testing"
)

// TestPublicKeysReleaseOnlyTheList: the rewrite groups a unit's rows
// without ranking them when the keys' public values allow at most
// max_groups_per_unit combinations (rewrite/template.go, keysCapGroups).
// Whatever the database returns (its filter, key::text IN (values), and
// the released text, the type's output, differ for a bool column grouped
// natively: 'true' against 't'), a unit's contribution is released in at
// most that many groups only because the release keeps exactly the listed
// combinations, each once per entry, and drops every other group, NULL
// included (red team, issue 17).
func TestPublicKeysReleaseOnlyTheList(t *testing.T) {
	plan := quantilePlan([]string{"a", "b"})
	rows := [][][]byte{row("a ", "9", "NULL"), row("a  ", "9", "NULL"), row("t", "9", "NULL"), row("b", "3", "NULL"), row("NULL", "9", "NULL")}
	groups, err := parseGroups(plan, rows, 3)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, g := range fillPublicKeys(plan, groups, 3) {
		keys = append(keys, string(g.Keys[0]))
		if string(g.Keys[0]) == "a" && g.Units != 0 {
			t.Errorf("group a took the units of another spelling: %v", g.Units)
		}
	}
	if !slices.Equal(keys, []string{"a", "b"}) {
		t.Errorf("released keys %q, want exactly the public values [a b]", keys)
	}
}
