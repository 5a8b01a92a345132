package bounds

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dpproxy/dpproxy/conf"
)

// Provenance is how the written metadata was measured.
type Provenance struct {
	Exact   bool
	Epsilon float64 // of the run, DP mode
	At      string  // date
}

// Write sets, in the configuration file at path, each proposal's
// max_rows_per_unit, max_groups_per_unit and clamping bounds and their
// measured bias (tables.T.bias, columns.C.bias: public metadata, see
// conf/metadata.go). It edits the YAML tree, so comments and the order of
// keys stay; the result must load (conf.Parse) before it replaces the file.
func Write(path string, props []TableProposal, p Provenance) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("bounds: write: %w", err)
	}
	out, err := Edit(data, props, p)
	if err != nil {
		return fmt.Errorf("bounds: write %s: %w", path, err)
	}
	// Password variables need not be set to check the structure.
	if _, err := conf.Parse(path, out, func(string) string { return "set" }); err != nil {
		return fmt.Errorf("bounds: write %s: the edited configuration would not load: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bounds: write: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".dpproxy-bounds-*.yaml")
	if err != nil {
		return fmt.Errorf("bounds: write: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return fmt.Errorf("bounds: write: %w", err)
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return fmt.Errorf("bounds: write: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("bounds: write: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("bounds: write: %w", err)
	}
	return nil
}

// Edit is Write's pure part: the configuration text data with the
// proposals and their bias set.
func Edit(data []byte, props []TableProposal, p Provenance) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a YAML mapping")
	}
	tables := get(doc.Content[0], "tables")
	if tables == nil || tables.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("no tables section")
	}
	for _, t := range props {
		tn := findTable(tables, t.Table.QualifiedName())
		if tn == nil || tn.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("tables: %s not found as a mapping", t.Table.QualifiedName())
		}
		set(tn, "max_rows_per_unit", scalar(num(t.MaxRows.Bound)))
		set(tn, "max_groups_per_unit", scalar(strconv.FormatInt(t.MaxGroups, 10)))
		bias := mapping(false)
		if p.Exact {
			set(bias, "measured", scalar(conf.BiasExact))
		} else {
			set(bias, "measured", scalar(conf.BiasDP))
			set(bias, "epsilon", scalar(num(p.Epsilon)))
		}
		if p.At != "" {
			set(bias, "at", scalar(p.At))
		}
		set(bias, "max_rows_per_unit", scalar(num(t.MaxRows.Bound)))
		set(bias, "rows_dropped", scalar(shareText(t.MaxRows.DroppedShare)))
		if len(t.Groups) > 0 {
			set(bias, "max_groups_per_unit", scalar(strconv.FormatInt(t.MaxGroups, 10)))
			gd := mapping(true)
			for _, g := range t.Groups {
				set(gd, g.Column, scalar(shareText(t.GroupsDropped(g))))
			}
			set(bias, "groups_dropped", gd)
		}
		set(tn, "bias", bias)
		if len(t.Columns) == 0 {
			continue
		}
		cols := get(tn, "columns")
		if cols == nil || cols.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("tables: %s: no columns mapping", t.Table.QualifiedName())
		}
		for _, c := range t.Columns {
			cn := getFold(cols, c.Column)
			if cn == nil || cn.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("tables: %s: column %s not found as a mapping", t.Table.QualifiedName(), c.Column)
			}
			lo, hi := num(c.Chosen.Lower), num(c.Chosen.Bound)
			set(cn, "lower", scalar(lo))
			set(cn, "upper", scalar(hi))
			cb := mapping(true)
			set(cb, "lower", scalar(lo))
			set(cb, "upper", scalar(hi))
			set(cb, "sum_clamped", scalar(shareText(c.Chosen.DroppedShare)))
			set(cn, "bias", cb)
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// shareText rounds a share to 4 decimals (a hundredth of a percent).
func shareText(f float64) string { return num(math.Round(f*1e4) / 1e4) }

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

func mapping(flow bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return n
}

func get(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func getFold(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if strings.EqualFold(m.Content[i].Value, key) {
			return m.Content[i+1]
		}
	}
	return nil
}

// set replaces the value of key in mapping m (keeping the old value's
// comments) or appends key: v.
func set(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			old := m.Content[i+1]
			v.HeadComment, v.LineComment, v.FootComment = old.HeadComment, old.LineComment, old.FootComment
			if old.Kind == yaml.MappingNode && v.Kind == yaml.MappingNode && old.Style == yaml.FlowStyle {
				v.Style = yaml.FlowStyle
			}
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, scalar(key), v)
}

// findTable finds the key of tables that names qualified ("schema.name"),
// as conf reads it: case folded, schema public when absent.
func findTable(tables *yaml.Node, qualified string) *yaml.Node {
	for i := 0; i+1 < len(tables.Content); i += 2 {
		k := strings.ToLower(tables.Content[i].Value)
		if !strings.Contains(k, ".") {
			k = "public." + k
		}
		if k == qualified {
			return tables.Content[i+1]
		}
	}
	return nil
}
