// Package dp is the differentially private release, as pure functions of
// a rewritten plan, the privacy settings and the rows the database
// returned: no I/O, no database, no wire session. Randomness comes from
// the noise package's samplers and, for the exponential mechanism of
// quantiles, from an io.Reader (crypto/rand in production).
//
// The pipeline, in the order package proxy runs it:
//
//  1. NewPrivacy: the session's mechanism, ε and δ as one validated value
//     (like privacy-on-beam's PrivacySpec).
//  2. NewSpec(plan, privacy): the budget split (sensitivity.SplitWith),
//     then partition selection (selection.go: its threshold and its noised
//     unit count), then one Aggregator per aggregate of the plan, each
//     built from the registry (aggregate.go) and refusing at construction
//     a part the sampler would refuse (a sensitivity that is not finite,
//     an ε below the sampler's floor). A Spec that exists is one whose
//     every noised part (Spec.Parts) was checked: this happens before the
//     charge, so a bad parameter costs nothing.
//  3. Spec.Cost: what the release costs, (ε, δ) for basic composition and
//     (ρ, δ_approx) for zCDP accounting (cost.go).
//  4. Spec.Release(columns, rows): parse the exact bounded aggregates the
//     rewritten query returned, select partitions (or fill in the public
//     keys), noise each aggregate, order, limit and encode (release.go).
//     The Answer carries the NOTICE's error bounds.
//  5. Spec.Explain: the lines of EXPLAIN DP (explain.go), with the budget
//     figures the caller read from the ledger as plain inputs; NoticeText
//     the NOTICE after an answer.
//
// Adding an aggregate: write one file here with a type implementing
// Aggregator (its noised Parts, Release, Bound and Explain) and a
// constructor that refuses bad parameters, register it in the file's
// init under its rewrite.AggKind, and add its case to the rewriter (which
// lays out the columns the aggregate reads). TestEveryAggKindRegistered
// fails until both exist.
package dp
