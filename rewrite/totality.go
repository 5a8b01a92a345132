package rewrite

import (
	"sort"
	"strings"
)

// The totality table: what a private query may compute on the rows it
// reads. Whether a query over a private table fails must never depend on
// one person's rows, and PostgreSQL evaluates an expression only on the
// rows that reach it (a CASE branch, an AND after a false operand, a
// FILTER, a join condition, a group key of the rows that pass WHERE). So
// every function, operator and cast applied to a column in WHERE, FILTER,
// CASE, a join condition, a group key or an aggregate argument must be
// total: it cannot fail for any value of its argument types. The decision
// is by signature, with the columns' types read from the upstream catalog
// when the proxy starts (Options.ColumnTypes, ColumnTypesSQL).
//
// Expressions without a column are not decided here: they are evaluated by
// the proxy before any private row is read (hoist.go). Everything that is
// neither in this file nor a constant is refused with 42501, naming it.
//
// Every entry was checked against PostgreSQL 15 at the extreme values of
// its argument types (the range ends of date and timestamps, ±infinity,
// NaN, the largest numerics) under the time zones with the largest offsets
// PostgreSQL accepts (±167 hours, and local mean time offsets with
// seconds): TestTotalityTableAgainstPostgres (rewrite/totality_test.go)
// runs each entry there, and the controls that show the refused ones fail. Decisions that are not obvious are explained where
// they are made.

// family groups the types whose values compare and convert alike.
type family int

const (
	famNone family = iota
	famInt
	famNumeric
	famFloat
	famString
	famBool
	famDate
	famTimestamp
	famTimestamptz
	famTime
	famTimetz
	famInterval
	famUUID
	famEnum
)

// scalarTypes are the types the table knows, by pg_type.typname. Columns
// of an enum type are read as "enum" (ColumnTypesSQL); columns of a domain
// as their base type (reading a domain value cannot fail; casting to a
// domain can, and is never allowed). Any other type (arrays, json, ranges,
// geometric types, user-defined base types) may be read and counted but
// not computed on.
var scalarTypes = map[string]family{
	"int2": famInt, "int4": famInt, "int8": famInt,
	"numeric": famNumeric,
	"float4":  famFloat, "float8": famFloat,
	"text": famString, "varchar": famString, "bpchar": famString, "name": famString,
	"bool":        famBool,
	"date":        famDate,
	"timestamp":   famTimestamp,
	"timestamptz": famTimestamptz,
	"time":        famTime,
	"timetz":      famTimetz,
	"interval":    famInterval,
	"uuid":        famUUID,
	"enum":        famEnum,
}

// typeOIDs are the OIDs of the builtin scalar types (fixed in
// PostgreSQL's pg_type.dat), to check the types of parameters and of
// evaluated constants, which are known only when the query runs.
var typeOIDs = map[uint32]string{
	16: "bool", 19: "name", 20: "int8", 21: "int2", 23: "int4", 25: "text",
	700: "float4", 701: "float8", 1042: "bpchar", 1043: "varchar",
	1082: "date", 1083: "time", 1114: "timestamp", 1184: "timestamptz",
	1186: "interval", 1266: "timetz", 1700: "numeric", 2950: "uuid",
}

// TypeName returns the type name of a builtin scalar type OID, or "" for
// any other type.
func TypeName(oid uint32) string { return typeOIDs[oid] }

// castTypeNames maps the names a cast may spell (pg_query's TypeName,
// without a pg_catalog qualifier) to the table's type names. Casts to any
// other type are refused: a domain's CHECK runs on every value cast to it,
// regclass and its kin read the catalog, arrays and composite types fail
// on their elements.
var castTypeNames = map[string]string{
	"int2": "int2", "smallint": "int2", "int4": "int4", "int": "int4", "integer": "int4", "int8": "int8", "bigint": "int8",
	"numeric": "numeric", "decimal": "numeric", "float4": "float4", "real": "float4", "float8": "float8",
	"text": "text", "varchar": "varchar", "bpchar": "bpchar", "name": "name", "bool": "bool", "boolean": "bool",
	"date": "date", "timestamp": "timestamp", "timestamptz": "timestamptz", "time": "time", "timetz": "timetz",
	"interval": "interval", "uuid": "uuid",
}

// isNumericFamily reports whether values of type t are numbers (and cast
// to numeric without failing: float NaN and ±Infinity are numeric values
// since PostgreSQL 14).
func isNumericFamily(t string) bool {
	switch scalarTypes[t] {
	case famInt, famNumeric, famFloat:
		return true
	}
	return false
}

func isDatetime(f family) bool { return f == famDate || f == famTimestamp || f == famTimestamptz }

// comparable reports whether a value of type a may be compared with one of
// type b (=, <>, <, <=, >, >=, IN, BETWEEN, IS DISTINCT FROM) without the
// comparison failing for any value. aLit and bLit say that a side is a
// literal: the parser or the planner converts a literal once, before any
// row is read, so only a conversion of a row's value matters. The type ""
// is an untyped literal or NULL, which takes the other side's type when
// the query is parsed.
//
//   - Same family: total (integers of every width and float4/float8 have
//     cross-type operators; strings compare as text, bpchar and name
//     convert to text without failing; enums of two types do not compare
//     at all, a parse error).
//   - Integers with numeric or floats: the integer side is converted, which
//     cannot fail.
//   - numeric with float: both become float8, and numeric → float8 fails
//     beyond ±1.8e308 (numeric holds up to 1e131072): total only when the
//     numeric side is a literal.
//   - date, timestamp, timestamptz with each other: total. PostgreSQL 13
//     made these cross-type comparisons overflow-safe (a date beyond
//     timestamp's range compares as larger instead of failing).
//   - Anything else is refused, and so is a type outside the table (an
//     array, json, a user-defined type), even with a literal.
func comparable(a, b string, aLit, bLit bool) bool {
	if a == "" || b == "" {
		return scalarTypes[a+b] != famNone || a+b == ""
	}
	fa, fb := scalarTypes[a], scalarTypes[b]
	switch {
	case fa == famNone || fb == famNone:
		return false
	case fa == fb:
		return true
	case fa == famNumeric && fb == famFloat:
		return aLit
	case fa == famFloat && fb == famNumeric:
		return bLit
	case isNumericFamily(a) && isNumericFamily(b):
		return true
	case isDatetime(fa) && isDatetime(fb):
		return true
	}
	return false
}

// comparableTypes lists the types a parameter or evaluated constant may
// have to be compared with a value of type t (comparable, the constant
// being bound per execution, not a literal).
func comparableTypes(t string) []string {
	var out []string
	for _, name := range boundTypes {
		if comparable(t, name, false, false) {
			out = append(out, name)
		}
	}
	return out
}

// boundTypes are the types a parameter or an evaluated constant may have
// (those of typeOIDs), sorted; read-only.
var boundTypes = func() []string {
	var out []string
	for _, name := range typeOIDs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}()

// castTotal reports whether converting a value of type from to type to
// (an explicit cast of a column, or the implicit one PostgreSQL adds to
// unify CASE branches or COALESCE arguments) cannot fail.
//
//   - To text or varchar (without a length): total; the output functions
//     of the builtin types never fail.
//   - Widening numbers (int2 → int4 → int8 → numeric, integers → float4 or
//     float8, float4 → float8, floats → numeric): total. Narrowing ones
//     (int8 → int4, numeric → integer or float, float8 → float4) overflow.
//   - bool → int4: total (0 or 1).
//   - timestamp or timestamptz → date: total, whatever the time zone
//     (date's range contains timestamp's).
//   - date → timestamp or timestamptz and timestamp ↔ timestamptz: not
//     total ("date out of range for timestamp" beyond 294276 AD; a time
//     zone shift near the ends of the range).
//   - From text to anything else: not total (invalid input).
func castTotal(from, to string) bool {
	if from == to {
		return scalarTypes[from] != famNone
	}
	ff := scalarTypes[from]
	if ff == famNone {
		return false
	}
	switch to {
	case "text", "varchar":
		return true
	case "int4":
		return from == "int2" || from == "bool"
	case "int8":
		return from == "int2" || from == "int4"
	case "numeric":
		return ff == famInt || ff == famFloat
	case "float4":
		return ff == famInt
	case "float8":
		return ff == famInt || from == "float4"
	case "date":
		return ff == famTimestamp || ff == famTimestamptz
	}
	return false
}

// unify returns the type PostgreSQL gives CASE branches or COALESCE
// arguments of the given types ("" for untyped literals and NULL) and
// whether converting each to it is total (castTotal). Integers with
// numeric become numeric; numbers with a float become float8, which a
// numeric branch cannot always reach (refused unless it is a literal);
// strings become text; date with a timestamp is refused (date →
// timestamp is not total).
func unify(types []string, lits []bool) (string, bool) {
	var known []int
	for i, t := range types {
		if t != "" {
			known = append(known, i)
		}
	}
	if len(known) == 0 {
		return "text", true // all untyped: PostgreSQL resolves them as text
	}
	first := types[known[0]]
	same := true
	for _, i := range known {
		if types[i] != first {
			same = false
		}
	}
	if same {
		return first, scalarTypes[first] != famNone
	}
	var anyFloat, anyNumeric bool
	widest := ""
	for _, i := range known {
		switch scalarTypes[types[i]] {
		case famFloat:
			anyFloat = true
		case famNumeric:
			anyNumeric = true
		case famInt:
			if widest == "" || intWidth[types[i]] > intWidth[widest] {
				widest = types[i]
			}
		case famString:
		default:
			return "", false
		}
	}
	target := ""
	switch {
	case anyFloat:
		target = "float8"
	case anyNumeric:
		target = "numeric"
	case widest != "":
		target = widest
	default:
		target = "text"
	}
	for _, i := range known {
		if !castTotal(types[i], target) && !(lits[i] && isNumericFamily(types[i]) && isNumericFamily(target)) {
			return "", false
		}
	}
	return target, true
}

var intWidth = map[string]int{"int2": 2, "int4": 4, "int8": 8}

// Functions over column values, by signature. lower and upper are total on
// every string type (a bpchar argument becomes text first). date_trunc,
// extract and date_part take a unit (field) that must be a literal valid
// for the argument's type: PostgreSQL checks the unit on every call, and
// only for finite values ("unit timezone not supported for type timestamp"
// is raised for a finite timestamp, not for infinity), so an invalid unit
// would fail exactly when some row reaches it.

// What tools write (issue 14), each total for the reason given, checked
// on PostgreSQL over extreme values in every test time zone by
// TestToolExpressionsAgainstPostgres (rewrite/tools_totality_test.go):
//
//   - date_trunc('week', d) on a date (Superset's weekly grain): week is a
//     valid unit for every type date_trunc takes (the date becomes
//     timestamptz first), so the unit check cannot fail; the conversion
//     and the truncation are guarded at the ends of the range like every
//     other unit (truncBounds).
//   - floor, ceil, ceiling, round, trunc of one number (functions.go):
//     total on every number type (NaN and ±Infinity map to themselves;
//     the result has no more digits than the argument). Not round(x, n):
//     a large n makes the scale grow.
//   - CAST(extract(field FROM x) AS int2/int4/int8) (Metabase's
//     month-of-year; extractCast): total when every finite value of the
//     field fits the type; the non-monotonic fields (month, dow, ...) are
//     NULL for ±infinity, the monotonic ones (year, epoch, julian, ...)
//     ±Infinity, which no integer holds: their argument is passed as NULL
//     when infinite. epoch to int4 is refused (a date's epoch reaches
//     1.9e14).
//   - extract(...) in arithmetic (Grafana's floor(extract(epoch FROM t) /
//     N) * N; arith.go): numeric, within extractRange for finite values,
//     and numeric carries ±Infinity through + - * / floor without failing
//     (Infinity * 0 is NaN, not an error).
//   - Division by a non-zero constant in group keys (Metabase's binning
//     floor((x - a) / w) * w): of an integer expression, PostgreSQL's
//     integer division is div() of the numeric operands, the same
//     quotient and total; of numeric, the same numeric division; of a
//     float, refused (computed in numeric it would change the key).
//   - date, timestamp or timestamptz ± an interval literal (Metabase's
//     week with a Sunday start; arith.go, datetimeInterval): the column is
//     passed as NULL outside [2000 BC, 292000 AD] once, and the intervals,
//     truncations and casts to date applied to it may add up to 2000
//     years: every step then stays inside the timestamp range, whatever
//     the time zone.
//   - Arithmetic in conditions (WHERE amount * quantity > 100;
//     condarith.go), printed as written: total when no value of the
//     operands' types can overflow the result type: integers and
//     numeric(p,s) columns (precision read at start) and number literals;
//     int4 * int4 is refused (it overflows int4), numeric(10,2) * int4
//     is accepted, floats and unconstrained numerics are refused.
//   - LIKE/ILIKE with a pattern bound as a parameter or computed from
//     one (knex; predicates.go): the value is checked by the proxy before
//     the charge (TypeCheck.Pattern); a pattern ending in the escape
//     character is refused there, as PostgreSQL would fail on it only when
//     a row reaches its end.

// extractFields are the fields extract(field FROM x) accepts for x of each
// type. date_part takes the same for timestamp and timestamptz; date_part
// of a date is a SQL function that converts the date to timestamp first,
// which fails beyond 294276 AD, so it is refused (extract of a date is
// not).
var extractFields = map[string][]string{
	"timestamp": {"microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month", "quarter", "year",
		"decade", "century", "millennium", "dow", "isodow", "doy", "epoch", "isoyear", "julian"},
	"timestamptz": {"microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month", "quarter", "year",
		"decade", "century", "millennium", "dow", "isodow", "doy", "epoch", "isoyear", "julian", "timezone", "timezone_hour", "timezone_minute"},
	"date": {"day", "week", "month", "quarter", "year", "decade", "century", "millennium", "dow", "isodow", "doy", "epoch", "isoyear", "julian"},
}

// truncUnits are the units date_trunc accepts for timestamp and
// timestamptz (and a date, which PostgreSQL converts to timestamptz).
var truncUnits = []string{"microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month", "quarter", "year", "decade", "century", "millennium"}

// date_trunc is not total near the lower end of the timestamp range (4714
// BC): truncating to the start of a month, year, decade, century or
// millennium can land before the first representable instant ("timestamp
// out of range"), and for timestamptz the truncation happens in local time,
// which a time zone offset (up to ±167 hours) or a local mean time offset
// with seconds moves across that end for every unit from minute up. A date
// is converted to timestamptz first, which fails beyond 294276 AD and, in
// time zones east of UTC, at the lower end. So the rewrite passes date_trunc
// NULL instead of a value before the bound of its unit (and, for a date,
// after 294276-12-23): a value PostgreSQL would have failed on (or, within
// the 8-day margin kept for time zones, one no real data holds) becomes a
// NULL key instead of an error. The bounds for timestamp are exact (the
// first instant each unit truncates without failing, found by scanning
// PostgreSQL 15); those for timestamptz and date add 8 days.
var (
	truncLowerTimestamp = map[string]string{
		"month": "4714-12-01 00:00:00 BC", "quarter": "4713-01-01 00:00:00 BC", "year": "4713-01-01 00:00:00 BC",
		"decade": "4711-01-01 00:00:00 BC", "century": "4700-01-01 00:00:00 BC", "millennium": "4000-01-01 00:00:00 BC",
	}
	truncLowerTimestamptz = map[string]string{
		"minute": "4714-12-02 00:00:00+00 BC", "hour": "4714-12-02 00:00:00+00 BC", "day": "4714-12-02 00:00:00+00 BC",
		"week": "4714-12-02 00:00:00+00 BC", "month": "4714-12-09 00:00:00+00 BC", "quarter": "4713-01-09 00:00:00+00 BC",
		"year": "4713-01-09 00:00:00+00 BC", "decade": "4711-01-09 00:00:00+00 BC", "century": "4700-01-09 00:00:00+00 BC",
		"millennium": "4000-01-09 00:00:00+00 BC",
	}
	// A date becomes timestamptz at local midnight: at least this late
	// for the conversion itself, and no later than truncUpperDate.
	truncLowerDate = "4714-12-02 BC"
	truncUpperDate = "294276-12-23"
)

// truncBounds returns the literals a date_trunc argument of type t must lie
// between (inclusive; "" for no bound) for unit.
func truncBounds(t, unit string) (lo, hi string) {
	switch t {
	case "timestamp":
		return truncLowerTimestamp[unit], ""
	case "timestamptz":
		return truncLowerTimestamptz[unit], ""
	case "date":
		lo := truncLowerDate
		if b := truncLowerTimestamptz[unit]; b != "" {
			lo = strings.Replace(b, " 00:00:00+00", "", 1)
		}
		return lo, truncUpperDate
	}
	// Unknown type (no column types): the bounds of every type at once;
	// untyped literals take the argument's type when parsed.
	if b := truncLowerTimestamptz[unit]; b != "" {
		return strings.Replace(b, "+00", "", 1), truncUpperDate
	}
	return truncLowerDate, truncUpperDate
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ColumnTypesSQL reads the type of every column of the tables named by $1
// ("schema.table"), as Options.ColumnTypes wants it: the builtin type's
// name, "enum" for an enum, a domain's base type. A string column with a
// nondeterministic collation gets a name the table does not know (LIKE
// fails on every call with such a collation), so only reading it is
// allowed. Each row: "schema.table.column", type.
const ColumnTypesSQL = `SELECT n.nspname || '.' || c.relname || '.' || a.attname,
	CASE WHEN coalesce(co.collisdeterministic, true) = false THEN t.typname || ' (nondeterministic collation)'
	     WHEN t.typtype = 'e' THEN 'enum'
	     WHEN t.typtype = 'd' AND bt.typtype = 'b' THEN bt.typname
	     WHEN t.typtype = 'd' AND bt.typtype = 'e' THEN 'enum'
	     WHEN t.typtype = 'b' AND tn.nspname = 'pg_catalog' THEN t.typname
	     ELSE tn.nspname || '.' || t.typname END
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_type bt ON bt.oid = t.typbasetype
LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
WHERE n.nspname || '.' || c.relname = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped`
