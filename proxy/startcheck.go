package proxy

import (
	"errors"
	"fmt"
	"sort"

	"github.com/dpproxy/dpproxy/conf"
)

// configuredColumnsExist is serve's part of check-config's catalog check
// (check.go's table): every configured table exists upstream, and so do
// each private table's privacy unit and configured columns. types are the
// configured tables' columns as read at start ("schema.table.column", the
// analyzer's ColumnTypes). A proxy that started without them would refuse
// or fail every query on that table instead of saying why once.
func configuredColumnsExist(cfg *conf.Config, types map[string]string) error {
	tables := map[string]bool{}
	for col := range types {
		for i := len(col) - 1; i >= 0; i-- {
			if col[i] == '.' {
				tables[col[:i]] = true
				break
			}
		}
	}
	names := make([]string, 0, len(cfg.Tables))
	for k := range cfg.Tables {
		names = append(names, k)
	}
	sort.Strings(names)
	var problems []error
	problem := func(key, format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s: %s", cfg.Where(key), key, fmt.Sprintf(format, args...)))
	}
	for _, name := range names {
		t := cfg.Tables[name]
		key := "tables." + name
		qn := t.QualifiedName()
		if !tables[qn] {
			problem(key, "no such table or view %s in the upstream database", qn)
			continue
		}
		if t.Public {
			continue
		}
		if _, ok := types[qn+"."+t.PrivacyUnit]; !ok {
			problem(key+".privacy_unit", "column %q does not exist in %s", t.PrivacyUnit, qn)
		}
		cols := make([]string, 0, len(t.Columns))
		for c := range t.Columns {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		for _, c := range cols {
			if _, ok := types[qn+"."+c]; !ok {
				problem(key+".columns."+c, "column does not exist in %s", qn)
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("proxy: the configuration does not match the upstream (dpproxy check-config lists every problem):\n%w", errors.Join(problems...))
}
