// Package testconf holds the test configurations of dpproxy in one file,
// dpproxy.yaml next to this one, shared by the rewriter's unit tests, the
// e2e tests and the benchmarks, instead of a near-copy in each. An entry
// of that file is a configuration or a fragment of one, and may extend
// others (the file's header says how); Get resolves it.
package testconf

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dpproxy/dpproxy/conf"
)

// The entries of dpproxy.yaml.
const (
	// Shop is the demo dataset's tables as every test reads them.
	Shop = "shop"
	// Rewrite is the configuration of the rewriter's unit tests and
	// goldens.
	Rewrite = "rewrite"
	// E2ETables is the tables section of the e2e tests.
	E2ETables = "e2e_tables"
	// E2EProxy is what the e2e tests' proxies have in common (listen,
	// upstream: UPSTREAM, auth method, privacy).
	E2EProxy = "e2e_proxy"
	// E2E is the shared proxy of the e2e tests (upstream: UPSTREAM).
	E2E = "e2e"
	// The e2e tests' own proxies (upstream: UPSTREAM), each named after
	// its test file or test.
	Attack    = "attack"
	WireFuzz  = "wire_fuzz"
	Proc      = "proc"
	Clients   = "clients"
	Operator  = "operator"
	Resources = "resources"
	Semantic  = "semantic"
	Timing    = "timing"
	TLS       = "tls"
	// The e2e tests' proxies on tables of their own.
	Audit          = "audit"
	AuditPrecision = "audit_precision"
	Visits         = "visits"
	PubKeys        = "pubkeys"
	AutoBounds     = "autobounds"
	// NoiseHook is the base configuration of cmd/dpproxy's test that no
	// configuration reaches the test-only noise hook.
	NoiseHook = "noise_hook"
	// Bench is the benchmark dataset's configuration (listen: LISTEN,
	// upstream: UPSTREAM).
	Bench = "bench"
	// ProxyBench is the proxy package's CPU benchmarks' configuration.
	ProxyBench = "proxy_bench"
	// BenchTPCH is the accuracy table's configuration (bench/tpch.go;
	// listen: LISTEN, upstream: UPSTREAM).
	BenchTPCH = "bench_tpch"
)

//go:embed dpproxy.yaml
var file []byte

// A Config is a resolved entry of dpproxy.yaml, which a test may change
// (Set, Copy) before it reads it.
type Config struct {
	name string
	root *yaml.Node // a mapping
}

// Get resolves the entry name of dpproxy.yaml: its bases, then its own
// keys. It panics on an unknown name or a malformed file, which the tests
// of this package rule out.
func Get(name string) *Config {
	c, err := get(name)
	if err != nil {
		panic("testconf: " + err.Error())
	}
	return c
}

// YAML is Get(name).String().
func YAML(name string) string { return Get(name).String() }

func get(name string) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(file, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("dpproxy.yaml is not a mapping of names to entries")
	}
	entries := map[string]*yaml.Node{}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		entries[top.Content[i].Value] = top.Content[i+1]
	}
	root, err := resolve(entries, name, nil)
	if err != nil {
		return nil, err
	}
	return &Config{name: name, root: root}, nil
}

// resolve returns a fresh copy of entry name with its bases merged in;
// seen is the chain of entries being resolved, to catch a cycle.
func resolve(entries map[string]*yaml.Node, name string, seen []string) (*yaml.Node, error) {
	for _, s := range seen {
		if s == name {
			return nil, fmt.Errorf("entry %s extends itself (%s)", name, strings.Join(append(seen, name), " -> "))
		}
	}
	e, ok := entries[name]
	if !ok {
		return nil, fmt.Errorf("no entry %q in dpproxy.yaml", name)
	}
	if e.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("entry %s is not a mapping", name)
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	own := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(e.Content); i += 2 {
		k, v := e.Content[i], e.Content[i+1]
		if k.Value != "extends" {
			own.Content = append(own.Content, k, v)
			continue
		}
		if v.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("entry %s: extends is not a list", name)
		}
		for _, b := range v.Content {
			base, err := resolve(entries, b.Value, append(seen, name))
			if err != nil {
				return nil, err
			}
			merge(out, base)
		}
	}
	merge(out, own)
	return out, nil
}

// merge merges the mapping src into the mapping dst: a key of both whose
// values are both mappings is merged in turn, a key whose value in src is
// null (~) is removed from dst, and any other value of src replaces
// dst's (or is added after dst's keys). src's nodes are copied.
func merge(dst, src *yaml.Node) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		j := index(dst, k.Value)
		switch {
		case v.Tag == "!!null":
			if j >= 0 {
				dst.Content = append(dst.Content[:j], dst.Content[j+2:]...)
			}
		case j >= 0 && v.Kind == yaml.MappingNode && dst.Content[j+1].Kind == yaml.MappingNode:
			merge(dst.Content[j+1], v)
		case j >= 0:
			dst.Content[j+1] = deepCopy(v)
		default:
			dst.Content = append(dst.Content, deepCopy(k), deepCopy(v))
		}
	}
}

// index returns the position of key in the mapping m, or -1.
func index(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

func deepCopy(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, m := range n.Content {
		c.Content[i] = deepCopy(m)
	}
	return &c
}

// Set replaces (or adds) the value at path, a list of mapping keys from
// the top (a table's name is one key: "tables", "public.events") or
// indices of lists ("auth", "users", "0", "name"), with value, a YAML
// text; mappings missing on the way are created. It panics on a value
// that is not YAML or a path through anything else.
func (c *Config) Set(value string, path ...string) *Config {
	var v yaml.Node
	if err := yaml.Unmarshal([]byte(value), &v); err != nil || len(v.Content) != 1 {
		panic(fmt.Sprintf("testconf: Set(%q): not one YAML value: %v", value, err))
	}
	c.set(v.Content[0], path)
	return c
}

// Merge merges value, a YAML mapping (indented or not, as a test's lines
// for a section), into the mapping at path as an entry's keys merge onto
// its bases'; an empty value changes nothing.
func (c *Config) Merge(value string, path ...string) *Config {
	var v yaml.Node
	if err := yaml.Unmarshal([]byte(value), &v); err != nil || len(v.Content) > 1 || len(v.Content) == 1 && v.Content[0].Kind != yaml.MappingNode {
		panic(fmt.Sprintf("testconf: Merge(%q): not a YAML mapping: %v", value, err))
	}
	if len(v.Content) == 0 {
		return c
	}
	n := c.root
	for i, k := range path {
		if n.Kind != yaml.MappingNode {
			panic(fmt.Sprintf("testconf: %s: %s is not a mapping", c.name, strings.Join(path[:i], ".")))
		}
		j := index(n, k)
		if j < 0 || n.Content[j+1].Kind != yaml.MappingNode {
			c.set(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, path[:i+1])
			j = index(n, k)
		}
		n = n.Content[j+1]
	}
	merge(n, v.Content[0])
	return c
}

// SetString replaces (or adds) the value at path with the string value,
// whatever it would mean as YAML (a URL, a password).
func (c *Config) SetString(value string, path ...string) *Config {
	c.set(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}, path)
	return c
}

// Copy copies the value at path from to path to (a table entry to another
// name, say), replacing what is there.
func (c *Config) Copy(from, to []string) *Config {
	n := c.root
	for _, k := range from {
		j := -1
		if n.Kind == yaml.MappingNode {
			j = index(n, k)
		}
		if j < 0 {
			panic(fmt.Sprintf("testconf: Copy: %s has no %s", c.name, strings.Join(from, ".")))
		}
		n = n.Content[j+1]
	}
	c.set(deepCopy(n), to)
	return c
}

func (c *Config) set(v *yaml.Node, path []string) {
	n := c.root
	for i, k := range path {
		if n.Kind == yaml.SequenceNode {
			j, err := strconv.Atoi(k)
			if err != nil || j < 0 || j >= len(n.Content) {
				panic(fmt.Sprintf("testconf: %s: %s has no element %s", c.name, strings.Join(path[:i], "."), k))
			}
			if i == len(path)-1 {
				n.Content[j] = v
				return
			}
			n = n.Content[j]
			continue
		}
		if n.Kind != yaml.MappingNode {
			panic(fmt.Sprintf("testconf: %s: %s is not a mapping", c.name, strings.Join(path[:i], ".")))
		}
		j := index(n, k)
		if i == len(path)-1 {
			if j >= 0 {
				n.Content[j+1] = v
			} else {
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, v)
			}
			return
		}
		if j < 0 {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
			j = len(n.Content) - 2
		}
		n = n.Content[j+1]
	}
}

// String is the configuration as YAML, indented by two spaces, so that a
// test may append lines to a section (more tables after a tables section).
func (c *Config) String() string {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c.root); err != nil {
		panic("testconf: " + err.Error())
	}
	enc.Close()
	return b.String()
}

// Parse parses the configuration as conf.Parse would a file NAME.yaml,
// env answering its *_env keys.
func (c *Config) Parse(env func(string) string) (*conf.Config, error) {
	return conf.Parse(c.name+".yaml", []byte(c.String()), env)
}
