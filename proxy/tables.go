package proxy

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/dp"
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

// fitsText words how many queries like one fit: "9 more queries like this
// one fit", naming the table whose budget allows the fewest, if any.
func fitsText(f budget.FitCount, more bool) string {
	n := strconv.Itoa(f.N)
	if f.N >= budget.MaxFits {
		n = "at least " + n
	}
	what := "queries like this one fit"
	if more {
		what = "more " + what
	}
	if f.N == 1 {
		what = strings.Replace(strings.Replace(what, "queries", "query", 1), " fit", " fits", 1)
	}
	s := n + " " + what
	if f.LimitedBy != "" {
		s += " (the budget of table " + f.LimitedBy + ", shared by all analysts, allows the fewest)"
	}
	return s
}

// spendText is an analyst's or a table's budget in the words of the
// configured accountant: "spent ε=1 δ=0, remaining ε=9 δ=0.00001".
func spendText(sp budget.Spend) string {
	return "spent ε=" + formatNum(sp.EpsilonSpent) + " δ=" + formatNum(sp.DeltaSpent) +
		", remaining ε=" + formatNum(sp.EpsilonRemaining()) + " δ=" + formatNum(sp.DeltaRemaining())
}

// withBudgetDetail adds to r's NOTICE's DETAIL, after the bounds' line, the
// analyst's spent and remaining (ε, δ) under the configured accounting
// and how many more queries like this one fit (the claim counted them
// after the charge: budget.Claim.Fits).
func withBudgetDetail(r *result, spend budget.Spend, cl *budget.Claim) *result {
	if r.notice == "" || cl == nil {
		return r
	}
	budget := "budget (" + spend.Accounting + " accounting): " + spendText(spend) + "; " + fitsText(cl.Fits(), true)
	if r.noticeDetail != "" { // the contribution bounds and their bias (answerResult)
		budget = r.noticeDetail + "\n" + budget
	}
	r.noticeDetail = budget
	return r
}

// explainBudgetLines are the lines EXPLAIN DP adds about the budgets the
// query would be charged to: the analyst's and each budgeted table's,
// spent and remaining, and how many queries like it fit. Nothing when the
// ledger cannot say (the rest of EXPLAIN DP needs no ledger).
func (ss *session) explainBudgetLines(ctx context.Context, c budget.Charge) []string {
	o, err := ss.srv.ledger.Outlook(ctx, c)
	if err != nil {
		return nil
	}
	lines := []string{"Budget of " + c.Analyst + " (" + o.Analyst.Accounting + " accounting): " + spendText(o.Analyst) + "; " + fitsText(o.Fits, false) + ", this one included"}
	for _, t := range o.Tables {
		lines = append(lines, "Budget of table "+t.Table+", shared by all analysts: "+spendText(t.Spend))
	}
	return lines
}

// insertLines returns lines with more inserted at i.
func insertLines(lines []string, i int, more []string) []string {
	out := make([]string, 0, len(lines)+len(more))
	out = append(out, lines[:i]...)
	out = append(out, more...)
	return append(out, lines[i:]...)
}

// explainWithBudgets is EXPLAIN DP's lines with explainBudgetLines after
// the budget part: lines is the whole text, without is it with no budget
// (Explain with a nil *dp.Budget) and head the part before the budget
// (ExplainSpec).
func (ss *session) explainWithBudgets(ctx context.Context, plan *rewrite.Plan, cost dp.Cost, lines, without []string, head int) []string {
	return insertLines(lines, head+len(lines)-len(without), ss.explainBudgetLines(ctx, ss.chargeOf(plan, cost, "")))
}

// showBudgetWithTables is SHOW dp.budget when tables have budgets: the
// analyst's row as without them, then one row per table budget (spent by
// every analyst together, in the configured accountant's figures), and a
// fifth column "budget" saying whose each row is ("analyst NAME", "table
// schema.name"). Without table budgets SHOW dp.budget keeps its four
// columns and one row.
func (ss *session) showBudgetWithTables(ctx context.Context, cols []string, oids []uint32, analyst []string) (*result, error) {
	ts, err := ss.srv.ledger.TableBudgets(ctx, ss.srv.ledger.ConfiguredTables()...)
	if err != nil {
		return nil, err
	}
	cols = append(cols[:len(cols):len(cols)], "budget")
	oids = append(oids[:len(oids):len(oids)], oidText)
	rows := [][]string{append(analyst[:len(analyst):len(analyst)], "analyst "+ss.user.Name)}
	for _, t := range ts {
		rows = append(rows, []string{formatNum(t.EpsilonSpent), formatNum(t.EpsilonRemaining()), formatNum(t.DeltaSpent), formatNum(t.DeltaRemaining()), "table " + t.Table})
	}
	return textResult(cols, oids, rows, "SHOW"), nil
}
