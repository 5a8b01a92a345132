package proxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/dp"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// This file connects the released answers to the ledger: the durable
// answer cache (dpproxy.answers, through budget.Claim) and the charge of a
// query under zCDP accounting.
//
// A private query that misses the in-memory cache claims its question in
// the ledger. The claim makes every other connection and proxy process
// asking the same question wait; if the question was answered before (here
// or by another process, before or after a restart), that answer is
// returned at no charge. Otherwise the query is charged, run and noised,
// and its answer is stored before the claim is released and before the
// client sees it, so no restart and no race can draw fresh noise for a
// question already answered.

// answerVersion is the encoding version of stored answers.
const answerVersion = 1

// storedAnswer is the JSON form of an answer in dpproxy.answers. Byte
// slices are base64; a NULL value is null, distinct from an empty string.
type storedAnswer struct {
	V       int           `json:"v"`
	Fields  []storedField `json:"fields"`
	Rows    [][][]byte    `json:"rows"`
	Epsilon float64       `json:"epsilon"`
	Delta   float64       `json:"delta"`
	Bounds  string        `json:"bounds"`
	Detail  string        `json:"detail,omitempty"`
}

type storedField struct {
	Name                 string `json:"name"`
	TableOID             uint32 `json:"table_oid"`
	TableAttributeNumber uint16 `json:"table_attr"`
	DataTypeOID          uint32 `json:"type_oid"`
	DataTypeSize         int16  `json:"type_size"`
	TypeModifier         int32  `json:"type_mod"`
	Format               int16  `json:"format"`
}

// encodeAnswer serializes a released answer for the ledger.
func encodeAnswer(a *answer) ([]byte, error) {
	s := storedAnswer{V: answerVersion, Rows: a.rows, Epsilon: a.charged.Epsilon, Delta: a.charged.Delta, Bounds: a.bounds, Detail: a.detail}
	for _, f := range a.fields {
		s.Fields = append(s.Fields, storedField{
			Name: string(f.Name), TableOID: f.TableOID, TableAttributeNumber: f.TableAttributeNumber,
			DataTypeOID: f.DataTypeOID, DataTypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier, Format: f.Format,
		})
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("proxy: encode answer: %w", err)
	}
	return b, nil
}

// decodeAnswer reads an answer stored by encodeAnswer.
func decodeAnswer(b []byte) (*answer, error) {
	var s storedAnswer
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("proxy: decode stored answer: %w", err)
	}
	if s.V != answerVersion {
		return nil, fmt.Errorf("proxy: stored answer has version %d, want %d", s.V, answerVersion)
	}
	a := &answer{rows: s.Rows, charged: sensitivity.Share{Epsilon: s.Epsilon, Delta: s.Delta}, bounds: s.Bounds, detail: s.Detail}
	for _, f := range s.Fields {
		a.fields = append(a.fields, pgproto3.FieldDescription{
			Name: []byte(f.Name), TableOID: f.TableOID, TableAttributeNumber: f.TableAttributeNumber,
			DataTypeOID: f.DataTypeOID, DataTypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier, Format: f.Format,
		})
	}
	for _, r := range a.rows {
		if len(r) != len(a.fields) {
			return nil, fmt.Errorf("proxy: stored answer has a row of %d values for %d columns", len(r), len(a.fields))
		}
	}
	return a, nil
}

// claimAnswer claims key's question in the ledger (waiting while another
// connection or process answers it) and returns the claim, plus the stored
// answer if the question was answered before. Callers must Release the
// claim, after storing a fresh answer and before sending it.
func (ss *session) claimAnswer(ctx context.Context, key budget.CacheKey) (*budget.Claim, *answer, error) {
	cl, err := ss.srv.ledger.Claim(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	b, ok := cl.Cached()
	if !ok {
		return cl, nil, nil
	}
	a, err := decodeAnswer(b)
	if err != nil {
		// Never answer afresh over a stored answer we cannot read: that
		// would draw new noise for a question already answered.
		cl.Release()
		return nil, nil, fail(pgerr.InternalError, "the stored answer to this question cannot be read: %v", err)
	}
	ss.srv.answers.Add(key, a)
	return cl, a, nil
}

// storeAnswer saves a fresh answer with the claim's charge and adds it to
// the in-memory cache. The answer must not be sent if this fails.
func (ss *session) storeAnswer(ctx context.Context, cl *budget.Claim, key budget.CacheKey, a *answer) error {
	b, err := encodeAnswer(a)
	if err != nil {
		return err
	}
	if err := cl.Store(ctx, b); err != nil {
		return err
	}
	ss.srv.answers.Add(key, a)
	return nil
}

// charge is what a query costs the analyst (dp.Spec.Cost).
func (ss *session) charge(st *rewrite.Statement, spec *dp.Spec) (budget.Charge, error) {
	c, err := spec.Cost()
	if err != nil {
		return budget.Charge{}, err
	}
	return ss.chargeOf(st.Plan, c, st.Fingerprint), nil
}

// unionCharge is what a UNION ALL of DP queries costs: the sum of its
// branches' costs (dp.Union.Cost), charged once.
func (ss *session) unionCharge(st *rewrite.Statement, u *dp.Union) (budget.Charge, error) {
	c, err := u.Cost()
	if err != nil {
		return budget.Charge{}, err
	}
	return ss.chargeOf(st.Plan, c, st.Fingerprint), nil
}

// chargeOf is the one place a release's cost becomes the analyst's charge,
// for the query (charge, unionCharge) and for EXPLAIN DP's outlook alike:
// its (ε, δ) for basic composition, its zCDP cost, its releases (which the
// rdp accountant composes: a charge without them is read as one pure (ε, δ)
// release, far costlier) and the tables it reads.
func (ss *session) chargeOf(plan *rewrite.Plan, c dp.Cost, fingerprint string) budget.Charge {
	return budget.Charge{
		Analyst: ss.user.Name, Epsilon: c.Epsilon, Delta: c.Delta,
		Rho: c.Rho, DeltaApprox: c.DeltaApprox, Releases: c.Releases, Fingerprint: fingerprint,
		Tables: planTables(plan), // tables.go
	}
}
