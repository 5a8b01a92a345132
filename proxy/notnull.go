package proxy

import (
	"context"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// notNullColumns reads the configured tables' columns declared NOT NULL
// (rewrite.NotNullSQL): COUNT(*) then counts the same rows as COUNT(col),
// so an AVG(col) can be derived from a SUM(col) and COUNT(*) of the same
// query (rewrite/derive.go).
func notNullColumns(ctx context.Context, q querier, cfg *conf.Config) (map[string]bool, error) {
	var names []string
	for _, t := range cfg.Tables {
		names = append(names, t.QualifiedName())
	}
	rows, err := q.Query(ctx, rewrite.NotNullSQL, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var col string
		if err := rows.Scan(&col); err != nil {
			return nil, err
		}
		cols[col] = true
	}
	return cols, rows.Err()
}
