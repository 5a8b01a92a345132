package rewrite

import (
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// COPY (query) TO STDOUT, which psql's \copy (SELECT …) TO 'file' sends.
// The query is analysed as the SELECT it holds: a DP query is answered,
// noised and charged as that SELECT would be, a pass-through query is run
// as its deparse; either way the proxy writes the COPY stream itself from
// the released or relayed rows (proxy/copyout.go), so nothing of COPY
// reaches the upstream. Every other COPY is refused: FROM and to a file
// or program (they write or reach the server's files), binary format. COPY
// of a table is COPY (SELECT * FROM table).

// CopyOut is the format of a COPY (query) TO STDOUT, as PostgreSQL would
// write it.
type CopyOut struct {
	CSV       bool
	Header    bool
	Delimiter byte
	Null      string
	Quote     byte // CSV only
	Escape    byte // CSV only
}

func (a *Analyzer) copyStmt(c *pg_query.CopyStmt, text string) (*Statement, error) {
	if c.IsFrom {
		return nil, reject(pgerr.InsufficientPrivilege, -1, "COPY FROM is refused: writes are refused")
	}
	if c.Filename != "" || c.IsProgram {
		return nil, reject(pgerr.InsufficientPrivilege, -1, "COPY to a server file or program is refused").
			WithHint("Use COPY (SELECT ...) TO STDOUT, or psql's \\copy (SELECT ...) TO 'file', which writes on the client.")
	}
	query := c.Query
	if query == nil {
		// COPY table [(columns)] TO: its rows, as the SELECT would read
		// them, and refused as that SELECT is (a private table's rows).
		// A new node: the client's tree is never modified.
		query = copyTableQuery(c)
	}
	if query.GetSelectStmt() == nil {
		return nil, reject(pgerr.InsufficientPrivilege, -1, "writes and DDL are refused: COPY of %s is not allowed", stmtName(query))
	}
	out, err := copyOptions(c.Options)
	if err != nil {
		return nil, err
	}
	st, err := a.selectStmt(query, text)
	if err != nil {
		return nil, err
	}
	st.Copy = out
	return st, nil
}

// copyTableQuery is SELECT columns FROM table, for COPY table (columns).
func copyTableQuery(c *pg_query.CopyStmt) *pg_query.Node {
	var targets []*pg_query.Node
	col := func(f *pg_query.Node) *pg_query.Node {
		return &pg_query.Node{Node: &pg_query.Node_ResTarget{ResTarget: &pg_query.ResTarget{Location: -1,
			Val: &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{Fields: []*pg_query.Node{proto.Clone(f).(*pg_query.Node)}, Location: -1}}}}}}
	}
	for _, a := range c.Attlist {
		targets = append(targets, col(a))
	}
	if len(targets) == 0 {
		targets = []*pg_query.Node{col(&pg_query.Node{Node: &pg_query.Node_AStar{AStar: &pg_query.A_Star{}}})}
	}
	return &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: &pg_query.SelectStmt{
		TargetList:  targets,
		FromClause:  []*pg_query.Node{{Node: &pg_query.Node_RangeVar{RangeVar: proto.Clone(c.Relation).(*pg_query.RangeVar)}}},
		LimitOption: pg_query.LimitOption_LIMIT_OPTION_DEFAULT,
		Op:          pg_query.SetOperation_SETOP_NONE,
	}}}
}

// copyOptions reads COPY's options, old and new syntax alike.
func copyOptions(opts []*pg_query.Node) (*CopyOut, error) {
	out := &CopyOut{Delimiter: '\t', Null: `\N`}
	var delim, null, quote, escape *string
	for _, o := range opts {
		d := o.GetDefElem()
		if d == nil {
			return nil, reject(pgerr.FeatureNotSupported, -1, "COPY option not supported")
		}
		v := defString(d.Arg)
		switch strings.ToLower(d.Defname) {
		case "format":
			switch strings.ToLower(v) {
			case "text":
			case "csv":
				out.CSV = true
			default:
				return nil, reject(pgerr.FeatureNotSupported, d.Location, "COPY format %s is not supported: use text or csv", v)
			}
		case "header":
			switch strings.ToLower(v) {
			case "true", "on", "1":
				out.Header = true
			case "false", "off", "0":
			default:
				return nil, reject(pgerr.InvalidParameterValue, d.Location, "header requires a Boolean value")
			}
		case "delimiter":
			delim = &v
		case "null":
			null = &v
		case "quote":
			quote = &v
		case "escape":
			escape = &v
		case "encoding":
			if n := strings.ToLower(strings.ReplaceAll(v, "-", "")); n != "utf8" {
				return nil, reject(pgerr.FeatureNotSupported, d.Location, "COPY encoding %s is not supported: dpproxy writes UTF8", v)
			}
		default:
			return nil, reject(pgerr.FeatureNotSupported, d.Location, "COPY option %s is not supported: format, header, delimiter, null, quote, escape and encoding are", d.Defname)
		}
	}
	if out.CSV {
		out.Delimiter, out.Null, out.Quote, out.Escape = ',', "", '"', 0
	}
	oneByte := func(name string, v *string, dst *byte) error {
		if v == nil {
			return nil
		}
		if len(*v) != 1 || (*v)[0] >= 0x80 || (*v)[0] == '\r' || (*v)[0] == '\n' {
			return reject(pgerr.InvalidParameterValue, -1, "COPY %s must be a single one-byte character other than a line break", name)
		}
		*dst = (*v)[0]
		return nil
	}
	if err := oneByte("delimiter", delim, &out.Delimiter); err != nil {
		return nil, err
	}
	if !out.CSV && (quote != nil || escape != nil) {
		return nil, reject(pgerr.FeatureNotSupported, -1, "COPY quote and escape are available only in CSV mode")
	}
	if err := oneByte("quote", quote, &out.Quote); err != nil {
		return nil, err
	}
	if err := oneByte("escape", escape, &out.Escape); err != nil {
		return nil, err
	}
	if out.CSV && out.Escape == 0 {
		out.Escape = out.Quote
	}
	if null != nil {
		if strings.ContainsAny(*null, "\r\n") {
			return nil, reject(pgerr.InvalidParameterValue, -1, "COPY null representation cannot use newline or carriage return")
		}
		out.Null = *null
	}
	if !out.CSV && strings.IndexByte("\\.abcdefghijklmnopqrstuvwxyz0123456789", out.Delimiter) >= 0 {
		return nil, reject(pgerr.InvalidParameterValue, -1, "COPY delimiter cannot be %q", string(out.Delimiter))
	}
	if out.CSV && out.Delimiter == out.Quote {
		return nil, reject(pgerr.InvalidParameterValue, -1, "COPY delimiter and quote must be different")
	}
	if strings.IndexByte(out.Null, out.Delimiter) >= 0 {
		return nil, reject(pgerr.InvalidParameterValue, -1, "COPY delimiter must not appear in the NULL specification")
	}
	return out, nil
}

// defString is a DefElem's argument as text; none means true.
func defString(n *pg_query.Node) string {
	switch x := n.GetNode().(type) {
	case nil:
		return "true"
	case *pg_query.Node_String_:
		return x.String_.Sval
	case *pg_query.Node_Boolean:
		return strconv.FormatBool(x.Boolean.Boolval)
	case *pg_query.Node_Integer:
		return strconv.Itoa(int(x.Integer.Ival))
	}
	return ""
}
