package rewrite

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Phase aggregates: which aggregate each call is (Aggregate.Kind), with
// its argument, FILTER and clamping bounds.

// quantileBuckets is the number of equal buckets of [lower, upper] a
// quantile's histogram has, a public constant: the released quantile is
// the middle of the chosen bucket, so its error from bucketing alone is
// at most (upper-lower)/8192. The database returns the histogram sparse
// (histogram.go), so its cost grows with the non-empty buckets, not with
// this number; a finer grid was never less accurate at any size measured
// (dp/quantile.go), and the proxy reads at most this many {bucket, count}
// pairs per group and quantile.
const quantileBuckets = 4096

// isAggregate reports whether a function call is an aggregate (or a known
// one that is refused).
func isAggregate(fc *pg_query.FuncCall) bool {
	schema, name := funcName(fc)
	if schema != "" && schema != "pg_catalog" {
		return false
	}
	return dpAggregates[name] || knownAggregates[name] || fc.AggStar || fc.AggWithinGroup || fc.AggFilter != nil || fc.Over != nil
}

// addAggregate checks an aggregate call and returns its Aggregate, the
// same one for the same text (an aggregate used twice is noised once).
func (p *planner) addAggregate(fc *pg_query.FuncCall) (*Aggregate, error) {
	text, err := deparseExpr(&pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: fc}})
	if err != nil {
		return nil, err
	}
	for _, a := range p.aggs {
		if a.agg.Text == text {
			return a.agg, nil
		}
	}
	agg, arg, filter, err := p.aggregate(fc)
	if err != nil {
		return nil, err
	}
	agg.Text = text
	if agg.Kind == AggCountDistinct {
		for _, a := range p.aggs {
			if a.agg.Kind == AggCountDistinct {
				return nil, reject(pgerr.FeatureNotSupported, fc.Location, "only one count(DISTINCT col) per query is supported on private tables (besides the privacy unit)")
			}
		}
	}
	p.aggs = append(p.aggs, plannedAgg{agg: agg, arg: arg, filter: filter})
	return agg, nil
}

// aggregate checks one aggregate call; arg is its argument as printed in
// the rewrite (nil for count(*)), filter its FILTER condition.
func (p *planner) aggregate(fc *pg_query.FuncCall) (agg *Aggregate, arg, filter *pg_query.Node, err error) {
	schema, name := funcName(fc)
	tname := p.table.QualifiedName()
	if schema != "" && schema != "pg_catalog" {
		return nil, nil, nil, reject(pgerr.InsufficientPrivilege, fc.Location, "function %s.%s is not allowed on private table %s", schema, name, tname)
	}
	if !dpAggregates[name] {
		switch {
		case name == "min" || name == "max":
			return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "aggregate %s is not supported on private tables: one person's value would decide it; use percentile_cont(0.0 or 1.0) WITHIN GROUP (ORDER BY col) for a DP estimate", name)
		case name == "median":
			return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "median is not a PostgreSQL aggregate; use percentile_cont(0.5) WITHIN GROUP (ORDER BY col)")
		case knownAggregates[name]:
			return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "aggregate %s is not supported on private tables; use count, sum, avg, variance, stddev or percentile_cont", name)
		}
		return nil, nil, nil, reject(pgerr.InsufficientPrivilege, fc.Location, "function %s is not allowed on private table %s", name, tname)
	}
	quantile := name == "percentile_cont" || name == "percentile_disc"
	switch {
	case fc.Over != nil:
		return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "window function %s(...) OVER is not supported on private tables", name)
	case quantile && !fc.AggWithinGroup:
		return nil, nil, nil, reject(pgerr.SyntaxError, fc.Location, "%s needs WITHIN GROUP (ORDER BY ...)", name)
	case !quantile && (len(fc.AggOrder) > 0 || fc.AggWithinGroup):
		return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "ORDER BY inside aggregate %s is not supported", name)
	case fc.FuncVariadic:
		return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "VARIADIC in aggregate %s is not supported", name)
	}
	if fc.AggFilter != nil {
		if filter, _, err = p.where(fc.AggFilter); err != nil {
			return nil, nil, nil, err
		}
	}
	agg = &Aggregate{Func: name, SumCol: -1, CountCol: -1, SumSqCol: -1, HistCol: -1}
	if fc.AggStar {
		if name != "count" {
			return nil, nil, nil, reject(pgerr.SyntaxError, fc.Location, "%s(*) is not an aggregate", name)
		}
		agg.Kind = AggCount
		agg.AllRows = filter == nil
		return agg, nil, filter, nil
	}
	argNode := (*pg_query.Node)(nil)
	if quantile {
		if len(fc.Args) != 1 || len(fc.AggOrder) != 1 {
			return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "%s takes one fraction and one ORDER BY expression here", name)
		}
		q, ok := numConst(fc.Args[0])
		if !ok || !(q >= 0 && q <= 1) {
			return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "the fraction of %s must be a constant between 0 and 1 (arrays of fractions are not supported)", name)
		}
		sb := fc.AggOrder[0].GetSortBy()
		if sb == nil || sb.SortbyDir == pg_query.SortByDir_SORTBY_USING || sb.SortbyNulls != pg_query.SortByNulls_SORTBY_NULLS_DEFAULT {
			return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "%s supports a plain ORDER BY expression only", name)
		}
		if sb.SortbyDir == pg_query.SortByDir_SORTBY_DESC {
			q = 1 - q
		}
		agg.Kind, agg.Quantile, agg.Discrete, agg.Buckets = AggQuantile, q, name == "percentile_disc", quantileBuckets
		argNode = sb.Node
	} else {
		if len(fc.Args) != 1 {
			return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "aggregate %s takes exactly one argument here", name)
		}
		argNode = fc.Args[0]
	}
	if fc.AggDistinct && name != "count" {
		return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "DISTINCT inside %s is not supported", name)
	}
	auto, err := p.autoArg(name, argNode) // autobounds.go
	if err != nil {
		return nil, nil, nil, err
	}
	out, _, err := p.value(argNode, false)
	if err != nil {
		return nil, nil, nil, err
	}
	if ref := argNode.GetColumnRef(); ref != nil {
		c, _ := p.column(ref)
		agg.Column = c.name
		if c.private && c.name == p.table.PrivacyUnit {
			if name == "count" && fc.AggDistinct {
				agg.Kind = AggCountDistinctUnit
				return agg, out, filter, nil
			}
			if name != "count" {
				return nil, nil, nil, reject(pgerr.InsufficientPrivilege, ref.Location, "%s(%s) is refused: %s is the privacy unit", name, c.name, c.name)
			}
		}
	}
	if name == "count" {
		agg.Kind = AggCount
		if fc.AggDistinct {
			agg.Kind = AggCountDistinct
			agg.MaxDistinct = p.table.MaxRowsPerUnit
			if ref := argNode.GetColumnRef(); ref != nil {
				if c, _ := p.column(ref); c.private {
					if col := p.table.Columns[c.name]; col != nil && col.PublicValues != nil {
						agg.MaxDistinct = min(agg.MaxDistinct, int64(len(col.PublicValues)))
					}
				}
			}
		}
		return agg, out, filter, nil
	}
	lo, hi, ok := p.argBounds(argNode)
	if auto {
		lo, hi, ok = p.autoBounds()
		agg.AutoBounds = true
	}
	if ref := argNode.GetColumnRef(); !ok && ref != nil {
		c, _ := p.column(ref)
		return nil, nil, nil, reject(pgerr.InsufficientPrivilege, ref.Location, "%s(%s) needs clamping bounds for column %s", name, c.name, c.name).
			WithHint("Add lower and upper under tables.%s.columns.%s in the configuration, or bounds: auto to have SUM and AVG choose them per query.", tname, c.name)
	}
	if !ok {
		what := describe(argNode)
		return nil, nil, nil, reject(pgerr.InsufficientPrivilege, fc.Location, "%s(%s) needs clamping bounds: its argument must be a column with lower and upper bounds, or an expression (CASE, arithmetic with constants) of such columns", name, what).
			WithHint("Add lower and upper under tables.%s.columns in the configuration.", tname)
	}
	agg.Lower, agg.Upper = lo, hi
	switch name {
	case "sum":
		agg.Kind = AggSum
	case "avg":
		agg.Kind = AggAvg
	case "variance", "var_samp", "var_pop", "stddev", "stddev_samp", "stddev_pop":
		agg.Kind = AggVariance
		agg.Sample = !strings.HasSuffix(name, "_pop")
		agg.Stddev = strings.HasPrefix(name, "stddev")
	case "percentile_cont", "percentile_disc":
		if !(lo < hi) {
			return nil, nil, nil, reject(pgerr.FeatureNotSupported, fc.Location, "%s needs lower < upper bounds for its argument", name)
		}
	}
	return agg, out, filter, nil
}

func hasAggregate(ns []*pg_query.Node) bool {
	found := false
	for _, n := range ns {
		walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
			if fc, ok := m.Interface().(*pg_query.FuncCall); ok && isAggregate(fc) && fc.Over == nil {
				found = true
			}
			return !found
		})
	}
	return found
}
