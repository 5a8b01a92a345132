package proxy

import (
	"sort"

	"github.com/dpproxy/dpproxy/rewrite"
)

// planTables is the private tables a plan reads, sorted, each once: the
// tables whose budgets its charge counts against (budget/tables.go). A
// plan reads one private table (joins of two private tables are refused);
// a UNION ALL reads the union of its branches' tables.
func planTables(p *rewrite.Plan) []string {
	seen := map[string]bool{}
	var out []string
	var add func(p *rewrite.Plan)
	add = func(p *rewrite.Plan) {
		if p == nil {
			return
		}
		if p.Table != nil && !p.Table.Public {
			if n := p.Table.QualifiedName(); !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
		for _, b := range p.Branches {
			add(b)
		}
	}
	add(p)
	sort.Strings(out)
	return out
}
