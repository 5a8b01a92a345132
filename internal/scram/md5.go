package scram

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
)

// MD5Salt returns a random 4-byte salt for AuthenticationMD5Password.
func MD5Salt() ([4]byte, error) {
	var salt [4]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return salt, fmt.Errorf("scram: generating md5 salt: %w", err)
	}
	return salt, nil
}

// MD5Response computes what a PostgreSQL client sends in reply to
// AuthenticationMD5Password: "md5" + md5hex(md5hex(password + user) + salt).
func MD5Response(password, user string, salt [4]byte) string {
	inner := md5Hex([]byte(password + user))
	return "md5" + md5Hex(append([]byte(inner), salt[:]...))
}

// CheckMD5 reports, in constant time, whether response is the correct MD5
// password response for password, user and salt.
func CheckMD5(password, user string, salt [4]byte, response string) bool {
	want := MD5Response(password, user, salt)
	return subtle.ConstantTimeCompare([]byte(want), []byte(response)) == 1
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}
