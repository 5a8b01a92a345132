// Package rewrite parses SQL with pg_query_go, classifies each statement,
// refuses what cannot be answered with differential privacy, and rewrites
// aggregate queries over one private table so that each privacy unit's
// contribution is bounded (docs/design.md, "The rewrite template").
//
// Everything the rewrite accepts is either a KindPrivate plan, whose SQL
// reads the private table only inside a per-unit pre-aggregation, or a
// KindPassThrough statement, which reads no private table, calls only
// allowlisted functions and names every relation with its schema. Anything
// else is refused with a *RejectError carrying a SQLSTATE.
//
// A statement goes through these phases, in order, each in its own files:
//
//   - guard (guard.go): the query string's tokens and the depth of its
//     tree (estimated by a scan in Go) are bounded before pg_query sees
//     it, so no input can overflow the parser's stack.
//   - parse (analyze.go): pg_query parses the string; EXPLAIN DP, not
//     PostgreSQL syntax, is split off and its query parsed alone.
//   - statement kind (analyze.go): classifyStmt dispatches on the
//     statement: SET, SHOW and RESET of settings (session.go, timeout.go),
//     transaction control, DEALLOCATE, EXPLAIN, and SELECT; everything else
//     is refused. A SELECT's relations are resolved (walk.go) and decide
//     its path: one that reads no private table is a pass-through query
//     (passthrough.go, allowlists.go, mask.go); one that reads a private
//     table is planned (planner.go), in the phases below; a UNION ALL of
//     such SELECTs is planned branch by branch (union.go), and SELECT
//     DISTINCT is planned as GROUP BY its outputs (planner.go).
//   - inline (inline.go): CTEs and derived tables that read the private
//     table are inlined into one SELECT.
//   - scope (scope.go): the FROM clause (the private table, joined only
//     with public tables, never on a nullable side) and what each column
//     reference names, with its type; joins must match at most one public
//     row per private row and the query's work is bounded (joins.go,
//     work.go).
//   - keys (keys.go): the GROUP BY keys.
//   - checks (expressions.go, predicates.go, functions.go, arith.go): every
//     condition, key and aggregate argument computes only what cannot fail
//     on any row (the totality table, totality.go); constants are hoisted
//     to be evaluated by the proxy first (hoist.go).
//   - outputs (outputs.go, aggregates.go): each output is a key or an
//     aggregate, with ORDER BY, LIMIT and OFFSET; otherwise the outputs,
//     HAVING and ORDER BY become post-processing over the released values
//     (post.go).
//   - bounds (bounds.go, keys.go): the clamping interval of each
//     aggregate's argument, derived as the aggregate is planned, then how
//     many groups one unit may touch (groupBounds).
//   - layout (layout.go): which column of the rewritten query's result
//     holds each key, the unit count and each aggregate's parts.
//   - template (template.go, sqltext.go, nullclamp.go): the rewritten SQL,
//     printed from the plan and the layout (docs/design.md, "The rewrite
//     template").
//
// Every list that decides what is accepted or refused is in allowlists.go
// (and the totality table in totality.go).
package rewrite
