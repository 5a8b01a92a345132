package proxy

import (
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/dp"
	"github.com/dpproxy/dpproxy/rewrite"
)

// This file is the release step of a private query: the spec (package dp,
// before the charge) and the release of the database's rows (after it).
// The post-processing query over the released rows is postprocess.go.

// releaseSpec is the session's privacy settings applied to plan (dp.NewSpec):
// every noised part, checked before the charge so that a bad parameter
// fails without charging.
func (ss *session) releaseSpec(plan *rewrite.Plan) (*dp.Spec, error) {
	p, err := dp.NewPrivacy(ss.mechanism, ss.epsilon, ss.delta)
	if err != nil {
		return nil, err
	}
	spec, err := dp.NewSpec(plan, p.WithSampler(ss.srv.sampler)) // testnoise.go
	if err != nil {
		return nil, err
	}
	return spec, nil
}

// unionSpec is the release of a UNION ALL of DP queries from its
// branches' specs: refused before the charge when their total ε exceeds
// privacy.max_epsilon_per_query.
func (ss *session) unionSpec(plan *rewrite.Plan, specs []*dp.Spec) (*dp.Union, error) {
	return dp.NewUnion(plan, specs, ss.srv.cfg.Privacy.MaxEpsilonPerQuery)
}

// release noises the exact bounded aggregates (rows) into the answer.
func release(plan *rewrite.Plan, spec *dp.Spec, fields []pgproto3.FieldDescription, rows [][][]byte) (*answer, error) {
	cols := make([]dp.Column, len(fields))
	for i, f := range fields {
		cols[i] = dp.Column{Name: string(f.Name), Type: f.DataTypeOID}
	}
	a, err := spec.Release(cols, rows)
	if err != nil {
		return nil, err
	}
	return &answer{fields: fields, rows: a.Rows, charged: a.Charged, bounds: a.Bounds, detail: a.Detail}, nil
}
