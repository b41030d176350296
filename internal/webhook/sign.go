package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
)

// KeyPrefix starts every signing key.
const KeyPrefix = "whsec_"

// Sign is the Svc-Signature header of a body sent at Unix time ts: for each
// key, in order, "v1=" and the lower-case hex HMAC-SHA256 keyed by the
// whole key string (its UTF-8 bytes, "whsec_" included) of the timestamp in
// decimal, a full stop and the body; space separated.
func Sign(keys []string, ts int64, body []byte) string {
	var sb strings.Builder
	msg := strconv.AppendInt(nil, ts, 10)
	msg = append(msg, '.')
	for i, k := range keys {
		m := hmac.New(sha256.New, []byte(k))
		m.Write(msg)
		m.Write(body)
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1=")
		sb.WriteString(hex.EncodeToString(m.Sum(nil)))
	}
	return sb.String()
}

// NewKey returns a new signing key: "whsec_" and 32 random bytes in
// unpadded base64url.
func NewKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}
