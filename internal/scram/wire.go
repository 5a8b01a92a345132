package scram

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// AuthenticateSCRAM runs the SASL SCRAM-SHA-256 exchange on backend, which
// must already be past the StartupMessage: it sends AuthenticationSASL,
// receives SASLInitialResponse, sends AuthenticationSASLContinue, receives
// SASLResponse and sends AuthenticationSASLFinal. It does not send
// AuthenticationOk nor any ErrorResponse: the caller does.
//
// It returns nil on success, ErrAuthFailed on a wrong password, and other
// errors (wrapping ErrProtocol for bad client messages) otherwise.
//
// Callers facing untrusted clients should bound message sizes with
// backend.SetMaxBodyLen before authentication.
func AuthenticateSCRAM(backend *pgproto3.Backend, creds Credentials) error {
	if err := creds.validate(); err != nil {
		return err
	}
	backend.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{Mechanism}})
	if err := backend.Flush(); err != nil {
		return fmt.Errorf("scram: sending AuthenticationSASL: %w", err)
	}

	if err := backend.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return err
	}
	msg, err := backend.Receive()
	if err != nil {
		return fmt.Errorf("scram: receiving SASLInitialResponse: %w", err)
	}
	initial, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok {
		return protoErr("expected SASLInitialResponse, got %T", msg)
	}
	if initial.AuthMechanism != Mechanism {
		return protoErr("client selected unsupported SASL mechanism %q", initial.AuthMechanism)
	}
	conv, serverFirst, err := creds.Start(initial.Data)
	if err != nil {
		return err
	}

	backend.Send(&pgproto3.AuthenticationSASLContinue{Data: serverFirst})
	if err := backend.Flush(); err != nil {
		return fmt.Errorf("scram: sending AuthenticationSASLContinue: %w", err)
	}

	if err := backend.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return err
	}
	msg, err = backend.Receive()
	if err != nil {
		return fmt.Errorf("scram: receiving SASLResponse: %w", err)
	}
	resp, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return protoErr("expected SASLResponse, got %T", msg)
	}
	serverFinal, err := conv.Finish(resp.Data)
	if err != nil {
		return err
	}

	backend.Send(&pgproto3.AuthenticationSASLFinal{Data: serverFinal})
	if err := backend.Flush(); err != nil {
		return fmt.Errorf("scram: sending AuthenticationSASLFinal: %w", err)
	}
	return nil
}

// AuthenticateMD5 runs PostgreSQL's md5 password exchange on backend, which
// must already be past the StartupMessage: it sends AuthenticationMD5Password
// with a random salt, receives the PasswordMessage and checks it against
// user and password. It does not send AuthenticationOk nor any ErrorResponse.
//
// It returns nil on success, ErrAuthFailed on a wrong password, and other
// errors otherwise.
func AuthenticateMD5(backend *pgproto3.Backend, user, password string) error {
	salt, err := MD5Salt()
	if err != nil {
		return err
	}
	backend.Send(&pgproto3.AuthenticationMD5Password{Salt: salt})
	if err := backend.Flush(); err != nil {
		return fmt.Errorf("scram: sending AuthenticationMD5Password: %w", err)
	}
	if err := backend.SetAuthType(pgproto3.AuthTypeMD5Password); err != nil {
		return err
	}
	msg, err := backend.Receive()
	if err != nil {
		return fmt.Errorf("scram: receiving PasswordMessage: %w", err)
	}
	pw, ok := msg.(*pgproto3.PasswordMessage)
	if !ok {
		return protoErr("expected PasswordMessage, got %T", msg)
	}
	if !CheckMD5(password, user, salt, pw.Password) {
		return ErrAuthFailed
	}
	return nil
}
