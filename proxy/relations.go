package proxy

import (
	"context"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// relations reads the configured tables' columns and unique keys from the
// upstream, once at start: the rewrite joins a private table with a public
// one only on a unique key of the latter (rewrite/joins.go), so that one
// person's rows cannot multiply a query's work. A key added later is
// known after a restart; one dropped later (the only unsafe change) needs
// DDL on a public table, which the operator controls.
func relations(ctx context.Context, pool querier, cfg *conf.Config) (map[string]*rewrite.Relation, error) {
	names := make([]string, 0, len(cfg.Tables))
	for _, t := range cfg.Tables {
		names = append(names, t.QualifiedName())
	}
	rels := map[string]*rewrite.Relation{}
	rel := func(name string) *rewrite.Relation {
		r := rels[name]
		if r == nil {
			r = &rewrite.Relation{Columns: map[string]string{}}
			rels[name] = r
		}
		return r
	}
	rows, err := pool.Query(ctx, rewrite.RelationColumnsSQL, names)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name, col, typ string
		if err := rows.Scan(&name, &col, &typ); err != nil {
			rows.Close()
			return nil, err
		}
		rel(name).Columns[col] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = pool.Query(ctx, rewrite.UniqueKeysSQL, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var key []string
		if err := rows.Scan(&name, &key); err != nil {
			return nil, err
		}
		rel(name).UniqueKeys = append(rel(name).UniqueKeys, key)
	}
	return rels, rows.Err()
}
