package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// RFC 7677 section 3 test vector.
const (
	rfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfcServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfcClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
)

func rfcCreds(t testing.TB) Credentials {
	t.Helper()
	salt, err := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	if err != nil {
		t.Fatal(err)
	}
	c, err := DeriveCredentials("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRFC7677Vector(t *testing.T) {
	c := rfcCreds(t)
	conv, sf, err := c.start([]byte(rfcClientFirst), rfcServerNonce)
	if err != nil {
		t.Fatal(err)
	}
	if string(sf) != rfcServerFirst {
		t.Fatalf("server-first = %q, want %q", sf, rfcServerFirst)
	}
	fin, err := conv.Finish([]byte(rfcClientFinal))
	if err != nil {
		t.Fatal(err)
	}
	if string(fin) != rfcServerFinal {
		t.Fatalf("server-final = %q, want %q", fin, rfcServerFinal)
	}
	if _, err := conv.Finish([]byte(rfcClientFinal)); err == nil {
		t.Fatal("second Finish succeeded")
	}
}

func TestRFC7677WrongPassword(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	c, err := DeriveCredentials("pencils", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	conv, _, err := c.start([]byte(rfcClientFirst), rfcServerNonce)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conv.Finish([]byte(rfcClientFinal)); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("err = %v, want ErrAuthFailed", err)
	}
}

// clientFinal computes a client-final-message like a real client.
func clientFinal(t testing.TB, password, gs2, clientFirstBare, serverFirst string) (msg string, serverSig string) {
	t.Helper()
	var nonce, saltB64 string
	var iter int
	for _, a := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		case strings.HasPrefix(a, "s="):
			saltB64 = a[2:]
		case strings.HasPrefix(a, "i="):
			iter, _ = strconv.Atoi(a[2:])
		}
	}
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	if err != nil {
		t.Fatal(err)
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iter, 32)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(k []byte, m string) []byte { h := hmac.New(sha256.New, k); h.Write([]byte(m)); return h.Sum(nil) }
	without := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + nonce
	auth := clientFirstBare + "," + serverFirst + "," + without
	ck := mac(salted, "Client Key")
	sk := sha256.Sum256(ck)
	sig := mac(sk[:], auth)
	for i := range ck {
		ck[i] ^= sig[i]
	}
	return without + ",p=" + base64.StdEncoding.EncodeToString(ck),
		"v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), auth))
}

func TestRoundTripGS2Headers(t *testing.T) {
	c, err := NewCredentials("s3cr\u00e9t")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Salt) != 16 || c.Iterations != 4096 {
		t.Fatalf("salt %d bytes, %d iterations", len(c.Salt), c.Iterations)
	}
	for _, gs2 := range []string{"n,,", "y,,"} {
		bare := "n=,r=abcdefghijklmnopqrstuvwx"
		conv, sf, err := c.Start([]byte(gs2 + bare))
		if err != nil {
			t.Fatal(err)
		}
		nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
		if !strings.HasPrefix(nonce, "abcdefghijklmnopqrstuvwx") || len(nonce) < 24+24 {
			t.Fatalf("bad nonce %q", nonce)
		}
		cf, wantV := clientFinal(t, "s3cr\u00e9t", gs2, bare, string(sf))
		fin, err := conv.Finish([]byte(cf))
		if err != nil {
			t.Fatalf("%s: %v", gs2, err)
		}
		if string(fin) != wantV {
			t.Fatalf("%s: got %q want %q", gs2, fin, wantV)
		}

		// Wrong password.
		conv, sf, _ = c.Start([]byte(gs2 + bare))
		cf, _ = clientFinal(t, "wrong", gs2, bare, string(sf))
		if _, err := conv.Finish([]byte(cf)); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("%s: err = %v, want ErrAuthFailed", gs2, err)
		}

		// Mismatched channel-binding echo.
		other := map[string]string{"n,,": "y,,", "y,,": "n,,"}[gs2]
		conv, sf, _ = c.Start([]byte(gs2 + bare))
		cf, _ = clientFinal(t, "s3cr\u00e9t", other, bare, string(sf))
		if _, err := conv.Finish([]byte(cf)); err == nil || errors.Is(err, ErrAuthFailed) || !errors.Is(err, ErrProtocol) {
			t.Fatalf("%s: binding mismatch err = %v", gs2, err)
		}
	}
}

func TestStartErrors(t *testing.T) {
	c := rfcCreds(t)
	for _, in := range []string{
		"",
		"n",
		"n,",
		"n,,",
		"p=tls-server-end-point,,n=,r=abc",
		"x,,n=,r=abc",
		"n,a=admin,n=,r=abc",
		"n,,m=ext,n=,r=abc",
		"n,,r=abc",
		"n,,n=",
		"n,,n=,r=",
		"n,,n=,x=abc",
		"n,,n=,r=ab c",
		"n,,n=,r=abc,bogus",
		"n;,n=,r=abc",
	} {
		if _, _, err := c.Start([]byte(in)); err == nil {
			t.Errorf("Start(%q) succeeded", in)
		} else if !errors.Is(err, ErrProtocol) {
			t.Errorf("Start(%q) err %v does not wrap ErrProtocol", in, err)
		}
	}
	// Extensions after the nonce are tolerated; the user name is ignored.
	if _, _, err := c.Start([]byte("n,,n=whoever,r=abc,x=1")); err != nil {
		t.Errorf("extension: %v", err)
	}
	if _, _, err := (Credentials{}).Start([]byte(rfcClientFirst)); err == nil {
		t.Error("empty credentials accepted")
	}
}

func TestFinishErrors(t *testing.T) {
	c := rfcCreds(t)
	good := strings.Split(rfcClientFinal, ",")
	for _, in := range []string{
		"",
		"c=biws",
		"c=biws,r=x",
		"c=eSws," + good[1] + "," + good[2],
		"c=biws,r=rOprNGfwEbeRWgbNEkqO," + good[2],
		"c=bi ws," + good[1] + "," + good[2],
		"c=biws," + good[1] + ",p=AAAA",
		"c=biws," + good[1] + ",p=!!!",
		"c=biws," + good[1] + "," + good[2] + ",x=1",
		"c=biws," + good[1] + ",p=abc," + good[2],
		good[1] + ",c=biws," + good[2],
	} {
		conv, _, err := c.start([]byte(rfcClientFirst), rfcServerNonce)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conv.Finish([]byte(in)); err == nil || errors.Is(err, ErrAuthFailed) {
			t.Errorf("Finish(%q) err = %v, want protocol error", in, err)
		}
	}
	var conv *Conversation
	if _, err := conv.Finish([]byte(rfcClientFinal)); err == nil {
		t.Error("nil conversation Finish succeeded")
	}
}

func TestVerifierRoundTrip(t *testing.T) {
	c := rfcCreds(t)
	v := c.Verifier()
	if !strings.HasPrefix(v, "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$") {
		t.Fatalf("verifier %q", v)
	}
	c2, err := ParseVerifier(v)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Verifier() != v {
		t.Fatalf("round trip mismatch")
	}
	conv, _, err := c2.start([]byte(rfcClientFirst), rfcServerNonce)
	if err != nil {
		t.Fatal(err)
	}
	if fin, err := conv.Finish([]byte(rfcClientFinal)); err != nil || string(fin) != rfcServerFinal {
		t.Fatalf("%q %v", fin, err)
	}
	for _, bad := range []string{"", "md5abc", "SCRAM-SHA-256$", "SCRAM-SHA-256$x:AA==$AA==:AA==", "SCRAM-SHA-256$4096:AA==$AA==:AA=="} {
		if _, err := ParseVerifier(bad); err == nil {
			t.Errorf("ParseVerifier(%q) succeeded", bad)
		}
	}
}

func TestMD5(t *testing.T) {
	salt := [4]byte{1, 2, 3, 4}
	// Independently computed: "md5" + md5hex(md5hex("secretalice") + "\x01\x02\x03\x04").
	const want = "md598a0412b9c31436fc53776e863350083"
	resp := MD5Response("secret", "alice", salt)
	if resp != want {
		t.Fatalf("resp %q, want %q", resp, want)
	}
	if !CheckMD5("secret", "alice", salt, resp) {
		t.Fatal("correct response rejected")
	}
	if CheckMD5("secret", "bob", salt, resp) || CheckMD5("Secret", "alice", salt, resp) ||
		CheckMD5("secret", "alice", [4]byte{1, 2, 3, 5}, resp) || CheckMD5("secret", "alice", salt, "") {
		t.Fatal("wrong response accepted")
	}
	s1, err := MD5Salt()
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := MD5Salt()
	if s1 == s2 {
		t.Log("two equal random salts (unlikely)")
	}
}

func FuzzStart(f *testing.F) {
	for _, s := range []string{
		rfcClientFirst, "y,,n=,r=abc", "p=tls-server-end-point,,n=,r=abc", "", "n,,", "n,a=x,n=,r=a",
		"n,,n=,r=abc,x=1", "y,,m=1,n=,r=1", ",,,,", "n,,n=,r=\x00",
	} {
		f.Add([]byte(s), []byte(rfcClientFinal))
	}
	c := rfcCreds(f)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		conv, sf, err := c.Start(first)
		if err != nil {
			if conv != nil || sf != nil {
				t.Fatal("non-nil results with error")
			}
			return
		}
		if _, err := conv.Finish(final); err == nil {
			t.Fatalf("random final accepted: %q / %q", first, final)
		}
	})
}
