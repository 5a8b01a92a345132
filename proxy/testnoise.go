package proxy

import (
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
)

// This file holds the only code that reads Options.TestNoise, the hook by
// which the semantic differential test (e2e/semantic_test.go) switches
// noise and partition selection off to compare released answers with
// PostgreSQL's exact ones. Three walls keep it out of production:
//
//   - nothing in conf or cmd/dpproxy can set it: it is a Go value (a
//     function), not a configuration key, flag or environment variable,
//     and cmd/dpproxy builds Options with a logger only;
//   - the only mechanism without noise lives in package noise/noisetest,
//     which the dpproxy binary does not link
//     (TestShippedBinaryCannotSwitchNoiseOff, cmd/dpproxy);
//   - New refuses the hook in any program that is not a test binary
//     (testing.Testing), so a program that linked it anyway would not
//     start.
//
// A proxy run with the hook keys its answer cache under a mechanism name
// of its own, so that an exact answer stored in a shared ledger is never
// served by a proxy without it.

// errTestNoise is New's refusal of Options.TestNoise outside a test binary.
var errTestNoise = errors.New("proxy: Options.TestNoise is for tests only and is refused outside a test binary")

// checkTestNoise is New's check of the hook.
func checkTestNoise(opts Options) error {
	if opts.TestNoise != nil && !testing.Testing() {
		return errTestNoise
	}
	return nil
}

// sampler is the mechanism a release uses: m, or m wrapped by the
// test-only hook.
func (s *Server) sampler(m noise.Mechanism) noise.Mechanism {
	if s.opts.TestNoise != nil {
		return s.opts.TestNoise(m)
	}
	return m
}

// cacheMechanism is the mechanism name in the answer cache's key: answers
// released through the test-only hook never match a real mechanism's.
func (s *Server) cacheMechanism(name string) string {
	if s.opts.TestNoise != nil {
		return name + "+test-noise"
	}
	return name
}
