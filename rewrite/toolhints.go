package rewrite

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Hints for refusals of row-level reads that a tool generated, so that
// the person at the tool learns which setting of the tool to change, not
// only which part of the SQL was refused (issue 14, item 6). The shapes
// are those e2e/tools_replay_test.go replays from each tool's source; the
// hint depends only on the query's text, never on data.

// toolHint returns the hint for a row-level refusal of sel when its shape
// is one a tool generates, or "".
func toolHint(sel *pg_query.SelectStmt) string {
	if sel == nil || sel.Op != pg_query.SetOperation_SETOP_NONE {
		return ""
	}
	limit, hasLimit := int64(-1), false
	if c := sel.GetLimitCount().GetAConst(); c != nil && c.GetIval() != nil {
		limit, hasLimit = int64(c.GetIval().GetIval()), true
	}
	star, qualified3, timeAlias, columns := false, len(sel.TargetList) > 0, false, len(sel.TargetList) > 0
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if strings.EqualFold(rt.GetName(), "time") {
			timeAlias = true
		}
		cr := rt.GetVal().GetColumnRef()
		if cr == nil {
			qualified3, columns = false, false
			continue
		}
		if f := cr.Fields; len(f) > 0 && f[len(f)-1].GetAStar() != nil {
			star = true
		}
		if len(cr.Fields) != 3 || rt.GetName() == "" {
			qualified3 = false
		}
	}
	switch {
	case falseCondition(sel.WhereClause) || hasLimit && limit == 0:
		// Tableau and Power BI (and pgJDBC-based tools) learn a query's
		// columns from an empty result before reading the ODBC catalog.
		return "This looks like a tool's column probe (SELECT ... WHERE 1=0 or LIMIT 0, as Tableau and Power BI send): the tool reads the columns from the catalog instead, which dpproxy answers. " +
			"In Tableau keep the data source Live (an Extract reads every row, which is refused); in Power BI use DirectQuery with aggregated visuals (Import reads every row)."
	case timeAlias:
		return "This looks like a Grafana panel query that returns raw rows: dpproxy answers only aggregates. " +
			"In Grafana, group by a time bucket: SELECT $__timeGroupAlias(col, $__interval), count(*) FROM table WHERE $__timeFilter(col) GROUP BY 1 ORDER BY 1, " +
			"or in the query builder pick an Aggregation for each column and a Group by."
	case qualified3 && hasLimit:
		// Metabase writes every column as "schema"."table"."column" AS
		// "column"; its raw-data views end in LIMIT 2000 (the table
		// view), 10000 (sync's sample) or 1048575 (a download).
		return "This looks like Metabase's raw-data view (a table preview, a question without Summarize, a download, or sync's sample of the table): dpproxy answers only aggregates. " +
			"In Metabase, add a Summarize step (Count, Sum, Average, Number of distinct values) grouped by a column; " +
			"sync's sample of rows for fingerprints is refused too, and the columns stay listed. " +
			"So that Metabase does not scan a column's values on a schedule, set it to Filtering: Plain input box in Admin > Table Metadata."
	case columns && !star && hasLimit && limit == 50:
		// Grafana's SQL query builder (toRawSql in grafana/grafana
		// public/app/plugins/datasource/grafana-postgresql-datasource/sqlUtil.ts)
		// lists the chosen columns, then LIMIT 50, its default.
		return "This looks like Grafana's query builder before an aggregation is chosen: dpproxy answers only aggregates. " +
			"In the builder, pick an Aggregation (COUNT, SUM, AVG) for each column and a Group by column."
	case star && hasLimit && limit >= 50 && limit <= 1000:
		// pgAdmin's View Data (LIMIT 100), DBeaver's data tab (200),
		// Superset's samples (100).
		return "This looks like a data viewer's first page (pgAdmin's View Data, DBeaver's data tab, Superset's samples): private tables cannot be browsed row by row. " +
			"Ask an aggregate instead, e.g. SELECT col, count(*) FROM table GROUP BY col."
	}
	return ""
}

// falseCondition reports whether where is the constant false condition
// tools probe with: 1=0, 1<>1, false.
func falseCondition(where *pg_query.Node) bool {
	if where == nil {
		return false
	}
	if c := where.GetAConst(); c != nil && c.GetBoolval() != nil {
		return !c.GetBoolval().Boolval
	}
	if tc := where.GetTypeCast(); tc != nil {
		if c := tc.GetArg().GetAConst(); c != nil && c.GetSval() != nil {
			v := strings.ToLower(c.GetSval().GetSval())
			return v == "f" || v == "false"
		}
	}
	e := where.GetAExpr()
	if e == nil || e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 {
		return false
	}
	l, r := e.GetLexpr().GetAConst().GetIval(), e.GetRexpr().GetAConst().GetIval()
	if e.GetLexpr().GetAConst() == nil || e.GetRexpr().GetAConst() == nil {
		return false
	}
	switch e.Name[0].GetString_().GetSval() {
	case "=":
		return l.GetIval() != r.GetIval()
	case "<>", "!=":
		return l.GetIval() == r.GetIval()
	}
	return false
}

// withToolHint replaces the hint of a row-level refusal with the one for
// the tool that generated sel, when it is recognised.
func withToolHint(err error, sel *pg_query.SelectStmt) error {
	re, ok := err.(*RejectError)
	if !ok || re.Code != pgerr.InsufficientPrivilege ||
		!(strings.Contains(re.Message, "individual rows") || strings.Contains(re.Message, "one row per table row")) {
		return err
	}
	if h := toolHint(sel); h != "" {
		re.Hint = h
	}
	return err
}
