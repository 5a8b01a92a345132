package rewrite

import (
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// harmlessSettings may be SET and RESET by a client: they change how
// results are formatted or how long statements may run, never which rows
// are read nor how the database samples.
var harmlessSettings = map[string]bool{
	"application_name":                    true,
	"client_encoding":                     true,
	"datestyle":                           true,
	"intervalstyle":                       true,
	"timezone":                            true,
	"extra_float_digits":                  true,
	"statement_timeout":                   true,
	"lock_timeout":                        true,
	"idle_in_transaction_session_timeout": true,
	"client_min_messages":                 true,
	"bytea_output":                        true,
}

// refusedSettingReasons explain the refusal of some well-known settings.
var refusedSettingReasons = map[string]string{
	"seed":                          "it could steer sampling inside the database",
	"search_path":                   "it could redirect table names",
	"role":                          "it would change the upstream role",
	"session_authorization":         "it would change the upstream role",
	"default_transaction_read_only": "the upstream session must stay read-only",
	"transaction_read_only":         "the upstream session must stay read-only",
	"standard_conforming_strings":   "it changes how the rewritten SQL is read",
}

func settingRefused(name string, loc int32) error {
	reason, ok := refusedSettingReasons[name]
	if !ok {
		reason = "only " + allowedSettingsList() + " may be set"
	}
	return reject(CodeForbidden, loc, "setting %q is not allowed: %s", name, reason)
}

func allowedSettingsList() string {
	names := []string{"application_name", "client_encoding", "DateStyle", "IntervalStyle", "TimeZone",
		"extra_float_digits", "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
		"client_min_messages", "bytea_output"}
	return strings.Join(names, ", ")
}

// setStmt handles SET, SET LOCAL, RESET and RESET ALL.
func setStmt(n *pg_query.VariableSetStmt, text string) (*Statement, error) {
	name := strings.ToLower(n.Name)
	if dpName, ok := strings.CutPrefix(name, "dp."); ok {
		return setDP(n, dpName)
	}
	switch n.Kind {
	case pg_query.VariableSetKind_VAR_RESET_ALL:
		return &Statement{Kind: KindPassThrough, SQL: text}, nil
	case pg_query.VariableSetKind_VAR_SET_MULTI:
		switch name {
		case "transaction", "session characteristics":
			if err := transactionOptions(n.Args); err != nil {
				return nil, err
			}
			return &Statement{Kind: KindPassThrough, SQL: text}, nil
		}
		return nil, reject(CodeForbidden, -1, "SET %s is not allowed", strings.ToUpper(n.Name))
	}
	if !harmlessSettings[name] {
		return nil, settingRefused(name, -1)
	}
	return &Statement{Kind: KindPassThrough, SQL: text}, nil
}

func setDP(n *pg_query.VariableSetStmt, name string) (*Statement, error) {
	if name == "" {
		return nil, reject(CodeSyntax, -1, "SET dp. needs a setting name, such as dp.epsilon")
	}
	if n.IsLocal {
		return nil, reject(CodeUnsupported, -1, "SET LOCAL dp.%s is not supported: dp settings last for the session", name)
	}
	st := &Statement{Kind: KindSetDP, Tag: "SET", Setting: &Setting{Name: name}}
	switch n.Kind {
	case pg_query.VariableSetKind_VAR_SET_VALUE:
		vals := make([]string, 0, len(n.Args))
		for _, arg := range n.Args {
			c := arg.GetAConst()
			if c == nil || c.Isnull {
				return nil, reject(CodeUnsupported, -1, "SET dp.%s takes a constant value", name)
			}
			vals = append(vals, constString(c))
		}
		st.Setting.Value = strings.Join(vals, ", ")
	case pg_query.VariableSetKind_VAR_SET_DEFAULT:
		st.Setting.Reset = true
	case pg_query.VariableSetKind_VAR_RESET:
		st.Tag = "RESET"
		st.Setting.Reset = true
	default:
		return nil, reject(CodeUnsupported, -1, "this form of SET dp.%s is not supported", name)
	}
	return st, nil
}

// constString is a constant as written (numbers keep their spelling).
func constString(c *pg_query.A_Const) string {
	switch v := c.Val.(type) {
	case *pg_query.A_Const_Ival:
		return strconv.FormatInt(int64(v.Ival.Ival), 10)
	case *pg_query.A_Const_Fval:
		return v.Fval.Fval
	case *pg_query.A_Const_Sval:
		return v.Sval.Sval
	case *pg_query.A_Const_Boolval:
		return strconv.FormatBool(v.Boolval.Boolval)
	case *pg_query.A_Const_Bsval:
		return v.Bsval.Bsval
	}
	return ""
}

func showStmt(n *pg_query.VariableShowStmt, text string) (*Statement, error) {
	name := strings.ToLower(n.Name)
	if dpName, ok := strings.CutPrefix(name, "dp."); ok {
		if dpName == "" {
			return nil, reject(CodeSyntax, -1, "SHOW dp. needs a setting name, such as dp.budget")
		}
		return &Statement{Kind: KindShowDP, Tag: "SHOW", Setting: &Setting{Name: dpName}}, nil
	}
	return &Statement{Kind: KindPassThrough, SQL: text}, nil
}

func transactionStmt(n *pg_query.TransactionStmt, text string) (*Statement, error) {
	switch n.Kind {
	case pg_query.TransactionStmtKind_TRANS_STMT_BEGIN, pg_query.TransactionStmtKind_TRANS_STMT_START:
		if err := transactionOptions(n.Options); err != nil {
			return nil, err
		}
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT, pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK,
		pg_query.TransactionStmtKind_TRANS_STMT_SAVEPOINT, pg_query.TransactionStmtKind_TRANS_STMT_RELEASE,
		pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
	default:
		return nil, reject(CodeForbidden, -1, "two-phase commit (PREPARE TRANSACTION, COMMIT PREPARED, ROLLBACK PREPARED) is refused")
	}
	return &Statement{Kind: KindPassThrough, SQL: text}, nil
}

// transactionOptions allows isolation levels, READ ONLY and DEFERRABLE.
func transactionOptions(opts []*pg_query.Node) error {
	for _, o := range opts {
		d := o.GetDefElem()
		if d == nil {
			return reject(CodeUnsupported, -1, "unexpected transaction option")
		}
		switch d.Defname {
		case "transaction_isolation", "transaction_deferrable":
		case "transaction_read_only":
			if c := d.Arg.GetAConst(); c == nil || c.GetIval().GetIval() != 1 {
				return reject(CodeForbidden, d.Location, "READ WRITE transactions are refused: dpproxy sessions are read-only")
			}
		default:
			return reject(CodeUnsupported, d.Location, "transaction option %q is not supported", d.Defname)
		}
	}
	return nil
}
