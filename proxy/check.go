package proxy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
)

// numericTypes are the column types clamping bounds fit.
var numericTypes = map[string]bool{
	"smallint": true, "integer": true, "bigint": true, "numeric": true, "real": true, "double precision": true,
}

// CheckSchema connects to the upstream and checks every configured table
// and column against it. It returns a readable report and an error joining
// every problem found.
func CheckSchema(ctx context.Context, cfg *conf.Config) (report []string, err error) {
	conn, err := pgx.Connect(ctx, cfg.Upstream.Reveal())
	if err != nil {
		return nil, errors.New("upstream: cannot connect with the configured URL (is the server running, are the credentials right?)")
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err == nil {
		report = append(report, "upstream: PostgreSQL "+version)
	}
	var problems []error
	names := make([]string, 0, len(cfg.Tables))
	for k := range cfg.Tables {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		t := cfg.Tables[name]
		key := "tables." + name
		rows, err := conn.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
			WHERE table_schema = $1 AND table_name = $2`, t.Schema, t.Name)
		if err != nil {
			return report, fmt.Errorf("%s: reading the catalog: %w", key, err)
		}
		cols := map[string]string{}
		for rows.Next() {
			var c, typ string
			if err := rows.Scan(&c, &typ); err != nil {
				return report, err
			}
			cols[c] = typ
		}
		if err := rows.Err(); err != nil {
			return report, err
		}
		if len(cols) == 0 {
			problems = append(problems, fmt.Errorf("%s: %s: no such table (or the proxy's role cannot see it)", cfg.Path, key))
			continue
		}
		if t.Public {
			report = append(report, fmt.Sprintf("%s: public, %d columns", t.QualifiedName(), len(cols)))
			continue
		}
		if _, ok := cols[t.PrivacyUnit]; !ok {
			problems = append(problems, fmt.Errorf("%s: %s.privacy_unit: column %q does not exist", cfg.Path, key, t.PrivacyUnit))
		}
		var desc []string
		colNames := make([]string, 0, len(t.Columns))
		for c := range t.Columns {
			colNames = append(colNames, c)
		}
		sort.Strings(colNames)
		for _, c := range colNames {
			col := t.Columns[c]
			typ, ok := cols[c]
			if !ok {
				problems = append(problems, fmt.Errorf("%s: %s.columns.%s: column does not exist", cfg.Path, key, c))
				continue
			}
			if col.HasBounds() {
				if !numericTypes[typ] {
					problems = append(problems, fmt.Errorf("%s: %s.columns.%s: bounds need a numeric column, the column is %s", cfg.Path, key, c, typ))
				}
				desc = append(desc, fmt.Sprintf("%s in [%v, %v]", c, *col.Lower, *col.Upper))
			}
			if col.PublicValues != nil {
				desc = append(desc, fmt.Sprintf("%s public values %s", c, strings.Join(col.PublicValues, ", ")))
			}
		}
		report = append(report, fmt.Sprintf("%s: private, unit %s, at most %d groups and %d rows per unit per group; %s",
			t.QualifiedName(), t.PrivacyUnit, t.MaxGroupsPerUnit, t.MaxRowsPerUnit, strings.Join(desc, "; ")))
	}
	return report, errors.Join(problems...)
}
