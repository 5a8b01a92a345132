package proxy

import (
	"errors"
	"fmt"
	"io"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/scram"
)

// Authentication: the second stage of a session, after negotiation
// (negotiate.go), before the upstream connection (begin.go).

// authenticate runs the configured exchange. A wrong password and an unknown
// user get the same answer.
func (ss *session) authenticate(name string) error {
	cfg := ss.srv.cfg
	user := cfg.UserByName(name)
	fail := func(cause error) error {
		ss.send(fatalResponse(pgerr.InvalidPassword, fmt.Sprintf("password authentication failed for user %q", name)))
		ss.flush()
		ss.log.Warn("authentication failed", "user", name, "reason", cause)
		ss.srv.metrics.authFailures.Inc()
		return errHandled
	}
	if name == "" {
		ss.send(fatalResponse(pgerr.InvalidAuthSpecification, "no PostgreSQL user name specified in startup packet"))
		ss.flush()
		return errHandled
	}
	switch cfg.Auth.Method {
	case conf.AuthTrust:
		if user == nil {
			ss.send(fatalResponse(pgerr.InvalidAuthSpecification, fmt.Sprintf("role %q is not an analyst of this proxy", name)))
			ss.flush()
			return errHandled
		}
	case conf.AuthSCRAM:
		creds, ok := ss.srv.creds[name]
		if !ok {
			creds = ss.srv.dummy
		}
		if err := scram.AuthenticateSCRAM(ss.backend, creds); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errHandled // psql hangs up to ask for the password, then reconnects
			}
			return fail(err)
		}
		if !ok {
			return fail(errors.New("unknown user"))
		}
	case conf.AuthMD5:
		pw := ""
		if user != nil {
			pw = user.Password.Reveal()
		}
		if err := scram.AuthenticateMD5(ss.backend, name, pw); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errHandled
			}
			return fail(err)
		}
		if user == nil {
			return fail(errors.New("unknown user"))
		}
	}
	ss.user = user
	return nil
}
