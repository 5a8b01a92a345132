package proxy

import (
	"strings"
	"testing"
)

// TestReachProblem: what the query role can do to the ledger is named with
// the statements that take it away, whichever role holds the privilege.
// The e2e tests check the same against PostgreSQL's own privileges.
func TestReachProblem(t *testing.T) {
	self := func(w ...string) []reach {
		var r []reach
		for _, x := range w {
			r = append(r, reach{via: "dp_query", self: true, what: x})
		}
		return r
	}
	via := func(role string, w ...string) []reach {
		var r []reach
		for _, x := range w {
			r = append(r, reach{via: role, public: role == "public", what: x})
		}
		return r
	}
	join := func(rs ...[]reach) []reach {
		var all []reach
		for _, r := range rs {
			all = append(all, r...)
		}
		return all
	}
	for _, tc := range []struct {
		name        string
		role, owner string
		found       []reach
		want        []string // substrings; nil: no problem
		not         []string
	}{
		{"nothing", "dp_query", "dp_ledger", nil, nil, nil},
		{"direct grants", "dp_query", "dp_ledger", self("SELECT ON dpproxy.budgets", "UPDATE ON dpproxy.budgets"),
			[]string{"role dp_query can reach the ledger (SELECT ON dpproxy.budgets, UPDATE ON dpproxy.budgets), so a statement on a query connection could change budgets",
				"(REVOKE ALL ON SCHEMA dpproxy FROM dp_query)"}, nil},
		{"owner", "dp_query", "dp_ledger", self("owns schema dpproxy", "CREATE ON SCHEMA dpproxy"),
			[]string{"(owns schema dpproxy, CREATE ON SCHEMA dpproxy)", "ALTER SCHEMA dpproxy OWNER TO dp_ledger; REVOKE ALL ON SCHEMA dpproxy FROM dp_query"}, nil},
		{"owner, ledger role unknown", "dp_query", "", self("owns schema dpproxy"),
			[]string{"ALTER SCHEMA dpproxy OWNER TO the ledger role"}, nil},
		{"public", "dp_query", "dp_ledger", join(self("TRIGGER ON dpproxy.budgets"), via("public", "TRIGGER ON dpproxy.budgets")),
			[]string{"(REVOKE ALL ON SCHEMA dpproxy FROM PUBLIC)"}, []string{"FROM PUBLIC, dp_query", "through role"}},
		{"inherited from the ledger role", "dp_query", "dp_ledger",
			join(self("UPDATE ON dpproxy.budgets"), via("dp_ledger", "owns schema dpproxy", "UPDATE ON dpproxy.budgets")),
			[]string{"(UPDATE ON dpproxy.budgets; through role dp_ledger: owns schema dpproxy)", "(REVOKE dp_ledger FROM dp_query)"},
			[]string{"REVOKE ALL ON SCHEMA", "ALTER SCHEMA"}},
		{"a role to SET ROLE to (noinherit)", "dp_query", "dp_ledger", via("Ops Team", "INSERT ON dpproxy.charges"),
			[]string{"(through role Ops Team: INSERT ON dpproxy.charges)", `(REVOKE "Ops Team" FROM dp_query)`}, nil},
		{"inherited from a role, all held", "dp_query", "dp_ledger",
			join(self("INSERT ON dpproxy.charges"), via("writers", "INSERT ON dpproxy.charges")),
			[]string{"(INSERT ON dpproxy.charges; through role writers)", "(REVOKE writers FROM dp_query)"}, nil},
		{"a member role adding nothing to PUBLIC's", "dp_query", "dp_ledger",
			join(self("SELECT ON dpproxy.answers"), via("analysts", "SELECT ON dpproxy.answers"), via("public", "SELECT ON dpproxy.answers")),
			[]string{"(REVOKE ALL ON SCHEMA dpproxy FROM PUBLIC)"}, []string{"analysts"}},
		{"same role", "dp", "dp", self("owns schema dpproxy", "UPDATE ON dpproxy.budgets"),
			[]string{"role dp can reach the ledger", "ledger_upstream connects as the same role"}, []string{"REVOKE", "ALTER SCHEMA"}},
		{"long lists are cut", "dp_query", "dp_ledger",
			self("A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "A11", "A12"),
			[]string{"A10 and 2 more"}, []string{"A11"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reachProblem(tc.role, tc.owner, tc.found)
			if tc.want == nil {
				if got != "" {
					t.Errorf("reachProblem = %q, want none", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("reachProblem = %q, want it to contain %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("reachProblem = %q, want it without %q", got, n)
				}
			}
		})
	}
}

func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{"dp_query": "dp_query", "dp2": "dp2", "Ops Team": `"Ops Team"`, "2x": `"2x"`, `a"b`: `"a""b"`, "": `""`} {
		if got := quoteIdent(in); got != want {
			t.Errorf("quoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}
