package conf

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file reads the YAML tree (yaml.Node) beside the decoded Config, so
// that every problem can name its key path and line, an unknown key can
// come with a did-you-mean, and a key given explicitly (even as 0 or "")
// can be told from one that is absent.

// keyInfo is what the YAML tree says about the file's keys: the line of
// each key path given (the same paths problems name, such as
// "auth.users[0].budget.epsilon" or "tables.Public.Orders.columns.amount"),
// and the key path of each line's value, for yaml's type errors.
type keyInfo struct {
	lines    map[string]int
	lineKey  map[int]string
	nodes    map[string]*yaml.Node
	unknowns []unknownKey
}

type unknownKey struct {
	path, key string
	line      int
	suggest   string
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// readKeys walks root against the Go type t (a Config), recording every
// key path and each key that t does not have.
func readKeys(root *yaml.Node, t reflect.Type) *keyInfo {
	k := &keyInfo{lines: map[string]int{}, lineKey: map[int]string{}, nodes: map[string]*yaml.Node{}}
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	k.walk(root, t, "")
	return k
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (k *keyInfo) walk(n *yaml.Node, t reflect.Type, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			return
		}
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // decodes itself: its own errors say what is wrong
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // yaml's type error reports it
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			if kn.Value == "<<" { // a merge key: its mapping's keys are t's
				k.walk(vn, t, path)
				continue
			}
			f, ok := fields[kn.Value]
			if !ok {
				k.unknowns = append(k.unknowns, unknownKey{path: path, key: kn.Value, line: kn.Line, suggest: closest(kn.Value, fields)})
				continue
			}
			p := join(path, kn.Value)
			k.record(p, kn, vn)
			k.walk(vn, f.Type, p)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			p := join(path, kn.Value)
			k.record(p, kn, vn)
			k.walk(vn, t.Elem(), p)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, vn := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			k.record(p, vn, vn)
			k.walk(vn, t.Elem(), p)
		}
	}
}

func (k *keyInfo) record(path string, key, value *yaml.Node) {
	if _, dup := k.lines[path]; !dup {
		k.lines[path] = key.Line
	}
	k.nodes[path] = value
	if value.Kind == yaml.ScalarNode || value.Kind == yaml.AliasNode {
		k.lineKey[value.Line] = path
	} else if _, taken := k.lineKey[key.Line]; !taken {
		k.lineKey[key.Line] = path
	}
}

// yamlFields maps the YAML names of t's fields (inline structs included)
// to the fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, g := range yamlFields(ft) {
					m[n] = g
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f
	}
	return m
}

// closest returns the known key nearest to key by edit distance, or "" when
// none is near enough to be a likely typo.
func closest(key string, fields map[string]reflect.StructField) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", -1
	for _, n := range names {
		d := editDistance(strings.ToLower(key), n)
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	limit := max(2, len(key)/3)
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// line returns the line of key, or of its nearest enclosing key given in
// the file; 0 when none is known.
func (k *keyInfo) line(key string) int {
	if k == nil {
		return 0
	}
	for key != "" {
		if l, ok := k.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

// given reports whether key appears in the file.
func (k *keyInfo) given(key string) bool {
	if k == nil {
		return false
	}
	_, ok := k.lines[key]
	return ok
}

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// typeErrors turns yaml's type errors ("line 5: cannot unmarshal ...")
// into problems naming the key path and the line.
func (k *keyInfo) typeErrors(p *problems, te *yaml.TypeError) {
	for _, msg := range te.Errors {
		m := yamlLine.FindStringSubmatch(msg)
		if m == nil {
			p.push(0, fmt.Errorf("%s: %s", p.path, msg))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		if key, ok := k.lineKey[line]; ok {
			p.push(line, fmt.Errorf("%s:%d: %s: %s", p.path, line, key, m[2]))
		} else {
			p.push(line, fmt.Errorf("%s:%d: %s", p.path, line, m[2]))
		}
	}
}

// explicitZeros reports keys given as 0, "" or without a value where the
// default then replaced them: such a value would otherwise mean "unset"
// and be silently the default (privacy.epsilon: 0 would run with ε = 1).
// v is the Config after applyDefaults; only the keys the file gives are
// visited.
func (k *keyInfo) explicitZeros(p *problems, v reflect.Value, path string) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if reflect.PointerTo(v.Type()).Implements(unmarshalerType) && path != "" {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for name, f := range yamlFields(v.Type()) {
			key := join(path, name)
			if !k.given(key) {
				continue
			}
			fv := v.FieldByIndex(f.Index)
			if isLeaf(fv.Type()) {
				k.zeroLeaf(p, key, fv)
				continue
			}
			k.explicitZeros(p, fv, key)
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		for _, mk := range v.MapKeys() {
			key := join(path, mk.String())
			if k.given(key) && !isLeaf(v.Type().Elem()) {
				k.explicitZeros(p, v.MapIndex(mk), key)
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			key := fmt.Sprintf("%s[%d]", path, i)
			if k.given(key) && !isLeaf(v.Type().Elem()) {
				k.explicitZeros(p, v.Index(i), key)
			}
		}
	}
}

// isLeaf reports whether values of t are scalars (numbers, strings, bools,
// durations), not sections.
func isLeaf(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array, reflect.Pointer, reflect.Interface:
		return false
	}
	return true
}

// zeroLeaf: the key was given; if its value in the file is the zero value
// and the field no longer is (a default replaced it), that is a problem.
func (k *keyInfo) zeroLeaf(p *problems, key string, fv reflect.Value) {
	if fv.IsZero() {
		return // kept as given: validation judges it
	}
	n := k.nodes[key]
	fresh := reflect.New(fv.Type())
	if n.Tag != "!!null" {
		if err := n.Decode(fresh.Interface()); err != nil {
			return // a type error, reported by Decode
		}
	}
	if !fresh.Elem().IsZero() {
		return
	}
	given := n.Value
	if n.Tag == "!!null" {
		given = "nothing"
	} else if given == "" {
		given = `""`
	}
	def := fmt.Sprint(fv.Interface())
	if _, secret := fv.Interface().(Secret); secret {
		def = "another key's value"
	}
	p.add(key, "%s is not a value here (absent, the key would default to %s): omit the key for the default, or give a valid value", given, def)
}

// alias records the lines under key path from also under to (to as
// folded: a configured table's key "tables.Public.Orders" is checked
// upstream as "tables.public.orders"), lower-casing the rest of each
// path when fold is set.
func (k *keyInfo) alias(from, to string, fold bool) {
	if k == nil || from == to {
		return
	}
	add := map[string]int{}
	for path, l := range k.lines {
		if path != from && !strings.HasPrefix(path, from+".") && !strings.HasPrefix(path, from+"[") {
			continue
		}
		rest := path[len(from):]
		if fold {
			rest = strings.ToLower(rest)
		}
		if _, ok := k.lines[to+rest]; !ok {
			add[to+rest] = l
		}
	}
	for path, l := range add {
		k.lines[path] = l
	}
}
