package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// This file turns the exact, bounded aggregates the rewritten query returns
// into the released answer: the budget split, partition selection (or the
// public keys), noise, post-processing (ORDER BY, LIMIT) and encoding.

// part is one noised quantity: its sensitivity and its share of the budget.
type part struct {
	bound sensitivity.Bound
	share sensitivity.Share
}

// aggSpec says how one aggregate is released. AVG uses count and sum;
// COUNT count; SUM sum; VARIANCE count, sum and sq; a quantile the
// exponential mechanism (quantile).
type aggSpec struct {
	count, sum, sq part
	quantile       *quantileSpec
}

// parts are every noised part of the aggregate, the one list that checks,
// charges and notices iterate (a part with LInf 0 is not noised).
func (as aggSpec) parts() []part { return []part{as.count, as.sum, as.sq} }

// quantileSpec is the exponential mechanism of one quantile aggregate: ε
// per group (the aggregate's share over the L0 groups a unit may touch,
// by sequential composition) and the utility's sensitivity.
type quantileSpec struct {
	eps, sensitivity float64
	l0               int64
}

// releaseSpec is everything needed to noise a plan's result, computed
// before the charge so that a bad parameter fails without charging.
type releaseSpec struct {
	mech  noise.Mechanism
	total sensitivity.Share
	aggs  []aggSpec
	// Partition selection: a group is released when its noisy number of
	// units reaches threshold.
	sel       part
	selDelta  float64 // δ of the selection: noise and threshold together
	noiseDel  float64
	threshold float64
}

func (ss *session) releaseSpec(plan *rewrite.Plan) (*releaseSpec, error) {
	mech, err := noise.ByName(ss.mechanism)
	if err != nil {
		return nil, newError(codeInvalidParameter, "%v", err)
	}
	mech = ss.srv.sampler(mech) // testnoise.go
	gaussian := ss.mechanism == conf.Gaussian
	pure := 0
	for _, a := range plan.Aggregates {
		if a.Kind == rewrite.AggQuantile {
			pure++
		}
	}
	perAgg, sel, total := sensitivity.SplitWith(ss.epsilon, ss.delta, len(plan.Aggregates), pure, plan.PartitionSelection, gaussian)
	spec := &releaseSpec{mech: mech, total: total}
	l0, r := plan.MaxGroups, plan.MaxRows
	half := sensitivity.Share{Epsilon: perAgg.Epsilon / 2, Delta: perAgg.Delta / 2}
	third := sensitivity.Share{Epsilon: perAgg.Epsilon / 3, Delta: perAgg.Delta / 3}
	for _, a := range plan.Aggregates {
		var as aggSpec
		switch a.Kind {
		case rewrite.AggCount:
			as.count = part{sensitivity.Count(l0, r), perAgg}
		case rewrite.AggCountDistinctUnit:
			as.count = part{sensitivity.DistinctUnits(l0), perAgg}
		case rewrite.AggSum:
			as.sum = part{sensitivity.Sum(l0, r, a.Lower, a.Upper), perAgg}
		case rewrite.AggAvg:
			// Half of the aggregate's share for the count, half for the
			// sum centred on the middle of the bounds (sequential composition).
			as.count = part{sensitivity.Count(l0, r), half}
			as.sum = part{sensitivity.CenteredSum(l0, r, a.Lower, a.Upper), half}
		case rewrite.AggCountDistinct:
			as.count = part{sensitivity.CountDistinct(l0, a.MaxDistinct), perAgg}
		case rewrite.AggVariance:
			// A third each for the count, the centred sum and the centred
			// sum of squares (sequential composition).
			as.count = part{sensitivity.Count(l0, r), third}
			as.sum = part{sensitivity.CenteredSum(l0, r, a.Lower, a.Upper), third}
			as.sq = part{sensitivity.CenteredSumOfSquares(l0, r, a.Lower, a.Upper), third}
		case rewrite.AggQuantile:
			// Pure ε-DP: the share's ε, divided among the L0 groups one
			// unit can change; no δ.
			as.quantile = &quantileSpec{eps: perAgg.Epsilon / float64(l0), sensitivity: sensitivity.QuantileUtility(r, a.Quantile), l0: l0}
		default:
			return nil, newError(codeInternal, "unknown aggregate kind %d", a.Kind)
		}
		spec.aggs = append(spec.aggs, as)
	}
	if plan.PartitionSelection {
		// The selection's δ pays for the threshold (the chance that a group
		// of one person passes it); Gaussian noise takes half of it.
		thresholdDelta := sel.Delta
		if gaussian {
			spec.noiseDel, thresholdDelta = sel.Delta/2, sel.Delta/2
		}
		spec.sel = part{sensitivity.DistinctUnits(l0), sensitivity.Share{Epsilon: sel.Epsilon, Delta: spec.noiseDel}}
		spec.selDelta = sel.Delta
		spec.threshold, err = mech.Threshold(l0, 1, sel.Epsilon, spec.noiseDel, thresholdDelta)
		if err != nil {
			return nil, newError(codeInvalidParameter, "partition selection: %v", err)
		}
	}
	// Check every noised part's parameters now: a share the sampler would
	// refuse (e.g. an ε below its floor of 2^-50, or a sensitivity that
	// overflows) must fail before the charge, not after it.
	parts := []part{spec.sel}
	for _, as := range spec.aggs {
		parts = append(parts, as.parts()...)
	}
	for _, p := range parts {
		if p.bound.LInf == 0 {
			continue
		}
		if !(p.bound.LInf < math.MaxFloat64) {
			return nil, newError(codeInvalidParameter, "a sensitivity of this query is not finite: narrow the bounds of its expressions")
		}
		if _, err := mech.StdDev(p.bound.L0, p.bound.LInf, p.share.Epsilon, p.share.Delta); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

func (p part) add(m noise.Mechanism, x float64) (float64, error) {
	if p.bound.LInf == 0 {
		// Degenerate bounds (e.g. lower = upper): the value cannot depend
		// on any person, so it needs no noise.
		return x, nil
	}
	return m.Add(x, p.bound.L0, p.bound.LInf, p.share.Epsilon, p.share.Delta)
}

func (p part) errorBound(m noise.Mechanism) float64 {
	if p.bound.LInf == 0 {
		return 0
	}
	t, err := m.ErrorBound(p.bound.L0, p.bound.LInf, p.share.Epsilon, p.share.Delta, confidence)
	if err != nil {
		return math.NaN()
	}
	return t
}

// group is one result row of the rewritten query, parsed.
type group struct {
	keys  [][]byte // raw text of each group key (nil = NULL)
	units float64
	vals  []float64 // by result column index
	// hists are the quantile histograms, by result column index.
	hists map[int][]float64
}

// parseNumArray reads the text form of a one-dimensional numeric array
// ("{1,2.5,NULL}"); NULL counts as 0.
func parseNumArray(b []byte) ([]float64, error) {
	s := strings.TrimSpace(string(b))
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, fmt.Errorf("not an array")
	}
	s = s[1 : len(s)-1]
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f == "NULL" {
			out = append(out, 0)
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// release turns the exact bounded aggregates into the released answer:
// partition selection (or public keys), noise, post-processing, encoding.
func release(plan *rewrite.Plan, spec *releaseSpec, fields []pgproto3.FieldDescription, rows [][][]byte) (*answer, error) {
	ncols := plan.UnitsCol + 1
	for _, a := range plan.Aggregates {
		ncols = max(ncols, a.SumCol+1, a.CountCol+1, a.SumSqCol+1, a.HistCol+1)
	}
	var groups []group
	for _, r := range rows {
		if len(r) < ncols {
			return nil, newError(codeInternal, "rewritten query returned %d columns, want %d", len(r), ncols)
		}
		g := group{vals: make([]float64, len(r))}
		for _, k := range plan.GroupKeys {
			g.keys = append(g.keys, r[k.ResultCol])
		}
		for i, v := range r {
			if v == nil {
				continue // an aggregate over no rows: 0
			}
			if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				g.vals[i] = f
			}
		}
		g.units = g.vals[plan.UnitsCol]
		for _, a := range plan.Aggregates {
			if a.HistCol < 0 {
				continue
			}
			h, err := parseNumArray(r[a.HistCol])
			if err != nil || len(h) != a.Buckets {
				return nil, newError(codeInternal, "rewritten query returned a malformed histogram")
			}
			if g.hists == nil {
				g.hists = map[int][]float64{}
			}
			g.hists[a.HistCol] = h
		}
		groups = append(groups, g)
	}

	switch {
	case len(plan.GroupKeys) == 0:
		if len(groups) == 0 {
			groups = []group{{vals: make([]float64, ncols)}}
		}
		groups = groups[:1]
	case !plan.PartitionSelection:
		groups = fillPublicKeys(plan, groups, ncols)
	default:
		kept := groups[:0]
		for _, g := range groups {
			nu, err := spec.sel.add(spec.mech, g.units)
			if err != nil {
				return nil, err
			}
			if nu >= spec.threshold {
				kept = append(kept, g)
			}
		}
		groups = kept
	}
	// Order released groups by their keys, so that row order reflects
	// nothing but the released keys.
	sort.SliceStable(groups, func(i, j int) bool { return compareKeys(groups[i].keys, groups[j].keys) < 0 })

	type outRow struct {
		vals [][]byte
		nums []float64
	}
	out := make([]outRow, 0, len(groups))
	for _, g := range groups {
		noisy := make([]float64, len(plan.Aggregates))
		for i, a := range plan.Aggregates {
			v, err := releaseAggregate(a, spec.aggs[i], spec.mech, g)
			if err != nil {
				return nil, err
			}
			noisy[i] = v
		}
		row := outRow{vals: make([][]byte, len(plan.Outputs)), nums: make([]float64, len(plan.Outputs))}
		for i, o := range plan.Outputs {
			if o.GroupKey >= 0 {
				row.vals[i] = g.keys[o.GroupKey]
				if f, err := strconv.ParseFloat(string(g.keys[o.GroupKey]), 64); err == nil {
					row.nums[i] = f
				} else {
					row.nums[i] = math.NaN()
				}
				continue
			}
			idx := aggIndex(plan, o.Agg)
			row.vals[i], row.nums[i] = encodeNoisy(noisy[idx], fields[i].DataTypeOID, o.Agg)
		}
		out = append(out, row)
	}
	if len(plan.OrderBy) > 0 && plan.Post == nil {
		sort.SliceStable(out, func(i, j int) bool {
			for _, k := range plan.OrderBy {
				c := compareOut(out[i].vals[k.Output], out[j].vals[k.Output], out[i].nums[k.Output], out[j].nums[k.Output], k.NullsFirst)
				if c == 0 {
					continue
				}
				if k.Descending {
					return c > 0
				}
				return c < 0
			}
			return false
		})
	}
	if plan.Post == nil { // else LIMIT and OFFSET are applied by the post-processing query
		start := min(int(max(plan.Offset, 0)), len(out))
		out = out[start:]
		if plan.Limit >= 0 && int64(len(out)) > plan.Limit {
			out = out[:plan.Limit]
		}
	}
	a := &answer{fields: fields, charged: spec.total, bounds: describeBounds(plan, spec, fields)}
	for _, r := range out {
		a.rows = append(a.rows, r.vals)
	}
	return a, nil
}

func aggIndex(plan *rewrite.Plan, agg *rewrite.Aggregate) int {
	for i, a := range plan.Aggregates {
		if a == agg {
			return i
		}
	}
	return 0
}

// releaseAggregate noises one aggregate of one group.
func releaseAggregate(a *rewrite.Aggregate, as aggSpec, m noise.Mechanism, g group) (float64, error) {
	vals := g.vals
	switch a.Kind {
	case rewrite.AggVariance:
		return releaseVariance(a, as, m, vals)
	case rewrite.AggQuantile:
		q := as.quantile
		return quantileEM(rand.Reader, g.hists[a.HistCol], a.Lower, a.Upper, a.Quantile, q.eps, q.sensitivity)
	case rewrite.AggCount, rewrite.AggCountDistinctUnit, rewrite.AggCountDistinct:
		v, err := as.count.add(m, vals[a.CountCol])
		return math.Max(0, v), err
	case rewrite.AggSum:
		v, err := as.sum.add(m, vals[a.SumCol])
		if err != nil {
			return 0, err
		}
		// Post-processing: a sum of values in [lower, upper] has that sign.
		if a.Lower >= 0 {
			v = math.Max(0, v)
		}
		if a.Upper <= 0 {
			v = math.Min(0, v)
		}
		return v, nil
	case rewrite.AggAvg:
		mid := (a.Lower + a.Upper) / 2
		n, err := as.count.add(m, vals[a.CountCol])
		if err != nil {
			return 0, err
		}
		c, err := as.sum.add(m, vals[a.SumCol]-mid*vals[a.CountCol])
		if err != nil {
			return 0, err
		}
		return math.Min(a.Upper, math.Max(a.Lower, mid+c/math.Max(n, 1))), nil
	}
	return 0, fmt.Errorf("unknown aggregate kind %d", a.Kind)
}

// encodeNoisy formats a released value in the text format of the type
// PostgreSQL gives the original aggregate. Integer types are rounded.
func encodeNoisy(v float64, oid uint32, a *rewrite.Aggregate) ([]byte, float64) {
	switch oid {
	case oidInt8, oidInt4, oidInt2:
		r := math.Round(v)
		return []byte(strconv.FormatFloat(r, 'f', 0, 64)), r
	case oidFloat8:
		return []byte(strconv.FormatFloat(v, 'g', -1, 64)), v
	case oidFloat4:
		return []byte(strconv.FormatFloat(v, 'g', -1, 32)), v
	default: // numeric, and anything else that reads a plain decimal
		if a != nil && (a.Kind == rewrite.AggCount || a.Kind == rewrite.AggCountDistinctUnit || a.Kind == rewrite.AggCountDistinct) {
			v = math.Round(v)
		}
		return []byte(formatNum(v)), v
	}
}

// fillPublicKeys returns one group for every combination of public key
// values, with zeros where the database had no rows, and none other.
func fillPublicKeys(plan *rewrite.Plan, groups []group, ncols int) []group {
	byKey := make(map[string]group, len(groups))
	for _, g := range groups {
		byKey[joinKeys(g.keys)] = g
	}
	combos := [][][]byte{nil}
	for _, k := range plan.GroupKeys {
		var next [][][]byte
		for _, c := range combos {
			for _, v := range k.PublicValues {
				next = append(next, append(append([][]byte(nil), c...), []byte(v)))
			}
		}
		combos = next
	}
	out := make([]group, 0, len(combos))
	for _, c := range combos {
		if g, ok := byKey[joinKeys(c)]; ok {
			out = append(out, g)
			continue
		}
		out = append(out, group{keys: c, vals: make([]float64, ncols)})
	}
	return out
}

func joinKeys(keys [][]byte) string {
	var b strings.Builder
	for _, k := range keys {
		if k == nil {
			b.WriteString("\x00N")
		} else {
			b.WriteString("\x00V")
			b.Write(k)
		}
	}
	return b.String()
}

func compareKeys(a, b [][]byte) int {
	for i := range min(len(a), len(b)) {
		switch {
		case a[i] == nil && b[i] == nil:
			continue
		case a[i] == nil:
			return 1
		case b[i] == nil:
			return -1
		}
		if c := bytes.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// compareOut orders two output values: numerically when both parse as
// numbers, byte-wise otherwise; NULLs as PostgreSQL's defaults say.
func compareOut(a, b []byte, an, bn float64, nullsFirst bool) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		if nullsFirst {
			return -1
		}
		return 1
	case b == nil:
		if nullsFirst {
			return 1
		}
		return -1
	}
	if !math.IsNaN(an) && !math.IsNaN(bn) {
		switch {
		case an < bn:
			return -1
		case an > bn:
			return 1
		}
		return 0
	}
	return bytes.Compare(a, b)
}

// describeBounds words the 95% error bound of each noisy column.
func describeBounds(plan *rewrite.Plan, spec *releaseSpec, fields []pgproto3.FieldDescription) string {
	var parts []string
	for i, o := range plan.Outputs {
		if o.Agg == nil {
			continue
		}
		as := spec.aggs[aggIndex(plan, o.Agg)]
		name := string(fields[i].Name)
		switch o.Agg.Kind {
		case rewrite.AggVariance:
			parts = append(parts, fmt.Sprintf("%s: from a noisy count ±%s, centred sum ±%s and sum of squares ±%s", name,
				roundBound(as.count.errorBound(spec.mech)), roundBound(as.sum.errorBound(spec.mech)), roundBound(as.sq.errorBound(spec.mech))))
		case rewrite.AggQuantile:
			parts = append(parts, fmt.Sprintf("%s: exponential mechanism over %d buckets of width %s (ε=%s per group)", name,
				o.Agg.Buckets, roundBound((o.Agg.Upper-o.Agg.Lower)/float64(o.Agg.Buckets)), formatNum(as.quantile.eps)))
		case rewrite.AggCount, rewrite.AggCountDistinctUnit, rewrite.AggCountDistinct:
			parts = append(parts, fmt.Sprintf("%s: ±%s (95%%)", name, roundBound(as.count.errorBound(spec.mech))))
		case rewrite.AggSum:
			parts = append(parts, fmt.Sprintf("%s: ±%s (95%%)", name, roundBound(as.sum.errorBound(spec.mech))))
		case rewrite.AggAvg:
			parts = append(parts, fmt.Sprintf("%s: ±%s/n (95%%; n = rows in the group, itself ±%s)", name,
				roundBound(as.sum.errorBound(spec.mech)), roundBound(as.count.errorBound(spec.mech))))
		}
	}
	return strings.Join(parts, ", ")
}

func roundBound(v float64) string { return humanBound(v) } // see explain.go

// releaseVariance releases VARIANCE/STDDEV (and their _samp/_pop forms)
// from three noisy sums over values clamped to [lower, upper], centred on
// mid = (lower+upper)/2 with half-width w: the count n, S = Σ(x−mid) and
// Q = Σ(x−mid)² (noised as Q − n·w²/2, whose sensitivity is half that of
// Q). Then, as post-processing, mean = S/n ∈ [−w, w], E[(x−mid)²] = Q/n ∈
// [0, w²], var_pop = E[(x−mid)²] − mean² ∈ [0, w²] (the largest variance of
// values in an interval of half-width w), var_samp = var_pop·n/(n−1).
// Centring on mid makes the error depend on the width of the range, not
// on its distance from zero.
func releaseVariance(a *rewrite.Aggregate, as aggSpec, m noise.Mechanism, vals []float64) (float64, error) {
	mid, w := (a.Lower+a.Upper)/2, (a.Upper-a.Lower)/2
	c := vals[a.CountCol]
	n, err := as.count.add(m, c)
	if err != nil {
		return 0, err
	}
	s, err := as.sum.add(m, vals[a.SumCol])
	if err != nil {
		return 0, err
	}
	q, err := as.sq.add(m, vals[a.SumSqCol]-c*w*w/2)
	if err != nil {
		return 0, err
	}
	_ = mid
	nn := math.Max(n, 1)
	mean := math.Min(w, math.Max(-w, s/nn))
	ex2 := math.Min(w*w, math.Max(0, (q+nn*w*w/2)/nn))
	v := math.Min(w*w, math.Max(0, ex2-mean*mean))
	if a.Sample && nn >= 2 {
		v *= nn / (nn - 1)
	}
	if a.Stddev {
		v = math.Sqrt(v)
	}
	return v, nil
}

// quantileEM draws the p-quantile of values in [lower, upper] from a
// histogram of len(hist) equal buckets with the exponential mechanism
// (Dwork & Roth §3.4; Smith 2011): bucket b is chosen with probability
// ∝ exp(ε·u(b)/(2Δu)), u(b) = −dist(p·N, [L_b, L_b+c_b]) where L_b is the
// count below b and N the total, and the answer is uniform within it.
// Google's go/v3 library has no quantile mechanism, so this small sampler
// is written here: the choice uses the Gumbel-max trick (argmax of
// ε·u/(2Δu) + Gumbel noise is an exact sample of the exponential
// mechanism) with uniforms from crypto/rand with 53 random bits, and the
// utilities take few distinct values on a coarse grid, so the
// floating-point weakness of naive Laplace samplers does not arise in the
// same way; the output's position inside the bucket reveals nothing more.
func quantileEM(rnd io.Reader, hist []float64, lower, upper, p, eps, du float64) (float64, error) {
	if len(hist) == 0 || !(upper > lower) {
		return lower, nil
	}
	if !(eps > 0) || !(du > 0) {
		return 0, newError(codeInvalidParameter, "quantile: ε and sensitivity must be > 0")
	}
	var total float64
	for _, c := range hist {
		total += math.Max(c, 0)
	}
	target := p * total
	best, bestScore := 0, math.Inf(-1)
	below := 0.0
	for b, c := range hist {
		c = math.Max(c, 0)
		dist := 0.0
		switch {
		case target < below:
			dist = below - target
		case target > below+c:
			dist = target - below - c
		}
		below += c
		u, err := uniform(rnd)
		if err != nil {
			return 0, err
		}
		score := -eps*dist/(2*du) - math.Log(-math.Log(u))
		if score > bestScore {
			best, bestScore = b, score
		}
	}
	width := (upper - lower) / float64(len(hist))
	u, err := uniform(rnd)
	if err != nil {
		return 0, err
	}
	return math.Min(upper, lower+(float64(best)+u)*width), nil
}

// uniform returns a uniform float64 in (0, 1) from 53 random bits.
func uniform(rnd io.Reader) (float64, error) {
	var b [8]byte
	for {
		if _, err := io.ReadFull(rnd, b[:]); err != nil {
			return 0, err
		}
		v := binary.LittleEndian.Uint64(b[:]) >> 11
		if v != 0 {
			return float64(v) / (1 << 53), nil
		}
	}
}

// typeNames maps built-in type OIDs to names for the post-processing casts.
// It is never registered into after init and TypeForOID only reads, so it
// is safe to share between sessions.
var typeNames = pgtype.NewMap()

// checkPost asks the upstream to analyse the original statement (parse
// analysis reads no table data) so that an ill-typed HAVING or output
// expression is reported before anything is charged.
func (ss *session) checkPost(ctx context.Context, plan *rewrite.Plan) error {
	if plan.Post == nil {
		return nil
	}
	_, err := ss.upstream.Conn().PgConn().Prepare(ctx, "", plan.OriginalSQL, nil)
	return err
}

// postProcess computes the original select list, HAVING, ORDER BY, LIMIT
// and OFFSET over the released rows (post-processing: Dwork & Roth,
// Prop. 2.1). It runs in PostgreSQL, for exact semantics and result types,
// over the noisy values only: they are sent as text arrays and cast back
// to the types the database gave them; the expressions come from the
// rewrite, which lets them reference nothing but those values.
func (ss *session) postProcess(ctx context.Context, plan *rewrite.Plan, a *answer) (*answer, error) {
	sql, params := postSQL(plan, a)
	oids := make([]uint32, len(params))
	for i := range oids {
		oids[i] = 1009 // text[]
	}
	rr := ss.upstream.Conn().PgConn().ExecParams(ctx, sql, params, oids, nil, nil)
	fields := rowDescription(rr.FieldDescriptions()).Fields
	rows := collectRows(rr)
	if _, err := rr.Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "42")) {
			// The post-processing query sees only released values: its
			// data errors (division by zero, ...) reveal nothing more.
			return nil, &Error{Code: pgErr.Code, Message: "post-processing of the noisy result failed (the privacy charge is kept): " + pgErr.Message, cause: err}
		}
		return nil, &Error{Code: codeInternal, Message: "post-processing of the noisy result failed; the privacy charge is kept", cause: err}
	}
	return &answer{fields: fields, rows: rows, charged: a.charged, bounds: a.bounds}, nil
}

// postSQL builds the post-processing query and its parameters: one text
// array per released column.
func postSQL(plan *rewrite.Plan, a *answer) (string, [][]byte) {
	n := len(a.fields)
	var casts, us, ps []string
	params := make([][]byte, n)
	for i, f := range a.fields {
		name := "text"
		if t, ok := typeNames.TypeForOID(f.DataTypeOID); ok {
			name = t.Name
		}
		casts = append(casts, fmt.Sprintf("u.c%d::%s AS dp_c%d", i, name, i))
		us = append(us, fmt.Sprintf("c%d", i))
		ps = append(ps, fmt.Sprintf("$%d::text[]", i+1))
		var b strings.Builder
		b.WriteByte('{')
		for j, r := range a.rows {
			if j > 0 {
				b.WriteByte(',')
			}
			if r[i] == nil {
				b.WriteString("NULL")
				continue
			}
			b.WriteByte('"')
			for _, ch := range string(r[i]) {
				if ch == '"' || ch == '\\' {
					b.WriteByte('\\')
				}
				b.WriteRune(ch)
			}
			b.WriteByte('"')
		}
		b.WriteByte('}')
		params[i] = []byte(b.String())
	}
	sql := "SELECT " + plan.Post.Targets + " FROM (SELECT " + strings.Join(casts, ", ") +
		" FROM unnest(" + strings.Join(ps, ", ") + ") AS u(" + strings.Join(us, ", ") + ")) AS dp"
	if plan.Post.Where != "" {
		sql += " WHERE " + plan.Post.Where
	}
	if plan.Post.OrderBy != "" {
		sql += " ORDER BY " + plan.Post.OrderBy
	}
	if plan.Limit >= 0 {
		sql += " LIMIT " + strconv.FormatInt(plan.Limit, 10)
	}
	if plan.Offset > 0 {
		sql += " OFFSET " + strconv.FormatInt(plan.Offset, 10)
	}
	return sql, params
}
