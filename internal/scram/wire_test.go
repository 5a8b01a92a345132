package scram

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// serveOne accepts one connection, authenticates it with auth, and reports
// the authentication result on the returned channel.
func serveOne(t *testing.T, auth func(*pgproto3.Backend, string) error) (port int, result <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			ch <- err
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		be := pgproto3.NewBackend(conn, conn)
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			ch <- err
			return
		}
		sm, ok := msg.(*pgproto3.StartupMessage)
		if !ok {
			ch <- fmt.Errorf("unexpected startup %T", msg)
			return
		}
		authErr := auth(be, sm.Parameters["user"])
		if authErr != nil {
			be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01",
				Message: fmt.Sprintf("password authentication failed for user %q", sm.Parameters["user"])})
			be.Flush()
			ch <- authErr
			return
		}
		be.Send(&pgproto3.AuthenticationOk{})
		be.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "15.0"})
		be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 2}})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		if err := be.Flush(); err != nil {
			ch <- err
			return
		}
		// Wait for the client's Terminate (or close).
		be.Receive()
		ch <- nil
	}()
	return ln.Addr().(*net.TCPAddr).Port, ch
}

func connect(port int, password string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://alice:%s@127.0.0.1:%d/db?sslmode=disable", password, port))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

func wait(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(15 * time.Second):
		t.Fatal("server timed out")
		return nil
	}
}

func TestAuthenticateSCRAMWithPgconn(t *testing.T) {
	creds, err := NewCredentials("secret")
	if err != nil {
		t.Fatal(err)
	}
	scram := func(be *pgproto3.Backend, _ string) error { return AuthenticateSCRAM(be, creds) }

	t.Run("ok", func(t *testing.T) {
		port, res := serveOne(t, scram)
		if err := connect(port, "secret"); err != nil {
			t.Fatalf("client: %v", err)
		}
		if err := wait(t, res); err != nil {
			t.Fatalf("server: %v", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		port, res := serveOne(t, scram)
		err := connect(port, "wrong")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
			t.Fatalf("client err = %v, want 28P01", err)
		}
		if err := wait(t, res); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("server err = %v, want ErrAuthFailed", err)
		}
	})
}

func TestAuthenticateMD5WithPgconn(t *testing.T) {
	md5 := func(be *pgproto3.Backend, user string) error { return AuthenticateMD5(be, user, "secret") }

	t.Run("ok", func(t *testing.T) {
		port, res := serveOne(t, md5)
		if err := connect(port, "secret"); err != nil {
			t.Fatalf("client: %v", err)
		}
		if err := wait(t, res); err != nil {
			t.Fatalf("server: %v", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		port, res := serveOne(t, md5)
		err := connect(port, "wrong")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
			t.Fatalf("client err = %v, want 28P01", err)
		}
		if err := wait(t, res); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("server err = %v, want ErrAuthFailed", err)
		}
	})
}

// A client that sends garbage instead of a SASLInitialResponse gets a
// protocol error, not ErrAuthFailed and not a panic.
func TestAuthenticateSCRAMBadClient(t *testing.T) {
	creds, err := NewCredentials("secret")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(fe *pgproto3.Frontend){
		"wrong mechanism": func(fe *pgproto3.Frontend) {
			fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256-PLUS", Data: []byte("p=tls-server-end-point,,n=,r=abc")})
		},
		"channel binding": func(fe *pgproto3.Frontend) {
			fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: Mechanism, Data: []byte("p=tls-server-end-point,,n=,r=abc")})
		},
		"query": func(fe *pgproto3.Frontend) {
			fe.Send(&pgproto3.Query{String: "select 1"})
		},
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			c1, c2 := net.Pipe()
			defer c1.Close()
			defer c2.Close()
			done := make(chan error, 1)
			go func() { done <- AuthenticateSCRAM(pgproto3.NewBackend(c1, c1), creds) }()
			fe := pgproto3.NewFrontend(c2, c2)
			msg, err := fe.Receive()
			if err != nil {
				t.Fatal(err)
			}
			if m, ok := msg.(*pgproto3.AuthenticationSASL); !ok || len(m.AuthMechanisms) != 1 || m.AuthMechanisms[0] != Mechanism {
				t.Fatalf("got %#v", msg)
			}
			send(fe)
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if err == nil || errors.Is(err, ErrAuthFailed) {
				t.Fatalf("err = %v, want protocol error", err)
			}
		})
	}
}
