package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/dp"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// answer is a released (noised) result, kept in the answer cache so that
// repeating a question returns the same noise instead of fresh draws.
type answer struct {
	fields []pgproto3.FieldDescription
	rows   [][][]byte // text format
	// charged is what the first release cost; a cache hit costs nothing.
	charged sensitivity.Share
	bounds  string // the per-column error bounds, for the NOTICE
	detail  string // the contribution bounds and their bias, the NOTICE's DETAIL
	// notBefore is when the first asker got it (clock.go): a repeat is
	// not answered earlier.
	notBefore time.Time
}

// params are the client's parameters bound to a statement (extended
// protocol); nil for the simple protocol.
// maxParams is the most parameters one Bind can carry (a 16-bit count).
const maxParams = 65535

type params struct {
	values  [][]byte
	formats []int16 // one per value
}

// key renders the parameters for the answer cache: same text, same
// parameters, same question.
func (p *params) key() string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for i, v := range p.values {
		if v == nil {
			b.WriteString("N;")
			continue
		}
		fmt.Fprintf(&b, "%d:%d:%x;", p.formats[i], len(v), v)
	}
	return b.String()
}

// description is what the upstream says about the original statement:
// its parameter types and result columns.
type description struct {
	paramOIDs []uint32
	fields    []pgproto3.FieldDescription
}

// privateResult answers a query over a private table. Read it top to
// bottom: analyse (parameters, constants, the cache key) → spec (describe
// the result, the release's every noised part, the checks that need no
// private row) → claim and charge (the ledger) → run bounded → release
// (noise, then post-processing) → store → send. Everything that can fail
// whatever the private rows hold fails before the charge.
func (ss *session) privateResult(ctx context.Context, st *rewrite.Statement, p *params, paramOIDs []uint32) (*result, error) {
	if len(st.Plan.Branches) > 0 {
		return ss.unionResult(ctx, st, p, paramOIDs)
	}
	if st.Plan.Auto != nil {
		return ss.autoResult(ctx, st, p, paramOIDs) // autobounds.go
	}
	clk := ss.startClock() // clock.go: the response leaves at the end of a time slot
	defer ss.stopClock(clk)
	defer clk.release(ctx)

	// Analyse: the parameters, the constants, the question's key.
	plan, cv, key, err := ss.analyseQuestion(ctx, st, p, paramOIDs)
	if err != nil {
		return nil, err
	}
	if r, ok := ss.cachedAnswer(ctx, clk, key); ok {
		return r, nil
	}

	// Spec: what the release will be, and every check that reads no
	// private row, before anything is charged.
	desc, spec, err := ss.specPrivate(ctx, plan, p, paramOIDs, cv)
	if err != nil {
		return nil, err
	}

	// Keys with public values only, no aggregate: the answer is every
	// combination of the configured values whatever the rows hold, so no
	// private row is read and nothing is charged (the NOTICE says so).
	if spec.ReadsNoRow() {
		return ss.publicKeysResult(ctx, plan, spec, desc)
	}

	// Claim the question in the ledger (answer.go): a question answered
	// before, by any proxy sharing the ledger, is answered again for free.
	claim, cached, err := ss.claimAnswer(ctx, key)
	if err != nil {
		return nil, err
	}
	defer claim.Release()
	defer clk.release(ctx) // before the claim goes: a repeat waiting on it is answered no earlier
	if cached != nil {
		ss.cacheHit(ctx)
		return ss.answerResult(cached, true, budget.Spend{}), nil
	}
	if err := clk.check(); err != nil {
		return nil, err
	}
	// The charge is durable before anything private is read, and it is kept
	// whatever happens next: a refund would make failures a side channel.
	charge, err := ss.charge(st, spec)
	if err != nil {
		return nil, err
	}
	spend, err := ss.chargeLedger(ctx, claim, charge)
	if err != nil {
		return nil, err
	}

	// Run bounded: max_query_time and cancels stop it.
	var rows [][][]byte
	err = clk.run(ctx, func(ctx context.Context) error {
		rows, err = ss.runBounded(ctx, plan, p, desc.paramOIDs, cv)
		return err
	})
	if err != nil {
		return nil, err
	}

	// Release: noise (package dp), then post-processing (postprocess.go).
	a, err := release(plan, spec, desc.fields, rows)
	if err != nil {
		return nil, err
	}
	if plan.Post != nil {
		if a, err = ss.postProcess(ctx, plan, a); err != nil {
			return nil, err
		}
	}

	// Stored before anyone sees it, or withheld (the charge is kept).
	a.notBefore = clk.slotEnd(time.Now())
	if err := ss.storeAnswer(ctx, claim, key, a); err != nil {
		return nil, err
	}
	// Send.
	return withBudgetDetail(ss.answerResult(a, false, spend), spend, claim), nil // tables.go
}

// unionResult answers a UNION ALL of DP queries (rewrite.Plan.Branches)
// in the steps of privateResult: the constants of every branch → the
// union's description (its row description, as PostgreSQL unifies the
// branches' types) and each branch's spec and checks → one claim and ONE
// charge, the sum of the branches' costs, before any branch runs → run
// each branch bounded → release each → concatenate, post-process the
// union's ORDER BY/LIMIT → store → send, the NOTICE stating the sum.
func (ss *session) unionResult(ctx context.Context, st *rewrite.Statement, p *params, paramOIDs []uint32) (*result, error) {
	clk := ss.startClock()
	defer ss.stopClock(clk)
	defer clk.release(ctx)
	plan := st.Plan
	n := len(plan.Branches)

	// Analyse: the parameters, every branch's constants, the key.
	if err := checkParamCount(plan, p); err != nil {
		return nil, err
	}
	settings, err := ss.renderSettings(ctx)
	if err != nil {
		return nil, err
	}
	cvs := make([]*constValues, n)
	ckey := ""
	for i, b := range plan.Branches {
		if cvs[i], err = ss.evalConstants(ctx, b, p, paramOIDs); err != nil {
			return nil, err
		}
		ckey += cvs[i].key() + "|"
	}
	plan, pkeys, err := ss.withPublicKeys(ctx, plan) // publickeys.go
	if err != nil {
		return nil, err
	}
	key := ss.cacheKey(st, p.key()+ckey+pkeys, settings)
	if r, ok := ss.cachedAnswer(ctx, clk, key); ok {
		return r, nil
	}

	// Spec: the union's description and post-processing check, then
	// each branch's, before anything is charged.
	desc, err := ss.describe(ctx, plan, paramOIDs)
	if err != nil {
		return nil, err
	}
	if err := ss.checkPost(ctx, plan); err != nil {
		return nil, err
	}
	descs := make([]*description, n)
	specs := make([]*dp.Spec, n)
	names := make([][]string, n)
	free := true
	for i, b := range plan.Branches {
		if descs[i], specs[i], err = ss.specPrivate(ctx, b, p, desc.paramOIDs, cvs[i]); err != nil {
			return nil, err
		}
		for _, f := range descs[i].fields {
			names[i] = append(names[i], string(f.Name))
		}
		free = free && specs[i].ReadsNoRow()
	}
	u, err := ss.unionSpec(plan, specs) // release.go
	if err != nil {
		return nil, err
	}

	// Claim and charge the sum once, before any branch runs; none when no
	// branch reads a row (keys with public values only).
	var claim *budget.Claim
	var spend budget.Spend
	if !free {
		var cached *answer
		if claim, cached, err = ss.claimAnswer(ctx, key); err != nil {
			return nil, err
		}
		defer claim.Release()
		defer clk.release(ctx) // before the claim goes
		if cached != nil {
			ss.cacheHit(ctx)
			return ss.answerResult(cached, true, budget.Spend{}), nil
		}
		if err := clk.check(); err != nil {
			return nil, err
		}
		charge, err := ss.unionCharge(st, u) // answer.go
		if err != nil {
			return nil, err
		}
		if spend, err = ss.chargeLedger(ctx, claim, charge); err != nil {
			return nil, err
		}
	}

	// Run each branch bounded, release each, concatenate, post-process.
	a, err := ss.runUnion(ctx, clk, plan, specs, p, desc, descs, cvs)
	if err != nil {
		return nil, err
	}
	a.bounds = u.Bounds(names)
	a.detail = u.BiasText()

	// Stored before anyone sees it (a free answer draws no noise).
	if claim != nil {
		a.notBefore = clk.slotEnd(time.Now())
		if err := ss.storeAnswer(ctx, claim, key, a); err != nil {
			return nil, err
		}
	}
	return withBudgetDetail(ss.answerResult(a, false, spend), spend, claim), nil // tables.go
}

// runUnion runs each branch bounded (a branch that reads no row is not
// run), releases each, concatenates their rows under the union's row
// description and applies the union's ORDER BY/LIMIT to the released rows.
func (ss *session) runUnion(ctx context.Context, clk *privateClock, plan *rewrite.Plan, specs []*dp.Spec, p *params, desc *description, descs []*description, cvs []*constValues) (*answer, error) {
	out := &answer{fields: desc.fields}
	for i, b := range plan.Branches {
		var rows [][][]byte
		if !specs[i].ReadsNoRow() {
			err := clk.run(ctx, func(ctx context.Context) error {
				var err error
				rows, err = ss.runBounded(ctx, b, p, descs[i].paramOIDs, cvs[i])
				return err
			})
			if err != nil {
				return nil, err
			}
		}
		a, err := release(b, specs[i], descs[i].fields, rows)
		if err != nil {
			return nil, err
		}
		if b.Post != nil {
			if a, err = ss.postProcess(ctx, b, a); err != nil {
				return nil, err
			}
		}
		for _, r := range a.rows {
			if len(r) != len(out.fields) {
				return nil, fail(pgerr.InternalError, "branch %d released rows of %d columns, the union has %d", i+1, len(r), len(out.fields))
			}
		}
		out.rows = append(out.rows, a.rows...)
		out.charged.Epsilon += a.charged.Epsilon
		out.charged.Delta += a.charged.Delta
	}
	if plan.Post != nil {
		return ss.postProcess(ctx, plan, out)
	}
	return out, nil
}

// publicKeysResult answers a plan whose release reads no row
// (dp.Spec.ReadsNoRow): the public key combinations, post-processed.
func (ss *session) publicKeysResult(ctx context.Context, plan *rewrite.Plan, spec *dp.Spec, desc *description) (*result, error) {
	a, err := release(plan, spec, desc.fields, nil)
	if err != nil {
		return nil, err
	}
	if plan.Post != nil {
		if a, err = ss.postProcess(ctx, plan, a); err != nil {
			return nil, err
		}
	}
	return ss.answerResult(a, false, budget.Spend{}), nil
}

// specPrivate is everything known about a fresh private query before the
// charge: the database's description of its result, the release's spec
// (release.go, package dp: every noised part checked) and the checks that
// read no private row (postprocess.go, precharge.go).
func (ss *session) specPrivate(ctx context.Context, plan *rewrite.Plan, p *params, paramOIDs []uint32, cv *constValues) (*description, *dp.Spec, error) {
	desc, err := ss.describe(ctx, plan, paramOIDs)
	if err != nil {
		return nil, nil, err
	}
	spec, err := ss.releaseSpec(plan)
	if err != nil {
		return nil, nil, err
	}
	if err := ss.checkPost(ctx, plan); err != nil {
		return nil, nil, err
	}
	if err := ss.checkAnswerable(ctx, plan, p, desc.paramOIDs, cv); err != nil {
		return nil, nil, err
	}
	return desc, spec, nil
}

// checkParamCount refuses a private query whose bound parameters do not
// match it, or that leave no room for the rewrite's own.
func checkParamCount(plan *rewrite.Plan, p *params) error {
	nparams := 0
	if p != nil {
		nparams = len(p.values)
	}
	if plan.NumParams > nparams {
		return refuse(pgerr.ProtocolViolation, "the query has %d parameters but %d were bound", plan.NumParams, nparams)
	}
	if nparams >= maxParams {
		// The rewrite binds its seed as one more parameter.
		return refuse(pgerr.ProgramLimitExceeded, "a query over a private table may bind at most %d parameters", maxParams-1)
	}
	return nil
}

// describe asks the upstream for the original statement's parameter and
// result types without running it. Parse analysis reads no table data, so
// its errors (unknown column, type mismatch) are safe to pass on.
func (ss *session) describe(ctx context.Context, plan *rewrite.Plan, paramOIDs []uint32) (*description, error) {
	defer upstreamTimer(ctx)()
	key := fmt.Sprint(paramOIDs) + "\x00" + plan.DescribeSQL
	d, ok := ss.srv.describes.Get(key)
	if !ok {
		sd, err := ss.upstream.Conn().PgConn().Prepare(ctx, "", plan.DescribeSQL, paramOIDs)
		if err != nil {
			return nil, err
		}
		d = &description{paramOIDs: sd.ParamOIDs, fields: rowDescription(sd.Fields).Fields}
		ss.srv.describes.Add(key, d)
	}
	if len(d.fields) != len(plan.Outputs) {
		return nil, fail(pgerr.InternalError, "the database describes %d columns, the plan has %d", len(d.fields), len(plan.Outputs))
	}
	return d, nil
}

// runBounded runs the rewritten SQL with the client's parameters and a
// fresh secret seed (64 bits from crypto/rand) and returns its rows as
// text. Database errors here could depend on private values, so the client
// only learns that the query failed.
func (ss *session) runBounded(ctx context.Context, plan *rewrite.Plan, p *params, paramOIDs []uint32, cv *constValues) ([][][]byte, error) {
	defer upstreamTimer(ctx)()
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, err
	}
	values, formats, oids := boundParams(plan, p, paramOIDs, cv, seed) // consts.go
	end, err := ss.enterPrivate(ctx)
	if err != nil {
		return nil, err
	}
	rr := ss.upstream.Conn().PgConn().ExecParams(ctx, plan.SQL, values, oids, formats, nil)
	rows := collectRows(rr)
	_, err = rr.Close()
	if endErr := end(); err == nil {
		err = endErr
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			ss.log.Warn("rewritten query failed upstream", "code", pgErr.Code)
		}
		return nil, privateFailed(err)
	}
	return rows, nil
}

// analyseQuestion is the first step of a private query with one plan
// (privateResult, autoResult): the parameters checked, the constants
// evaluated (consts.go: before the cache, whose key holds their values,
// and before the charge), the values of group keys from public tables
// filled in (publickeys.go, which key the cache too), and the question's
// key in the answer cache.
func (ss *session) analyseQuestion(ctx context.Context, st *rewrite.Statement, p *params, paramOIDs []uint32) (*rewrite.Plan, *constValues, budget.CacheKey, error) {
	plan := st.Plan
	if err := checkParamCount(plan, p); err != nil {
		return nil, nil, budget.CacheKey{}, err
	}
	settings, err := ss.renderSettings(ctx)
	if err != nil {
		return nil, nil, budget.CacheKey{}, err
	}
	cv, err := ss.evalConstants(ctx, plan, p, paramOIDs)
	if err != nil {
		return nil, nil, budget.CacheKey{}, err
	}
	plan, pkeys, err := ss.withPublicKeys(ctx, plan)
	if err != nil {
		return nil, nil, budget.CacheKey{}, err
	}
	return plan, cv, ss.cacheKey(st, p.key()+cv.key()+pkeys, settings), nil
}

// cacheKey is the key of st's answer in the answer cache and the ledger:
// the analyst, the question, the session's ε, δ and mechanism, values
// (parameters, constants, public keys) and rendering settings.
func (ss *session) cacheKey(st *rewrite.Statement, values, settings string) budget.CacheKey {
	return budget.CacheKey{Analyst: ss.user.Name, Query: st.Key, Epsilon: ss.epsilon, Delta: ss.delta, Mechanism: ss.srv.cacheMechanism(ss.mechanism), Params: values, Settings: settings}
}

// cachedAnswer is key's answer from this proxy's memory, sent at the end
// of clk's time slot, if it holds one.
func (ss *session) cachedAnswer(ctx context.Context, clk *privateClock, key budget.CacheKey) (*result, bool) {
	a, ok := ss.srv.answers.Get(key)
	if !ok {
		return nil, false
	}
	clk.after(a.notBefore)
	ss.cacheHit(ctx)
	return ss.answerResult(a, true, budget.Spend{}), true
}

// answerResult wraps a released answer with its NOTICE (cost and error
// bounds) unless the session silenced notices.
func (ss *session) answerResult(a *answer, cached bool, spend budget.Spend) *result {
	r := &result{fields: a.fields, rows: a.rows, tag: "SELECT " + strconv.Itoa(len(a.rows))}
	if !ss.notices {
		return r
	}
	r.noticeDetail = a.detail
	if cached {
		r.notice = dp.NoticeText(a.bounds, true, 0, 0, 0, 0)
	} else {
		r.notice = dp.NoticeText(a.bounds, false, a.charged.Epsilon, a.charged.Delta, spend.EpsilonRemaining(), spend.DeltaRemaining())
	}
	return r
}

// collectRows reads every row of rr, copied: pgconn reuses its buffer for
// the next message.
func collectRows(rr *pgconn.ResultReader) [][][]byte {
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
	return rows
}
