package proxy

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// withTablePublicValues returns cfg, or a copy of it in which every column
// whose public_values names a public table's column
// (conf.Column.PublicValuesFrom) has that column's distinct non-NULL
// values as its PublicValues, read once, when the proxy starts, with the
// rewrite's own statement (rewrite.PublicKeysSQL). From then on the key
// behaves exactly as with that literal list: a value added to the table
// later is not released (the key's rows with it are filtered out) and a
// value removed is still released, with noised zeros, until a restart.
// More than rewrite.MaxPublicTableKeys values, or none, is a start-up
// error, as an empty literal list is a configuration error. cfg itself is
// never modified (it is read-only and may be shared).
func withTablePublicValues(ctx context.Context, q querier, cfg *conf.Config) (*conf.Config, error) {
	var out *conf.Config
	for tn, t := range cfg.Tables {
		for cn, col := range t.Columns {
			f := col.PublicValuesFrom
			if f == nil {
				continue
			}
			key := "tables." + tn + ".columns." + cn + ".public_values"
			vals, err := readColumnValues(ctx, q, f)
			if err != nil {
				return nil, fmt.Errorf("proxy: %s: reading %s.%s: %w", key, f.Table, f.Column, err)
			}
			if len(vals) == 0 || len(vals) > rewrite.MaxPublicTableKeys {
				return nil, fmt.Errorf("proxy: %s: %s.%s has %s values; public values need 1 to %d", key, f.Table, f.Column, countWord(len(vals)), rewrite.MaxPublicTableKeys)
			}
			if out == nil {
				c := *cfg
				c.Tables = make(map[string]*conf.Table, len(cfg.Tables))
				for k, v := range cfg.Tables {
					c.Tables[k] = v
				}
				out = &c
			}
			nt := *out.Tables[tn]
			nt.Columns = make(map[string]*conf.Column, len(t.Columns))
			for k, v := range out.Tables[tn].Columns {
				nt.Columns[k] = v
			}
			nc := *col
			nc.PublicValues = vals
			nt.Columns[cn] = &nc
			out.Tables[tn] = &nt
		}
	}
	if out == nil {
		return cfg, nil
	}
	return out, nil
}

func countWord(n int) string {
	if n > rewrite.MaxPublicTableKeys {
		return fmt.Sprintf("more than %d", rewrite.MaxPublicTableKeys)
	}
	return fmt.Sprint(n)
}

// readColumnValues reads at most MaxPublicTableKeys+1 distinct non-NULL
// values of f's column, as text.
func readColumnValues(ctx context.Context, q querier, f *conf.PublicValuesFrom) ([]string, error) {
	schema, name, _ := strings.Cut(f.Table, ".")
	sql, err := rewrite.PublicKeysSQL(schema, name, f.Column)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, sql, pgx.QueryResultFormats{pgx.TextFormatCode}, int64(rewrite.MaxPublicTableKeys+1))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var vals []string
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 1 || raw[0] == nil {
			return nil, fmt.Errorf("malformed row")
		}
		vals = append(vals, string(raw[0]))
	}
	return vals, rows.Err()
}
