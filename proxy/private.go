package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// confidence of the error bounds reported with every answer.
const confidence = 0.95

// answer is a released (noised) result, kept in the answer cache so that
// repeating a question returns the same noise instead of fresh draws.
type answer struct {
	fields []pgproto3.FieldDescription
	rows   [][][]byte
	// charged is what the first release cost; a cache hit costs nothing.
	charged sensitivity.Share
	bounds  string // the per-column error bounds, for the NOTICE
}

// private answers a query over a private table: describe, charge, run the
// bounded rewrite, noise, release.
func (ss *session) private(ctx context.Context, st *rewrite.Statement) error {
	plan := st.Plan
	if plan.NumParams > 0 {
		return newError("42P02", "there is no parameter $1: the simple query protocol carries no parameters")
	}
	key := budget.CacheKey{Analyst: ss.user.Name, Query: st.Key, Epsilon: ss.epsilon, Delta: ss.delta, Mechanism: ss.mechanism}
	if a, ok := ss.srv.answers.Get(key); ok {
		ss.sendAnswer(a, true, budget.Spend{}, false)
		return nil
	}
	fields, err := ss.describe(ctx, plan)
	if err != nil {
		return err
	}
	spec, err := ss.releaseSpec(plan)
	if err != nil {
		return err
	}
	// The charge is durable before anything private is read, and it is kept
	// whatever happens next: a refund would make failures a side channel.
	spend, err := ss.srv.ledger.Charge(ctx, budget.Charge{Analyst: ss.user.Name, Epsilon: spec.total.Epsilon, Delta: spec.total.Delta, Fingerprint: st.Fingerprint})
	if err != nil {
		return err
	}
	ss.log.Info("charged", "fingerprint", st.Fingerprint, "epsilon", spec.total.Epsilon, "delta", spec.total.Delta)
	rows, err := ss.runBounded(ctx, plan)
	if err != nil {
		return err
	}
	a, err := release(plan, spec, fields, rows)
	if err != nil {
		return err
	}
	ss.srv.answers.Add(key, a)
	ss.sendAnswer(a, false, spend, true)
	return nil
}

// describe asks the upstream for the original statement's result columns
// (names, types) without running it. Parse analysis reads no table data, so
// its errors (unknown column, type mismatch) are safe to pass on.
func (ss *session) describe(ctx context.Context, plan *rewrite.Plan) ([]pgproto3.FieldDescription, error) {
	fds, ok := ss.srv.describes.Get(plan.DescribeSQL)
	if !ok {
		sd, err := ss.upstream.Conn().PgConn().Prepare(ctx, "", plan.DescribeSQL, nil)
		if err != nil {
			return nil, err
		}
		fds = sd.Fields
		ss.srv.describes.Add(plan.DescribeSQL, fds)
	}
	if len(fds) != len(plan.Outputs) {
		return nil, newError(codeInternal, "the database describes %d columns, the plan has %d", len(fds), len(plan.Outputs))
	}
	return rowDescription(fds).Fields, nil
}

// runBounded runs the rewritten SQL with a fresh secret salt and returns its
// rows as text. Database errors here could depend on private values, so the
// client only learns that the query failed.
func (ss *session) runBounded(ctx context.Context, plan *rewrite.Plan) ([][][]byte, error) {
	var salt [16]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, err
	}
	params := [][]byte{[]byte(hex.EncodeToString(salt[:]))}
	rr := ss.upstream.Conn().PgConn().ExecParams(ctx, plan.SQL, params, []uint32{oidText}, nil, nil)
	var rows [][][]byte
	for rr.NextRow() {
		vals := rr.Values()
		row := make([][]byte, len(vals))
		for i, v := range vals {
			if v != nil {
				row[i] = bytes.Clone(v)
			}
		}
		rows = append(rows, row)
	}
	if _, err := rr.Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			ss.log.Warn("rewritten query failed upstream", "code", pgErr.Code)
			if pgErr.Code == codeCanceled {
				return nil, &Error{Code: codeCanceled, Message: "canceling statement due to user request or statement timeout; the privacy charge is kept", cause: err}
			}
			if pgErr.Code == "25P02" {
				return nil, &Error{Code: "25P02", Message: "current transaction is aborted, commands ignored until end of transaction block", cause: err}
			}
		}
		return nil, &Error{Code: codeInternal, Message: "the database failed to run the private query; no value is shown and the privacy charge is kept", cause: err}
	}
	return rows, nil
}

// sendAnswer sends a released answer and, unless silenced, a NOTICE with
// its cost and error bounds.
func (ss *session) sendAnswer(a *answer, cached bool, spend budget.Spend, haveSpend bool) {
	ss.send(&pgproto3.RowDescription{Fields: a.fields})
	for _, r := range a.rows {
		ss.send(&pgproto3.DataRow{Values: r})
	}
	ss.send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT " + strconv.Itoa(len(a.rows)))})
	if !ss.notices {
		return
	}
	var msg string
	if cached {
		msg = fmt.Sprintf("dp: repeated query: the earlier noisy answer is returned and nothing is charged; 95%% error bounds: %s", a.bounds)
	} else {
		msg = fmt.Sprintf("dp: charged ε=%s δ=%s", formatNum(a.charged.Epsilon), formatNum(a.charged.Delta))
		if haveSpend {
			msg += fmt.Sprintf(" (remaining ε=%s δ=%s)", formatNum(spend.EpsilonRemaining()), formatNum(spend.DeltaRemaining()))
		}
		msg += "; 95% error bounds: " + a.bounds
	}
	ss.send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: msg})
}

// explainDP shows the rewrite, the sensitivity and noise of each aggregate,
// the split and the charge, without running anything or charging.
func (ss *session) explainDP(ctx context.Context, st *rewrite.Statement) error {
	plan := st.Plan
	fields, err := ss.describe(ctx, plan)
	if err != nil {
		return err
	}
	spec, err := ss.releaseSpec(plan)
	if err != nil {
		return err
	}
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	add("DP query over %s (privacy unit %s), mechanism %s", plan.Table.QualifiedName(), plan.Table.PrivacyUnit, spec.mech.Name())
	add("Contribution bounds: at most %d rows per unit per group, at most %d groups per unit", plan.MaxRows, plan.MaxGroups)
	add("Charge: ε=%s δ=%s (query ε=%s δ=%s, split among %d aggregates%s)", formatNum(spec.total.Epsilon), formatNum(spec.total.Delta),
		formatNum(ss.epsilon), formatNum(ss.delta), len(plan.Aggregates), map[bool]string{true: " and partition selection", false: ""}[plan.PartitionSelection])
	for i, o := range plan.Outputs {
		if o.Agg == nil {
			add("Column %s: group key%s", fields[i].Name, map[bool]string{true: " (public values: every one is released)", false: " (released only through partition selection)"}[len(plan.GroupKeys[o.GroupKey].PublicValues) > 0])
			continue
		}
		as := spec.aggs[aggIndex(plan, o.Agg)]
		for _, p := range []struct {
			what string
			p    part
		}{{"count", as.count}, {"sum", as.sum}} {
			if p.p.bound.L0 == 0 {
				continue
			}
			sd, _ := spec.mech.StdDev(p.p.bound.L0, p.p.bound.LInf, p.p.share.Epsilon, p.p.share.Delta)
			add("Column %s (%s, %s part): L0=%d L∞=%s, ε=%s δ=%s, noise std dev %s, 95%% error ±%s", fields[i].Name, o.Agg.Func, p.what,
				p.p.bound.L0, formatNum(p.p.bound.LInf), formatNum(p.p.share.Epsilon), formatNum(p.p.share.Delta), roundBound(sd), roundBound(p.p.errorBound(spec.mech)))
		}
	}
	if plan.PartitionSelection {
		add("Partition selection: a group is released when its noisy count of units (L∞=1, ε=%s δ=%s) reaches %s", formatNum(spec.sel.share.Epsilon), formatNum(spec.selDelta), roundBound(spec.threshold))
	}
	if sp, err := ss.srv.ledger.Spent(ctx, ss.user.Name); err == nil {
		add("Budget: ε remaining %s now, %s after this query; δ remaining %s now, %s after", formatNum(sp.EpsilonRemaining()), formatNum(math.Max(0, sp.EpsilonRemaining()-spec.total.Epsilon)),
			formatNum(sp.DeltaRemaining()), formatNum(math.Max(0, sp.DeltaRemaining()-spec.total.Delta)))
	}
	add("Rewritten SQL ($%d is a fresh secret salt per execution):", plan.NumParams+1)
	lines = append(lines, strings.Split(plan.SQL, "\n")...)
	rows := make([][]string, len(lines))
	for i, l := range lines {
		rows[i] = []string{l}
	}
	ss.sendRows([]string{"QUERY PLAN"}, []uint32{oidText}, rows, "EXPLAIN")
	return nil
}
