package rewrite

import (
	"slices"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// children calls visit for every message directly below m (fields and list
// elements), in field order. Node wrappers are messages too, so a walk over
// children reaches every node of a parse tree whatever its type: a new node
// type in pg_query cannot hide a relation or a function call from the checks.
//
// The fields are visited in the order of their numbers, not as m.Range
// gives them: protobuf randomizes Range's order per binary, so a walk
// that stops at its first finding (a refusal's position) gave different
// answers in different builds (refuse_intersect's position changed with
// unrelated code).
//
// A Node is a oneof of hundreds of fields, one of them set: it is read
// with WhichOneof rather than by asking each field.
func children(m protoreflect.Message, skip protoreflect.Name, visit func(protoreflect.Message)) {
	md := m.Descriptor()
	one := func(fd protoreflect.FieldDescriptor) {
		if fd == nil || fd.Name() == skip || fd.Message() == nil || fd.IsMap() {
			return
		}
		v := m.Get(fd)
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				visit(l.Get(i).Message())
			}
			return
		}
		visit(v.Message())
	}
	fds := md.Fields()
	if ods := md.Oneofs(); ods.Len() == 1 && ods.Get(0).Fields().Len() == fds.Len() {
		one(m.WhichOneof(ods.Get(0)))
		return
	}
	for i := 0; i < fds.Len(); i++ {
		if fd := fds.Get(i); m.Has(fd) {
			one(fd)
		}
	}
}

// walk visits m and everything below it, pre-order. fn returns false to
// skip the children of a message.
func walk(m protoreflect.Message, fn func(protoreflect.Message) bool) {
	if !fn(m) {
		return
	}
	children(m, "", func(c protoreflect.Message) { walk(c, fn) })
}

// relClass is what a relation reference resolves to.
type relClass int

const (
	relCTE relClass = iota + 1
	relCatalog
	relPublic
	relPrivate
)

// relRef is one RangeVar of a statement, resolved as PostgreSQL would with
// the search path pg_catalog, public.
type relRef struct {
	rv     *pg_query.RangeVar
	class  relClass
	schema string // "" for a CTE
	name   string
	table  *conf.Table // relPublic, relPrivate
}

func (r *relRef) qualified() string {
	if r.schema == "" {
		return r.name
	}
	return r.schema + "." + r.name
}

// collectRels returns every RangeVar below m with the CTE names in scope
// where it occurs. A CTE of a WITH list is visible in the statement's body
// and in the later CTEs of the list (in all of them with RECURSIVE).
func collectRels(m protoreflect.Message) []*relRef {
	var refs []*relRef
	var visit func(m protoreflect.Message, scope []string)
	visit = func(m protoreflect.Message, scope []string) {
		switch n := m.Interface().(type) {
		case *pg_query.RangeVar:
			refs = append(refs, &relRef{rv: n, class: relCTEIf(n, scope)})
			return
		case *pg_query.SelectStmt:
			if w := n.GetWithClause(); w != nil {
				names := make([]string, 0, len(w.Ctes))
				for _, c := range w.Ctes {
					names = append(names, c.GetCommonTableExpr().GetCtename())
				}
				for i, c := range w.Ctes {
					visible := names[:i]
					if w.Recursive {
						visible = names
					}
					visit(c.ProtoReflect(), concat(scope, visible))
				}
				body := concat(scope, names)
				children(m, "with_clause", func(c protoreflect.Message) { visit(c, body) })
				return
			}
		}
		children(m, "", func(c protoreflect.Message) { visit(c, scope) })
	}
	visit(m, nil)
	return refs
}

func concat(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// relCTEIf returns relCTE when rv is an unqualified name of a CTE in scope,
// else 0 (to be resolved against the catalog and the configuration).
func relCTEIf(rv *pg_query.RangeVar, scope []string) relClass {
	if rv.Schemaname != "" || rv.Catalogname != "" {
		return 0
	}
	for _, s := range scope {
		if s == rv.Relname {
			return relCTE
		}
	}
	return 0
}

// resolve classifies every reference, refusing catalog relations that are
// not on the allowlist (allowlists.go), cross-database names and tables that
// are not configured.
func (a *Analyzer) resolve(refs []*relRef) error {
	for _, r := range refs {
		rv := r.rv
		if r.class == relCTE {
			r.name = rv.Relname
			continue
		}
		if rv.Catalogname != "" {
			if rv.Catalogname != a.opts.Database && !slices.Contains(a.cfg.Databases, rv.Catalogname) {
				return reject(pgerr.FeatureNotSupported, rv.Location, "cross-database references are not implemented: \"%s.%s.%s\"", rv.Catalogname, rv.Schemaname, rv.Relname)
			}
			// The current database, as PostgreSQL reads it: the name
			// without it means the same, and is what the rewrite prints.
			rv.Catalogname = ""
		}
		r.schema, r.name = rv.Schemaname, rv.Relname
		if r.schema == "" {
			r.schema = "public"
			if strings.HasPrefix(r.name, "pg_") {
				r.schema = "pg_catalog"
			}
		}
		switch r.schema {
		case "pg_catalog", "information_schema":
			// Only the relations on the allowlist of allowlists.go.
			if why := catalogRefusal(r.schema, r.name); why != "" {
				return reject(pgerr.InsufficientPrivilege, rv.Location, "reading %s is refused: %s", r.qualified(), why)
			}
			r.class = relCatalog
			continue
		}
		t := a.cfg.Table(r.schema, r.name)
		switch {
		case t == nil:
			return reject(pgerr.InsufficientPrivilege, rv.Location, "table %q is not configured in dpproxy", r.qualified()).
				WithHint("Only tables listed under tables: in the configuration can be read.")
		case t.Public:
			r.class = relPublic
		default:
			r.class = relPrivate
		}
		r.table = t
	}
	return nil
}

// replaceNodes visits every Node wrapper below n (pre-order); fn may change
// x.Node in place and returns true to skip x's children.
func replaceNodes(n *pg_query.Node, fn func(x *pg_query.Node) bool) {
	var visit func(m protoreflect.Message)
	visit = func(m protoreflect.Message) {
		if x, ok := m.Interface().(*pg_query.Node); ok && fn(x) {
			return
		}
		children(m, "", visit)
	}
	visit(n.ProtoReflect())
}

// describe prints a node for a message: its SQL when it deparses, else its
// type.
func describe(n *pg_query.Node) string {
	if s, err := deparseExpr(n); err == nil && len(s) <= 80 {
		return s
	}
	if n == nil || n.Node == nil {
		return "an empty expression"
	}
	m := n.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().Get(0)); fd != nil {
		return string(fd.Message().Name())
	}
	return "an expression"
}
