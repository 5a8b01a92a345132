package rewrite

import (
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// RenderSettings are the settable settings that change how PostgreSQL
// renders or compares the values of an answer; the answer cache keys on
// their current values.
var RenderSettings = []string{"DateStyle", "IntervalStyle", "TimeZone", "extra_float_digits", "lc_monetary", "lc_numeric", "lc_time", "bytea_output"}

// RenderSettingsSQL reads the current values of RenderSettings as one
// text, the answer cache's Settings.
var RenderSettingsSQL = func() string {
	var b strings.Builder
	b.WriteString("SELECT pg_catalog.concat_ws(pg_catalog.chr(31)")
	for _, name := range RenderSettings {
		b.WriteString(", pg_catalog.current_setting('" + name + "')")
	}
	b.WriteString(")")
	return b.String()
}()

// SettableSetting reports whether a client may change the named setting
// (any case).
func SettableSetting(name string) bool { return settableSettings[strings.ToLower(name)] }

// SettingRefused is the refusal of a client's attempt to change a pinned
// or unknown setting; loc is a node location, or -1.
func SettingRefused(name string, loc int32) error {
	name = strings.ToLower(name)
	reason, ok := refusedSettingReasons[name]
	if !ok {
		reason = "only " + allowedSettingsList() + " may be set"
	}
	return reject(pgerr.InsufficientPrivilege, loc, "setting %q is not allowed: %s", name, reason)
}

func allowedSettingsList() string {
	names := []string{"application_name", "client_encoding (UTF8 only)", "DateStyle", "IntervalStyle", "TimeZone",
		"extra_float_digits", "lc_monetary", "lc_numeric", "lc_time", "bytea_output", "statement_timeout", "lock_timeout",
		"idle_in_transaction_session_timeout", "client_min_messages"}
	return strings.Join(names, ", ")
}

// CheckClientEncoding accepts a client encoding only if it is UTF-8 under
// one of the names PostgreSQL accepts for it. dpproxy parses every text as
// UTF-8 and its upstream connections always run with client_encoding UTF8:
// with another client encoding (SJIS, GBK, BIG5, ...) a multibyte
// character can end in the byte of a backslash or quote, and PostgreSQL
// would split the text where the proxy saw one string literal. SQL_ASCII
// is refused too: PostgreSQL would not check the client's bytes.
func CheckClientEncoding(value string) error {
	// PostgreSQL compares encoding names ignoring case and every character
	// that is not a letter or digit (pg_char_to_encoding).
	var b strings.Builder
	for _, r := range strings.ToLower(value) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	switch b.String() {
	case "utf8", "unicode":
		return nil
	}
	return reject(pgerr.FeatureNotSupported, -1, "client_encoding %q is not supported: dpproxy accepts only UTF8", value).
		WithHint("Set the client's encoding to UTF8 (PGCLIENTENCODING=UTF8, or SET client_encoding = 'UTF8').")
}

// setStmt handles SET, SET LOCAL, RESET and RESET ALL.
func setStmt(n *pg_query.VariableSetStmt, text string) (*Statement, error) {
	name := strings.ToLower(n.Name)
	if dpName, ok := strings.CutPrefix(name, "dp."); ok {
		return setDP(n, dpName)
	}
	if n.Kind == pg_query.VariableSetKind_VAR_SET_VALUE {
		// Only plain constants: pg_query's deparser crashes the whole
		// process (SIGSEGV in C) on SET TIME ZONE INTERVAL '+01:00'
		// without a qualifier (found by FuzzDifferential), and no
		// settable setting needs another form.
		for _, arg := range n.Args {
			if arg.GetAConst() == nil {
				return nil, reject(pgerr.FeatureNotSupported, -1, "SET %s takes a constant value (a string or a number)", name)
			}
		}
	}
	switch n.Kind {
	case pg_query.VariableSetKind_VAR_RESET_ALL:
		return &Statement{Kind: KindPassThrough, ChangesSettings: true}, nil
	case pg_query.VariableSetKind_VAR_SET_MULTI:
		switch name {
		case "transaction", "session characteristics":
			if err := transactionOptions(n.Args); err != nil {
				return nil, err
			}
			// SESSION CHARACTERISTICS sets default_transaction_isolation
			// (and _deferrable) for the session: read back and restored
			// like a SET (proxy/pool.go, proxy/replicas.go).
			return &Statement{Kind: KindPassThrough, ChangesSettings: name == "session characteristics"}, nil
		}
		return nil, reject(pgerr.InsufficientPrivilege, -1, "SET %s is not allowed", strings.ToUpper(n.Name))
	}
	if name == "client_encoding" {
		// SET client_encoding / SET NAMES: only UTF-8, which it already is.
		if n.Kind == pg_query.VariableSetKind_VAR_SET_VALUE {
			for _, arg := range n.Args {
				c := arg.GetAConst()
				if c == nil {
					return nil, reject(pgerr.FeatureNotSupported, -1, "SET client_encoding takes a constant value")
				}
				if err := CheckClientEncoding(constString(c)); err != nil {
					return nil, err
				}
			}
		}
		return &Statement{Kind: KindPassThrough, ChangesSettings: true}, nil
	}
	if !settableSettings[name] {
		return nil, SettingRefused(name, -1)
	}
	return &Statement{Kind: KindPassThrough, ChangesSettings: true}, nil
}

func setDP(n *pg_query.VariableSetStmt, name string) (*Statement, error) {
	if name == "" {
		return nil, reject(pgerr.SyntaxError, -1, "SET dp. needs a setting name, such as dp.epsilon")
	}
	if n.IsLocal {
		return nil, reject(pgerr.FeatureNotSupported, -1, "SET LOCAL dp.%s is not supported: dp settings last for the session", name)
	}
	st := &Statement{Kind: KindSetDP, Tag: "SET", Setting: &Setting{Name: name}}
	switch n.Kind {
	case pg_query.VariableSetKind_VAR_SET_VALUE:
		vals := make([]string, 0, len(n.Args))
		for _, arg := range n.Args {
			c := arg.GetAConst()
			if c == nil || c.Isnull {
				return nil, reject(pgerr.FeatureNotSupported, -1, "SET dp.%s takes a constant value", name)
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
		return nil, reject(pgerr.FeatureNotSupported, -1, "this form of SET dp.%s is not supported", name)
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
			return nil, reject(pgerr.SyntaxError, -1, "SHOW dp. needs a setting name, such as dp.budget")
		}
		return &Statement{Kind: KindShowDP, Tag: "SHOW", Setting: &Setting{Name: dpName}}, nil
	}
	// SHOW ALL and SHOW of server paths or other settings would reveal
	// what current_setting may not: the same list applies.
	if !readableSettings[name] {
		if name == "all" {
			return nil, reject(pgerr.InsufficientPrivilege, -1, "SHOW ALL is refused: only some settings may be read").
				WithHint("Settings that can be read: %s.", strings.Join(sortedKeys(readableSettings), ", "))
		}
		return nil, reject(pgerr.InsufficientPrivilege, -1, "SHOW %s is refused: this setting may not be read through dpproxy", name).
			WithHint("Settings that can be read: %s.", strings.Join(sortedKeys(readableSettings), ", "))
	}
	return &Statement{Kind: KindPassThrough}, nil
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
		return nil, reject(pgerr.InsufficientPrivilege, -1, "two-phase commit (PREPARE TRANSACTION, COMMIT PREPARED, ROLLBACK PREPARED) is refused")
	}
	// The end of a transaction (or of a savepoint) may undo SET LOCAL and
	// SETs made inside it.
	return &Statement{Kind: KindPassThrough, ChangesSettings: true}, nil
}

// transactionOptions allows isolation levels, READ ONLY and DEFERRABLE.
func transactionOptions(opts []*pg_query.Node) error {
	for _, o := range opts {
		d := o.GetDefElem()
		if d == nil {
			return reject(pgerr.FeatureNotSupported, -1, "unexpected transaction option")
		}
		switch d.Defname {
		case "transaction_isolation", "transaction_deferrable":
		case "transaction_read_only":
			if c := d.Arg.GetAConst(); c == nil || c.GetIval().GetIval() != 1 {
				return reject(pgerr.InsufficientPrivilege, d.Location, "READ WRITE transactions are refused: dpproxy sessions are read-only")
			}
		default:
			return reject(pgerr.FeatureNotSupported, d.Location, "transaction option %q is not supported", d.Defname)
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
