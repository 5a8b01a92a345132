package rewrite

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The analyst as the session's user. Every statement runs upstream under
// the proxy's query role, so current_user, session_user, user and
// current_role (SQLValueFunction nodes) and the functions
// pg_catalog.current_user() and session_user() would name that role, not
// the analyst who connected. A pass-through statement's deparse reads them
// instead from a setting of the upstream session, AnalystSetting, which
// the proxy sets to the analyst's name for each session (proxy/begin.go):
// the analysis, cached and shared by all analysts (proxy/parsecache.go),
// holds the same text for everyone, and each session's value is its own.
// Clients cannot set it (SET of an unlisted setting is refused, session.go);
// current_setting may read it (the reader's own name), so that the
// deparse, analysed again, is itself (funcAllowed).
//
// pg_backend_pid() likewise reads BackendPIDSetting: the process id the
// proxy gave the client in BackendKeyData, not the upstream backend's,
// which the session's upstream connection serves to other sessions too
// (Superset's SQL Lab asks for it before every query, as a cancel id).
//
// Other ways to see the upstream role are refused elsewhere:
// current_setting('role') and ('session_authorization') (not readable),
// SET ROLE and SET SESSION AUTHORIZATION (refusedSettingReasons),
// the pg_stat_activity family (allowlists.go). In a
// query over a private table, current_user is refused (hoist.go): it is
// no date/time constant.

// AnalystSetting is the upstream setting that holds the analyst's name,
// BackendPIDSetting the session's process id as the client knows it.
const (
	AnalystSetting    = "dpproxy.analyst"
	BackendPIDSetting = "dpproxy.backend_pid"
)

// analystExpr is what a session-user function becomes: the setting, cast
// to the functions' type, name.
var analystExpr = settingExpr(AnalystSetting, "name")

// backendPIDExpr is what pg_backend_pid() becomes.
var backendPIDExpr = settingExpr(BackendPIDSetting, "int4")

func settingExpr(setting, typ string) *pg_query.Node {
	tree, err := pg_query.Parse("SELECT pg_catalog.current_setting('" + setting + "')::pg_catalog." + typ)
	if err != nil {
		panic(err)
	}
	n := tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
	clearLocations(n.ProtoReflect())
	return n
}

// UsesAnalyst reports whether a pass-through statement's deparse reads
// AnalystSetting or BackendPIDSetting (a false positive costs the proxy
// one round trip).
func UsesAnalyst(sql string) bool {
	return strings.Contains(sql, "'"+AnalystSetting+"'") || strings.Contains(sql, "'"+BackendPIDSetting+"'")
}

// isBackendPID reports whether n is pg_backend_pid().
func isBackendPID(n *pg_query.Node) bool {
	fc := n.GetFuncCall()
	if fc == nil {
		return false
	}
	schema, name := funcName(fc)
	return (schema == "" || schema == "pg_catalog") && name == "pg_backend_pid" &&
		len(fc.Args) == 0 && fc.AggFilter == nil && fc.Over == nil && !fc.AggStar && !fc.AggDistinct
}

// sessionUserColumn is the column name PostgreSQL gives n when n names
// the session's user, "" when it does not.
func sessionUserColumn(n *pg_query.Node) string {
	switch x := n.GetNode().(type) {
	case *pg_query.Node_SqlvalueFunction:
		switch x.SqlvalueFunction.Op {
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_USER:
			return "current_user"
		case pg_query.SQLValueFunctionOp_SVFOP_SESSION_USER:
			return "session_user"
		case pg_query.SQLValueFunctionOp_SVFOP_USER:
			return "user"
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:
			return "current_role"
		}
	case *pg_query.Node_FuncCall:
		fc := x.FuncCall
		schema, name := funcName(fc)
		if (schema == "" || schema == "pg_catalog") && (name == "current_user" || name == "session_user") &&
			len(fc.Args) == 0 && fc.AggFilter == nil && fc.Over == nil && !fc.AggStar && !fc.AggDistinct {
			return name
		}
	}
	return ""
}

// substituteSessionUser replaces, in a pass-through statement about to
// be deparsed, every session-user function by analystExpr, and names the
// output columns they were as PostgreSQL would have.
func substituteSessionUser(n *pg_query.Node) {
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg_query.ResTarget:
			if x.Name == "" && x.Val != nil {
				if col := sessionUserColumn(x.Val); col != "" {
					x.Name = col
				} else if isBackendPID(x.Val) {
					x.Name = "pg_backend_pid"
				}
			}
		case *pg_query.FuncCall:
			// has_table_privilege(current_user, ...) and the like ask
			// what the statement may read: the upstream role's
			// privileges, which are the analyst's through the proxy.
			// The analyst's name is no role upstream.
			if _, name := funcName(x); privilegeFuncs(name) {
				return false
			}
		case *pg_query.Node:
			if sessionUserColumn(x) != "" {
				x.Node = proto.Clone(analystExpr).(*pg_query.Node).Node
				return false
			}
			if isBackendPID(x) {
				x.Node = proto.Clone(backendPIDExpr).(*pg_query.Node).Node
				return false
			}
		}
		return true
	})
}

// privilegeFuncs reports whether a function takes a role and answers
// about its privileges: its session-user arguments stay the upstream's.
func privilegeFuncs(name string) bool {
	return name == "pg_has_role" || strings.HasPrefix(name, "has_") && strings.HasSuffix(name, "_privilege")
}

// isAnalystSetting reports whether a constant names AnalystSetting or
// BackendPIDSetting: the settings outside readableSettings that
// current_setting may read (each holds what the reader already knows).
func isAnalystSetting(c *pg_query.A_Const) bool {
	s := strings.ToLower(c.GetSval().GetSval())
	return s == AnalystSetting || s == BackendPIDSetting
}
