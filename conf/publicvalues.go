package conf

import (
	"fmt"
	"sort"

	"gopkg.in/yaml.v3"
)

// public_values as a public table's column (issue 16, item 4):
//
//	region: {public_values: {table: public.regions, column: name}}
//
// The proxy reads the column's distinct non-NULL values once, when it
// starts (before it serves anyone), and the key then behaves exactly as
// with that literal list. The table must be configured public.

// PublicValuesFrom names the public table's column whose values are a
// column's public values.
type PublicValuesFrom struct {
	// Table is schema.table as configured (lower case, schema filled in
	// by Load); Column the column's name.
	Table, Column string
}

// PublicValuesYAML is public_values as written: a list of strings, or a
// mapping with table and column. Load copies it into Column.PublicValues
// or Column.PublicValuesFrom.
type PublicValuesYAML struct {
	set    bool
	values []string
	from   *PublicValuesFrom
}

// UnmarshalYAML accepts a sequence of strings or {table, column} and
// nothing else.
func (v *PublicValuesYAML) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.SequenceNode:
		vals := []string{}
		if err := n.Decode(&vals); err != nil {
			return err
		}
		*v = PublicValuesYAML{set: true, values: vals}
		return nil
	case yaml.MappingNode:
		from := &PublicValuesFrom{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			var dst *string
			switch k.Value {
			case "table":
				dst = &from.Table
			case "column":
				dst = &from.Column
			default:
				return fmt.Errorf("line %d: public_values: unknown key %q: give a list of values, or table and column", k.Line, k.Value)
			}
			if val.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: public_values.%s: want a name", val.Line, k.Value)
			}
			*dst = val.Value
		}
		*v = PublicValuesYAML{set: true, from: from}
		return nil
	}
	return fmt.Errorf("line %d: public_values: give a list of values, or table and column", n.Line)
}

// IsZero reports whether public_values was absent (omitempty).
func (v PublicValuesYAML) IsZero() bool { return !v.set }

// MarshalYAML writes the list or the mapping back.
func (v PublicValuesYAML) MarshalYAML() (any, error) {
	if v.from != nil {
		return map[string]string{"table": v.from.Table, "column": v.from.Column}, nil
	}
	if !v.set {
		return nil, nil
	}
	return v.values, nil
}

// applyPublicValuesYAML copies public_values as written into the fields
// the rest of dpproxy reads.
func (c *Column) applyPublicValuesYAML() {
	if !c.PublicValuesYAML.set {
		return
	}
	c.PublicValues, c.PublicValuesFrom = c.PublicValuesYAML.values, c.PublicValuesYAML.from
}

// validatePublicValuesFrom checks every public_values that names a table's
// column: the table must be configured public, the column a name.
func validatePublicValuesFrom(p *problems, tables map[string]*Table) {
	names := make([]string, 0, len(tables))
	for k := range tables {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, tn := range names {
		t := tables[tn]
		cols := make([]string, 0, len(t.Columns))
		for k := range t.Columns {
			cols = append(cols, k)
		}
		sort.Strings(cols)
		for _, cn := range cols {
			from := t.Columns[cn].PublicValuesFrom
			if from == nil {
				continue
			}
			key := "tables." + tn + ".columns." + cn + ".public_values"
			schema, name, ok := splitTableName(from.Table)
			switch {
			case from.Table == "":
				p.add(key+".table", "missing: name a table configured with public: true")
			case !ok:
				p.add(key+".table", "%q is not a table name: use schema.table or table", from.Table)
			case tables[schema+"."+name] == nil || !tables[schema+"."+name].Public:
				p.add(key+".table", "%s is not configured as a public table (public: true): only a public table's values may be released as group keys", schema+"."+name)
			default:
				from.Table = schema + "." + name
			}
			if !isIdent(from.Column) {
				p.add(key+".column", "%q is not a column name", from.Column)
			}
		}
	}
}
