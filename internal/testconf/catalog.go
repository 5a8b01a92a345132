package testconf

import (
	_ "embed"

	"gopkg.in/yaml.v3"
)

//go:embed catalog.yaml
var catalogFile []byte

// Relation is what the upstream's catalog says about one table: its
// columns and their types, and its unique keys. (rewrite.Relation has the
// same fields; this package cannot import rewrite, whose own tests use it.)
type Relation struct {
	Columns    map[string]string `yaml:"columns"`
	UniqueKeys [][]string        `yaml:"unique_keys"`
}

// Catalog is what the rewriter's tests take the upstream's catalog to
// say about the tables of the Rewrite entry (catalog.yaml): the relations
// by qualified name, and the column types ("schema.table.column" to the
// internal type name). Each call returns fresh maps.
func Catalog() (relations map[string]Relation, columnTypes map[string]string) {
	var c struct {
		Relations   map[string]Relation `yaml:"relations"`
		ColumnTypes map[string]string   `yaml:"column_types"`
	}
	if err := yaml.Unmarshal(catalogFile, &c); err != nil {
		panic("testconf: catalog.yaml: " + err.Error())
	}
	return c.Relations, c.ColumnTypes
}
