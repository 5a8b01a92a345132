// Package scram implements the server side of PostgreSQL password
// authentication: SCRAM-SHA-256 (RFC 5802, RFC 7677, as PostgreSQL speaks it)
// and the legacy PostgreSQL "md5" scheme.
//
// Only the standard library is used for the cryptography. The pgproto3
// helpers AuthenticateSCRAM and AuthenticateMD5 drive a whole exchange over
// a pgproto3.Backend.
//
// PostgreSQL specifics followed here:
//   - the user name in the client-first-message is ignored (PostgreSQL
//     clients send an empty "n=");
//   - no channel binding is offered (SCRAM-SHA-256-PLUS is not advertised),
//     so the gs2 headers "n,," and "y,," are accepted and "p=..." is refused;
//   - an authorization identity ("a=...") is refused, as PostgreSQL does.
//
// SASLprep: this package does not implement SASLprep normalisation (it needs
// Unicode tables outside the standard library). The password is used as is.
// For ASCII passwords that is exactly what PostgreSQL does (SASLprep is the
// identity on printable ASCII, and PostgreSQL falls back to the raw password
// when SASLprep fails, e.g. on control characters). A non-ASCII password that
// SASLprep would change (non-ASCII spaces, "mapped to nothing" characters such
// as U+00AD, or characters not in NFKC form) may be rejected although the
// client sends the right password; passwords in NFKC form without such
// characters work.
package scram

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Mechanism is the SASL mechanism name this package implements.
const Mechanism = "SCRAM-SHA-256"

const (
	// DefaultIterations is the PBKDF2 iteration count used by NewCredentials
	// (PostgreSQL's default scram_iterations).
	DefaultIterations = 4096
	// saltLen is the length of the random salt made by NewCredentials.
	saltLen = 16
	// serverNonceRawLen is the number of random bytes in a server nonce.
	serverNonceRawLen = 18
	// maxIterations bounds the iteration count accepted by DeriveCredentials
	// and ParseVerifier (same ceiling as pgx's client).
	maxIterations = 10_000_000
	keyLen        = sha256.Size
)

// ErrAuthFailed is returned when the client proved knowledge of a wrong
// password. Protocol violations are reported with other errors.
var ErrAuthFailed = errors.New("scram: authentication failed")

// ErrProtocol is wrapped by every protocol-violation error (malformed or
// unsupported client messages), so callers can test errors.Is(err, ErrProtocol).
var ErrProtocol = errors.New("scram: protocol violation")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// Credentials are what the server keeps for one user: never the password
// itself.
type Credentials struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte // H(ClientKey), 32 bytes
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key"), 32 bytes
}

// NewCredentials derives credentials for password with a random 16-byte salt
// and DefaultIterations (4096) iterations. See the package comment about
// SASLprep.
func NewCredentials(password string) (Credentials, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return Credentials{}, fmt.Errorf("scram: generating salt: %w", err)
	}
	return DeriveCredentials(password, salt, DefaultIterations)
}

// DeriveCredentials derives credentials for password with the given salt and
// iteration count.
func DeriveCredentials(password string, salt []byte, iterations int) (Credentials, error) {
	if len(salt) == 0 {
		return Credentials{}, errors.New("scram: empty salt")
	}
	if iterations <= 0 || iterations > maxIterations {
		return Credentials{}, fmt.Errorf("scram: invalid iteration count %d", iterations)
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, keyLen)
	if err != nil {
		return Credentials{}, fmt.Errorf("scram: pbkdf2: %w", err)
	}
	clientKey := hmacSHA256(salted, []byte("Client Key"))
	storedKey := sha256.Sum256(clientKey)
	return Credentials{
		Salt:       bytes.Clone(salt),
		Iterations: iterations,
		StoredKey:  storedKey[:],
		ServerKey:  hmacSHA256(salted, []byte("Server Key")),
	}, nil
}

// Verifier returns the credentials in PostgreSQL's pg_authid format:
// "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>" (base64).
func (c Credentials) Verifier() string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s$%d:%s$%s:%s", Mechanism, c.Iterations, b64(c.Salt), b64(c.StoredKey), b64(c.ServerKey))
}

// ParseVerifier parses a PostgreSQL SCRAM verifier as stored in
// pg_authid.rolpassword (the format produced by Verifier).
func ParseVerifier(s string) (Credentials, error) {
	bad := func(what string) (Credentials, error) {
		return Credentials{}, fmt.Errorf("scram: invalid verifier: %s", what)
	}
	rest, ok := strings.CutPrefix(s, Mechanism+"$")
	if !ok {
		return bad("missing " + Mechanism + "$ prefix")
	}
	iterSalt, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return bad("missing keys")
	}
	iterStr, saltStr, ok := strings.Cut(iterSalt, ":")
	if !ok {
		return bad("missing salt")
	}
	storedStr, serverStr, ok := strings.Cut(keys, ":")
	if !ok {
		return bad("missing server key")
	}
	iter, err := strconv.Atoi(iterStr)
	if err != nil || iter <= 0 || iter > maxIterations {
		return bad("iteration count")
	}
	salt, err := base64.StdEncoding.Strict().DecodeString(saltStr)
	if err != nil || len(salt) == 0 {
		return bad("salt")
	}
	stored, err := base64.StdEncoding.Strict().DecodeString(storedStr)
	if err != nil || len(stored) != keyLen {
		return bad("stored key")
	}
	server, err := base64.StdEncoding.Strict().DecodeString(serverStr)
	if err != nil || len(server) != keyLen {
		return bad("server key")
	}
	return Credentials{Salt: salt, Iterations: iter, StoredKey: stored, ServerKey: server}, nil
}

func (c Credentials) validate() error {
	if len(c.Salt) == 0 || c.Iterations <= 0 || len(c.StoredKey) != keyLen || len(c.ServerKey) != keyLen {
		return errors.New("scram: invalid credentials")
	}
	return nil
}

// Conversation is one server-side exchange; not safe for concurrent use.
type Conversation struct {
	creds                  Credentials
	gs2Header              string // "n,," or "y,,"
	clientFirstMessageBare string
	serverFirstMessage     string
	nonce                  string // client nonce + server nonce
	done                   bool
}

// Start parses a client-first-message and returns the conversation and the
// server-first-message ("r=<nonce>,s=<salt>,i=<iterations>"). The server
// nonce is the base64 encoding of 18 random bytes appended to the client
// nonce.
func (c Credentials) Start(clientFirst []byte) (conv *Conversation, serverFirst []byte, err error) {
	raw := make([]byte, serverNonceRawLen)
	if _, err := rand.Read(raw); err != nil {
		return nil, nil, fmt.Errorf("scram: generating nonce: %w", err)
	}
	return c.start(clientFirst, base64.StdEncoding.EncodeToString(raw))
}

// start is Start with an injected server nonce (for test vectors).
func (c Credentials) start(clientFirst []byte, serverNonce string) (*Conversation, []byte, error) {
	if err := c.validate(); err != nil {
		return nil, nil, err
	}
	msg := string(clientFirst)

	// gs2-header = gs2-cbind-flag "," [ authzid ] ","
	var gs2 string
	switch {
	case strings.HasPrefix(msg, "n,"):
		gs2 = "n,"
	case strings.HasPrefix(msg, "y,"):
		gs2 = "y,"
	case strings.HasPrefix(msg, "p="):
		return nil, nil, protoErr("client requires channel binding, which is not supported")
	default:
		return nil, nil, protoErr("malformed client-first-message: bad gs2 channel binding flag")
	}
	msg = msg[2:]
	if strings.HasPrefix(msg, "a=") {
		return nil, nil, protoErr("client uses authorization identity, which is not supported")
	}
	if !strings.HasPrefix(msg, ",") {
		return nil, nil, protoErr("malformed client-first-message: bad gs2 header")
	}
	gs2 += ","
	bare := msg[1:]

	// client-first-message-bare = [reserved-mext ","] username "," nonce ["," extensions]
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 {
		return nil, nil, protoErr("malformed client-first-message: too few attributes")
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return nil, nil, protoErr("client requires an unsupported SCRAM extension")
	}
	if !strings.HasPrefix(attrs[0], "n=") {
		return nil, nil, protoErr("malformed client-first-message: expected username attribute")
	}
	// The user name is ignored: PostgreSQL takes it from the startup packet.
	clientNonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok {
		return nil, nil, protoErr("malformed client-first-message: expected nonce attribute")
	}
	if clientNonce == "" || !printable(clientNonce) {
		return nil, nil, protoErr("malformed client-first-message: invalid nonce")
	}
	for _, ext := range attrs[2:] {
		if !isAttr(ext) {
			return nil, nil, protoErr("malformed client-first-message: bad extension attribute")
		}
	}
	if serverNonce == "" || !printable(serverNonce) {
		return nil, nil, errors.New("scram: invalid server nonce")
	}

	conv := &Conversation{
		creds:                  c,
		gs2Header:              gs2,
		clientFirstMessageBare: bare,
		nonce:                  clientNonce + serverNonce,
	}
	conv.serverFirstMessage = "r=" + conv.nonce +
		",s=" + base64.StdEncoding.EncodeToString(c.Salt) +
		",i=" + strconv.Itoa(c.Iterations)
	return conv, []byte(conv.serverFirstMessage), nil
}

// Finish checks a client-final-message ("c=<binding>,r=<nonce>,p=<proof>")
// and returns the server-final-message "v=<ServerSignature>". A wrong proof
// gives ErrAuthFailed; malformed messages give errors wrapping ErrProtocol.
// Finish may be called only once per conversation.
func (conv *Conversation) Finish(clientFinal []byte) (serverFinal []byte, err error) {
	if conv == nil || conv.serverFirstMessage == "" {
		return nil, errors.New("scram: Finish called without Start")
	}
	if conv.done {
		return nil, errors.New("scram: Finish called twice")
	}
	conv.done = true

	attrs := strings.Split(string(clientFinal), ",")
	if len(attrs) < 3 {
		return nil, protoErr("malformed client-final-message: too few attributes")
	}
	cb, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return nil, protoErr("malformed client-final-message: expected channel binding attribute")
	}
	cbData, err := base64.StdEncoding.Strict().DecodeString(cb)
	if err != nil {
		return nil, protoErr("malformed client-final-message: invalid channel binding encoding")
	}
	if string(cbData) != conv.gs2Header {
		return nil, protoErr("channel binding data does not match the gs2 header")
	}
	nonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok {
		return nil, protoErr("malformed client-final-message: expected nonce attribute")
	}
	if subtle.ConstantTimeCompare([]byte(nonce), []byte(conv.nonce)) != 1 {
		return nil, protoErr("nonce does not match")
	}
	last := len(attrs) - 1
	for _, ext := range attrs[2:last] {
		if !isAttr(ext) || strings.HasPrefix(ext, "p=") {
			return nil, protoErr("malformed client-final-message: bad extension attribute")
		}
	}
	proofStr, ok := strings.CutPrefix(attrs[last], "p=")
	if !ok {
		return nil, protoErr("malformed client-final-message: expected proof as last attribute")
	}
	proof, err := base64.StdEncoding.Strict().DecodeString(proofStr)
	if err != nil || len(proof) != keyLen {
		return nil, protoErr("malformed client-final-message: invalid proof")
	}

	withoutProof := strings.Join(attrs[:last], ",")
	authMessage := []byte(conv.clientFirstMessageBare + "," + conv.serverFirstMessage + "," + withoutProof)

	// ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); check H(ClientKey) == StoredKey.
	clientSignature := hmacSHA256(conv.creds.StoredKey, authMessage)
	clientKey := make([]byte, keyLen)
	subtle.XORBytes(clientKey, proof, clientSignature)
	computed := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(computed[:], conv.creds.StoredKey) != 1 {
		return nil, ErrAuthFailed
	}

	serverSignature := hmacSHA256(conv.creds.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSignature)), nil
}

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// printable reports whether s consists of RFC 5802 "printable" characters:
// %x21-2B / %x2D-7E (visible ASCII except ',').
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < 0x21 || b > 0x7e || b == ',' {
			return false
		}
	}
	return true
}

// isAttr reports whether s looks like "<letter>=<value>".
func isAttr(s string) bool {
	if len(s) < 2 || s[1] != '=' {
		return false
	}
	ch := s[0]
	return ('a' <= ch && ch <= 'z') || ('A' <= ch && ch <= 'Z')
}
