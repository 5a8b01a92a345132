package proxy

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The ledger out of the query role's reach: New's start-up check
// (ledgerOutOfReach) and check-config's (checker.outOfReach, check.go)
// read the same catalog (reachSQL) and describe what they find the same
// way (reachProblem).

// ledgerOutOfReach is New's start-up check that no statement on a query
// connection can change the ledger. With one DSN for both (the demo's
// set-up, conf.Config.SharedLedger) it warns and goes on; with two it
// refuses to start when the query role is a superuser or it, or a role it
// can become, can reach schema dpproxy (reachSQL): setting ledger_upstream
// asks for the separation, so serving without it would be a silent lie.
func (s *Server) ledgerOutOfReach(ctx context.Context) error {
	if s.cfg.SharedLedger() {
		s.log.Warn("one upstream role for queries and the ledger (ledger_upstream absent or the same as upstream): a statement on a query connection could change budgets; run like this for a demo only (see docs/operations.md, the two upstream roles)")
		return nil
	}
	var role, ledgerRole string
	var super bool
	err := s.pool.QueryRow(ctx, `SELECT current_user, (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)`).Scan(&role, &super)
	if err == nil {
		err = s.ledgerDB.QueryRow(ctx, `SELECT current_user`).Scan(&ledgerRole)
	}
	if err != nil {
		return fmt.Errorf("proxy: reading the upstream roles: %w", err)
	}
	if super {
		return fmt.Errorf("proxy: upstream: role %s is a superuser, so a statement on a query connection could change budgets in the ledger; connect as a role that may only SELECT the configured tables (see docs/operations.md)", role)
	}
	found, err := ledgerReach(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("proxy: reading the query role's privileges on schema dpproxy: %w", err)
	}
	if msg := reachProblem(role, ledgerRole, found); msg != "" {
		return fmt.Errorf("proxy: upstream: %s", msg)
	}
	return nil
}

// reach is one thing a role can do to the ledger.
type reach struct {
	// via holds the privilege: the connection's own role (self), PUBLIC
	// (public), or a role it can become (SET ROLE, or inherited
	// membership). The role's own privileges include those it inherits
	// and PUBLIC's.
	via          string
	self, public bool
	what         string // e.g. "UPDATE ON dpproxy.budgets", "CREATE ON SCHEMA dpproxy"
}

// reachSQL lists what the connection's role, PUBLIC and every role it is
// a member of can do to schema dpproxy: own it, CREATE in it, or, with
// USAGE on it, any privilege on its tables and sequences. TRIGGER and
// REFERENCES count: a trigger on dpproxy.budgets would run as the ledger
// role at every charge. USAGE alone is harmless (it shows names, not
// rows). The has_* functions count the grants of pg_read_all_data and
// pg_write_all_data too. Privileges on dpproxy.budgets come first, since
// a long list is cut short and they are what an operator must see.
const reachSQL = `
WITH ns AS (SELECT oid, nspowner FROM pg_catalog.pg_namespace WHERE nspname = 'dpproxy'),
     r AS (SELECT oid, rolname::text AS name FROM pg_catalog.pg_roles WHERE pg_catalog.pg_has_role(current_user, oid, 'MEMBER')
           UNION ALL SELECT 0, 'public')
SELECT r.name, r.oid <> 0 AND r.name = current_user, r.oid = 0, f.what
FROM r CROSS JOIN ns CROSS JOIN LATERAL (
	SELECT 'owns schema dpproxy' AS what WHERE ns.nspowner = r.oid
	UNION ALL
	SELECT 'CREATE ON SCHEMA dpproxy' WHERE pg_catalog.has_schema_privilege(r.name, ns.oid, 'CREATE')
	UNION ALL
	SELECT p || ' ON dpproxy.' || c.relname
	FROM pg_catalog.pg_class c,
	     unnest(CASE WHEN c.relkind = 'S' THEN ARRAY['USAGE', 'SELECT', 'UPDATE']
	                 ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'] END) AS p
	WHERE c.relnamespace = ns.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
	  AND pg_catalog.has_schema_privilege(r.name, ns.oid, 'USAGE')
	  AND CASE WHEN c.relkind = 'S' THEN pg_catalog.has_sequence_privilege(r.name, c.oid, p)
	           ELSE pg_catalog.has_table_privilege(r.name, c.oid, p) END
) f
ORDER BY 2 DESC, 1, f.what <> 'owns schema dpproxy', f.what NOT LIKE '% ON dpproxy.budgets', 4`

// ledgerReach lists what q's role can do to the ledger (reachSQL); none
// when there is no schema dpproxy. Do not call it for a superuser, who is
// a member of every role.
func ledgerReach(ctx context.Context, q querier) ([]reach, error) {
	rows, err := q.Query(ctx, reachSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (reach, error) {
		var x reach
		err := r.Scan(&x.via, &x.self, &x.public, &x.what)
		return x, err
	})
}

// reachProblem describes what role can do to the ledger (found), with the
// statements that take it away; "" when role can do nothing. ledgerRole
// may be "" when unknown.
func reachProblem(role, ledgerRole string, found []reach) string {
	var own []string // role's own, inherited ones included
	owner := false
	fromPublic := map[string]bool{}
	var vias []string // roles role can become that add to PUBLIC's
	byVia := map[string][]string{}
	for _, f := range found {
		switch {
		case f.self:
			own = append(own, f.what)
			owner = owner || f.what == "owns schema dpproxy"
		case f.public:
			fromPublic[f.what] = true
		}
	}
	explained := map[string]bool{}
	for _, f := range found {
		if f.self || f.public || fromPublic[f.what] {
			continue
		}
		if byVia[f.via] == nil {
			vias = append(vias, f.via)
		}
		byVia[f.via] = append(byVia[f.via], f.what)
		explained[f.what] = true
	}
	direct := false // role holds something no role it can become gives it
	for _, w := range own {
		direct = direct || (!fromPublic[w] && !explained[w])
	}
	if len(own) == 0 && len(vias) == 0 {
		return ""
	}
	var can, fix []string
	if len(own) > 0 {
		can = append(can, listed(own))
	}
	ownSet := map[string]bool{}
	for _, w := range own {
		ownSet[w] = true
	}
	for _, v := range vias {
		var extra []string // what role itself does not hold (NOINHERIT, ownership)
		for _, w := range byVia[v] {
			if !ownSet[w] {
				extra = append(extra, w)
			}
		}
		if len(extra) == 0 {
			can = append(can, "through role "+v)
		} else {
			can = append(can, "through role "+v+": "+listed(extra))
		}
	}
	if ledgerRole == role {
		fix = append(fix, "ledger_upstream connects as the same role: give the ledger a role of its own, see docs/operations.md")
	} else {
		if owner {
			to := "the ledger role"
			if ledgerRole != "" {
				to = quoteIdent(ledgerRole)
			}
			fix = append(fix, "ALTER SCHEMA dpproxy OWNER TO "+to)
		}
		var from []string
		if len(fromPublic) > 0 {
			from = append(from, "PUBLIC")
		}
		if direct {
			from = append(from, quoteIdent(role))
		}
		if len(from) > 0 {
			fix = append(fix, "REVOKE ALL ON SCHEMA dpproxy FROM "+strings.Join(from, ", "))
		}
		for _, v := range vias {
			fix = append(fix, "REVOKE "+quoteIdent(v)+" FROM "+quoteIdent(role))
		}
	}
	return fmt.Sprintf("role %s can reach the ledger (%s), so a statement on a query connection could change budgets; the query role must reach nothing in schema dpproxy (%s)",
		role, strings.Join(can, "; "), strings.Join(fix, "; "))
}
