package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Why a connection to the upstream failed, for operators (check-config,
// serve's start). pgx tries several connections for one URL (with
// sslmode=prefer, TLS then plain text; every address of a host name) and
// joins their errors: its text starts with the first attempt's, such as
// "tls error: server refused TLS connection", which is not the cause when
// the plain-text attempt then failed on a wrong password. ConnectFailure
// picks the most specific cause among the attempts instead.

// ConnectFailure describes err, a failed connection of the configuration
// key (upstream, ledger_upstream), as "KEY: cannot connect to HOST:PORT
// (database D, user U): CAUSE", with the server's SQLSTATE when the server
// answered. It never quotes the URL, so no password is printed. An err
// without a *pgconn.ConnectError in its chain is described as is.
func ConnectFailure(key string, err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return fmt.Errorf("%s: cannot connect: %s", key, connectCause(err))
	}
	return fmt.Errorf("%s: %s", key, describeConnectError(ce))
}

// ExplainConnectErrors rewrites the text of the first
// *pgconn.ConnectError in err's chain to its specific cause
// (describeConnectError), keeping the rest of the message; other errors
// are returned unchanged. For serve's start-up errors.
func ExplainConnectErrors(err error) error {
	var ce *pgconn.ConnectError
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	msg := strings.Replace(err.Error(), ce.Error(), describeConnectError(ce), 1)
	return &explained{msg: msg, err: err}
}

type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

func describeConnectError(ce *pgconn.ConnectError) string {
	where := "the server"
	if c := ce.Config; c != nil {
		host := c.Host
		if !strings.HasPrefix(host, "/") {
			host = net.JoinHostPort(host, fmt.Sprint(c.Port))
		} else {
			host = fmt.Sprintf("socket %s/.s.PGSQL.%d", host, c.Port)
		}
		where = fmt.Sprintf("%s (database %s, user %s)", host, c.Database, c.User)
	}
	return fmt.Sprintf("cannot connect to %s: %s", where, connectCause(ce.Unwrap()))
}

// connectCause names the most specific cause among the attempts joined in
// err: what the server answered (authentication, database, capacity)
// first, then TLS, refused, unknown host and timeout, else the last
// attempt's text.
func connectCause(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		kind := "the server refused the connection"
		switch pgerr.Code(pe.Code) {
		case pgerr.InvalidPassword:
			kind = "authentication failed (wrong password?)"
		case pgerr.InvalidAuthSpecification:
			kind = "authentication failed (no such role, or pg_hba.conf refuses it)"
		case pgerr.InvalidCatalogName:
			kind = "unknown database"
		case pgerr.TooManyConnections:
			kind = "the server has no connection slot left"
		}
		return fmt.Sprintf("%s: %s (SQLSTATE %s)", kind, pe.Message, pe.Code)
	}
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		return "TLS: the server's certificate is not trusted: " + lastLine(err)
	case strings.Contains(lastLine(err), "server refused TLS connection"):
		// The last attempt's: with sslmode=prefer the first attempt's
		// refusal only led to a plain-text attempt.
		return "TLS: the server does not accept TLS connections, and sslmode requires TLS (enable ssl on the server, or set sslmode=disable or prefer)"
	case errors.As(err, &recordErr):
		return "TLS: " + lastLine(err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens there (is the server running, are host and port right?)"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "unknown host " + dnsErr.Name
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return "timed out (is the host reachable, does a firewall drop the connection?)"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out (is the host reachable, does a firewall drop the connection?)"
	}
	if errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return "host unreachable"
	}
	return lastLine(err)
}

// lastLine is the text of the last of the joined attempts in err.
func lastLine(err error) string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 0 {
			return lastLine(errs[len(errs)-1])
		}
	}
	return err.Error()
}
