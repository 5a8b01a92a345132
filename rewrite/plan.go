package rewrite

import "github.com/dpproxy/dpproxy/conf"

// Kind says what the proxy must do with a statement.
type Kind int

const (
	// KindPrivate is a DP aggregate over one private table: Statement.Plan
	// holds the rewritten SQL and how to noise its result.
	KindPrivate Kind = iota + 1
	// KindPassThrough reads only catalogs, public tables or no table at
	// all, and every function it calls is allowlisted: it is sent to the
	// upstream as Statement.SQL (the deparsed, validated statement).
	KindPassThrough
	// KindSetDP is SET dp.<name> = value / RESET dp.<name>: Statement.Setting.
	KindSetDP
	// KindShowDP is SHOW dp.<name> (dp.budget, dp.epsilon, ...).
	KindShowDP
	// KindExplainDP is EXPLAIN DP <query>: Statement.Plan is the plan of the
	// inner query; nothing runs and nothing is charged.
	KindExplainDP
	// KindEmpty is an empty query string (EmptyQueryResponse).
	KindEmpty
	// KindDeallocate is DEALLOCATE [PREPARE] name | ALL: prepared
	// statements live in the proxy, which closes its own.
	// Statement.Deallocate holds the name, "" for ALL.
	KindDeallocate
)

// Statement is one analysed SQL statement.
type Statement struct {
	Kind Kind
	// SQL is what to send upstream for KindPassThrough: always SQL the
	// proxy wrote itself, the deparse of the checked parse tree, verified
	// to parse back to that tree (never the client's bytes, whose reading
	// could depend on the session: docs/threat-model.md, "One text, one
	// meaning"). For other kinds it is the original text of the statement,
	// which is never sent upstream.
	SQL string
	// Key identifies the statement with its constants (the deparsed parse
	// tree), for the answer cache: same Key, same question.
	Key string
	// Fingerprint is pg_query's fingerprint (constants removed), for logs.
	Fingerprint string
	// Tag is the command tag for CommandComplete of session commands
	// ("SET", "RESET", "SHOW").
	Tag string
	// Setting is set for KindSetDP/KindShowDP: the name after "dp."
	// (lower case) and, for SET, the value as written ("" for RESET).
	Setting *Setting
	// Plan is set for KindPrivate and KindExplainDP.
	Plan *Plan
	// Deallocate is the statement name of KindDeallocate ("" for ALL).
	Deallocate string
	// DropsPrepared is set on DISCARD ALL, which also drops every
	// prepared statement of the session.
	DropsPrepared bool
	// ChangesSettings is set on pass-through statements that may change
	// the session's settings (SET, RESET, DISCARD, the end of a
	// transaction or savepoint): the proxy re-reads the settings that
	// key its answer cache after running one.
	ChangesSettings bool
	// Copy is set on COPY (query) TO STDOUT (copy.go): the statement is
	// its query (KindPrivate or KindPassThrough, SQL the query's
	// deparse), whose rows the proxy writes as a COPY stream in this
	// format (proxy/copyout.go). Nil for every other statement.
	Copy *CopyOut
}

// Setting is a dp.* session setting.
type Setting struct {
	Name  string // "epsilon", "delta", "mechanism", "budget", "notices", ...
	Value string // as written; "" for RESET and SHOW
	Reset bool
}

// AggKind is an aggregate the rewrite knows how to bound.
type AggKind int

const (
	// AggCount is COUNT(*) or COUNT(col).
	AggCount AggKind = iota + 1
	// AggCountDistinctUnit is COUNT(DISTINCT privacy_unit).
	AggCountDistinctUnit
	// AggSum is SUM(col) over a clamped column.
	AggSum
	// AggAvg is AVG(col) over a clamped column: released as
	// mid + noisy(sum - mid*count) / noisy(count), clamped to [Lower, Upper].
	AggAvg
	// AggCountDistinct is COUNT(DISTINCT col) for a column other than the
	// privacy unit: each unit keeps at most MaxDistinct of its distinct
	// values per group (chosen by a seeded hash), so one unit moves the
	// count by at most MaxDistinct (CountCol).
	AggCountDistinct
	// AggVariance is VARIANCE/VAR_SAMP/VAR_POP/STDDEV/STDDEV_SAMP/STDDEV_POP
	// of a clamped argument: released from a noisy count (CountCol), a
	// noisy sum centred on the middle of the bounds (SumCol) and a noisy
	// sum of centred squares (SumSqCol).
	AggVariance
	// AggQuantile is percentile_cont/percentile_disc(Quantile) WITHIN
	// GROUP (ORDER BY arg): HistCol holds the bounded counts of Buckets
	// equal buckets of [Lower, Upper]; the proxy picks a bucket with the
	// exponential mechanism.
	AggQuantile
)

// Output is one column of the original query's result, in order.
type Output struct {
	// GroupKey is the index into Plan.GroupKeys when this output is a
	// group key, or -1.
	GroupKey int
	// Agg is set when this output is an aggregate.
	Agg *Aggregate
	// Name is the column name PostgreSQL gives the output (its alias, or
	// FigureColname's choice), "" for the released columns of a plan with
	// post-processing, which the client never sees. The client's row
	// description comes from the database, not from here: Name is for
	// what is worded without one (the DP-spec goldens).
	Name string
}

// Aggregate is one aggregate of the original query and where its exact,
// bounded values are found in the rewritten query's result.
type Aggregate struct {
	Kind AggKind
	// Func is the aggregate as written, lower case ("count", "sum", "avg").
	Func string
	// Column is the argument column, "" for COUNT(*).
	Column string
	// Lower and Upper are the clamping bounds (AggSum, AggAvg).
	Lower, Upper float64
	// SumCol and CountCol index Plan's result columns: AggSum uses SumCol,
	// AggCount, AggCountDistinctUnit and AggCountDistinct use CountCol,
	// AggAvg and AggVariance use both. -1 where unused.
	SumCol, CountCol int
	// SumSqCol (AggVariance) is the bounded sum of (clamped arg - mid)^2,
	// mid = (Lower+Upper)/2. HistCol (AggQuantile) is the group's sparse
	// histogram, a two-dimensional numeric[] of {bucket, bounded count}
	// pairs, one per non-empty bucket (1 .. Buckets) in bucket order, NULL
	// when every bucket is empty (rewrite/histogram.go). -1 where unused.
	SumSqCol, HistCol int
	// Text is the aggregate as written (deparsed), for notices and EXPLAIN.
	Text string
	// Sample is set for var_samp/variance/stddev/stddev_samp (divide by
	// n-1), Stddev for the stddev family (square root of the variance).
	Sample, Stddev bool
	// Quantile is p of percentile_cont/percentile_disc(p); Discrete is set
	// for percentile_disc. Buckets is the histogram size.
	Quantile float64
	Discrete bool
	Buckets  int
	// MaxDistinct (AggCountDistinct) is how many distinct values one unit
	// may add to a group: min(max_rows_per_unit, number of public values).
	MaxDistinct int64
	// AutoBounds is set when Lower and Upper are those of a column with
	// bounds: auto (autobounds.go): chosen at query time, or the widest
	// (±2^63) before they are.
	AutoBounds bool
	// FromSum and FromCount (AggAvg), FromVariance (AggVariance with
	// Stddev): set when the query also asks for a SUM and COUNT, or a
	// VARIANCE, of the same argument over the same rows (same FILTER). The
	// aggregate is then derived from their released values as
	// post-processing (derive.go): it takes no share of the budget and has
	// no result columns of its own (its columns stay -1).
	FromSum, FromCount, FromVariance *Aggregate
	// SharedCount (AggAvg, AggVariance not derived): a COUNT(x) of the same
	// argument over the same rows in the query, whose released value is
	// the aggregate's count (derive.go): it has no count column or noised
	// count of its own.
	SharedCount *Aggregate
	// AllRows is set for COUNT(*) without FILTER: it counts every bounded
	// row of its group, so it is at least 1 in any group the rewritten
	// query returns.
	AllRows bool
}

// Derived reports whether the aggregate is computed from other released
// aggregates (FromSum and FromCount, or FromVariance) instead of being
// noised itself.
func (a *Aggregate) Derived() bool {
	return a.FromSum != nil || a.FromVariance != nil
}

// GroupKey is one GROUP BY key of the original query.
type GroupKey struct {
	// Column is the key column (lower case) when the key is a plain column.
	Column string
	// Expr is the key expression as printed in the rewritten SQL.
	Expr string
	// PublicValues, when set, are the configured public values: every
	// combination of them is released, and no other value.
	PublicValues []string
	// PublicTable, when set, is the public table (schema.table) whose
	// column the key is (publickeys.go): the proxy reads its values with
	// KeysSQL (one parameter, the most rows to return) before the charge
	// and sets PublicValues to them, or, above MaxPublicTableKeys values,
	// falls back to partition selection.
	PublicTable, KeysSQL string
	// ResultCol is the key's index in the rewritten query's result.
	ResultCol int
}

// Plan is a rewritten private query.
type Plan struct {
	Table *conf.Table
	// SQL is the rewritten query. It reads the private table only through
	// per-unit pre-aggregation, clamping and contribution bounding. It takes
	// the client's parameters $1..$NumParams unchanged, then the values of
	// the hoisted constants (Consts, each at its Param), then one more,
	// $SeedParam() of type bigint: a fresh secret seed per execution that
	// keys the hash deciding which groups each unit keeps.
	SQL string
	// NumParams is the number of client parameters ($n) of the original.
	NumParams int
	// Consts are the constant subexpressions of the query (hoist.go):
	// the proxy evaluates ConstSQL (one column per Const, in order, with
	// the client's parameters) before the charge and binds each value to
	// $Param of SQL with the type it came back with. ConstSQL is "" when
	// there are none.
	Consts   []Const
	ConstSQL string
	// TypeChecks constrain the types of parameters and constants, known
	// only when the query runs; the proxy checks them before the charge.
	TypeChecks []TypeCheck
	// DescribeSQL is the original statement (deparsed), used to ask the
	// upstream for the result's column names and types without running it.
	DescribeSQL string
	Outputs     []Output
	Aggregates  []*Aggregate
	GroupKeys   []GroupKey
	// UnitsCol is the result column holding the number of distinct privacy
	// units in each group (after bounding), for partition selection.
	UnitsCol int
	// PartitionSelection is true when some group key has no public values:
	// a group is released only if its noisy unit count passes a threshold.
	PartitionSelection bool
	// MaxGroups is the L0 bound used for sensitivity: 1 without GROUP BY,
	// min(max_groups_per_unit, number of public key combinations) when all
	// keys are public, max_groups_per_unit otherwise.
	MaxGroups int64
	// MaxRows is the table's max_rows_per_unit.
	MaxRows int64
	// DistinctValues is set when the plan has an AggCountDistinct: the
	// per-unit pre-aggregation then also groups by that column, and a
	// middle layer bounds each unit's values and groups with window
	// functions (docs/design.md, "COUNT(DISTINCT col)").
	DistinctValues bool
	// Post, when set, is computed by the proxy over the noisy rows (keys
	// and aggregates, in the order of Outputs) instead of OrderBy and
	// Limit: HAVING, expressions over aggregates, ORDER BY expressions.
	// The proxy runs it in PostgreSQL over the noised values only.
	Post *Post
	// OriginalSQL is the original statement (deparsed) when Post is set:
	// the proxy has the upstream analyse it before charging, so that an
	// ill-typed HAVING or output expression is refused for free.
	OriginalSQL string
	// OrderBy and Limit are applied by the proxy to the noisy rows
	// (post-processing). Limit < 0 means none. With Post, Limit and Offset
	// are applied by the post-processing query and OrderBy is empty.
	OrderBy []OrderKey
	Limit   int64
	Offset  int64
	// Branches, when set, make this plan a UNION ALL of private queries
	// (union.go): each branch is a plan of its own, released on its own;
	// the proxy charges the sum of their costs in one charge before any
	// branch runs and concatenates their rows in order. Besides it, only
	// Table (the first branch's), DescribeSQL (the whole statement, whose
	// description is the result's), NumParams, Outputs (one per column,
	// GroupKey -1) and Limit (-1) are set; SQL is empty.
	Branches []*Plan
	// Auto, when set, is the column with bounds: auto that SUM or AVG
	// takes, and the query that counts its values per logarithmic bucket
	// (autobounds.go).
	Auto *AutoBounds
}

// OrderKey sorts the released rows by output column Output (0-based).
type OrderKey struct {
	Output     int
	Descending bool
	// NullsFirst follows PostgreSQL's default unless given: NULLS LAST for
	// ascending, NULLS FIRST for descending.
	NullsFirst bool
}

// Post is post-processing computed over the released rows. Its expressions
// reference only the columns dp_c0, dp_c1, ... of a relation dp, one per
// Output (the noisy values, typed as the database describes DescribeSQL),
// and functions from a fixed allowlist: they can never see a raw value or
// a private column. The proxy runs
//
//	SELECT <Targets> FROM <the released rows> AS dp [WHERE <Where>]
//	[ORDER BY <OrderBy>] [LIMIT <Limit>] [OFFSET <Offset>]
//
// whose result is the answer.
type Post struct {
	Targets string // select list, each item aliased with PostgreSQL's column name
	Where   string // the original HAVING, "" when none
	OrderBy string // "" when none
}
