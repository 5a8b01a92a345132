package proxy

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/rewrite"
)

func TestPostSQLOnlyReadsReleasedValues(t *testing.T) {
	plan := &rewrite.Plan{Limit: 2, Offset: 1, Post: &rewrite.Post{Targets: "dp.dp_c0 AS region, dp.dp_c1 * 2 AS c2", Where: "dp.dp_c1 > 5", OrderBy: "dp.dp_c1 DESC"}}
	a := &answer{
		fields: []pgproto3.FieldDescription{{Name: []byte("region"), DataTypeOID: 25}, {Name: []byte("count"), DataTypeOID: 20}},
		rows:   [][][]byte{{[]byte(`a"b\c`), []byte("7")}, {nil, []byte("3")}},
	}
	sql, params := postSQL(plan, a)
	want := `SELECT dp.dp_c0 AS region, dp.dp_c1 * 2 AS c2 FROM (SELECT u.c0::text AS dp_c0, u.c1::int8 AS dp_c1 FROM unnest($1::text[], $2::text[]) AS u(c0, c1)) AS dp WHERE dp.dp_c1 > 5 ORDER BY dp.dp_c1 DESC LIMIT 2 OFFSET 1`
	if sql != want {
		t.Errorf("postSQL =\n%s\nwant\n%s", sql, want)
	}
	if got := string(params[0]); got != `{"a\"b\\c",NULL}` {
		t.Errorf("array param = %s", got)
	}
	if strings.Contains(sql, "orders") {
		t.Error("post-processing SQL names a table")
	}
}
