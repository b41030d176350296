package webhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// verifier is a receiver's check of a delivery written from the
// specification's text alone: "v1= followed by the hex HMAC-SHA256 of
// (timestamp, a full stop, raw body) keyed by the subscription's signing
// key"; "compares in constant time, and refuses a timestamp more than five
// minutes away from its own clock". It shares no code with Sign: its HMAC
// is RFC 2104 written out over SHA-256.
type verifier struct {
	keys []string
	now  func() time.Time
}

func hmacSHA256(key, msg []byte) []byte {
	const block = 64
	if len(key) > block {
		k := sha256.Sum256(key)
		key = k[:]
	}
	ipad := make([]byte, block, block+len(msg))
	opad := make([]byte, block, block+sha256.Size)
	copy(ipad, key)
	copy(opad, key)
	for i := range block {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	inner := sha256.Sum256(append(ipad, msg...))
	outer := sha256.Sum256(append(opad, inner[:]...))
	return outer[:]
}

var errUnverified = errors.New("signature not verified")

func (v verifier) verify(ts, sig string, body []byte) error {
	if ts == "" || strings.Trim(ts, "0123456789") != "" || len(ts) > 12 {
		return errors.New("timestamp is not a number")
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return err
	}
	if d := v.now().Unix() - n; d > 300 || d < -300 {
		return fmt.Errorf("timestamp %ds away from the receiver's clock", d)
	}
	msg := append([]byte(ts+"."), body...)
	for _, key := range v.keys {
		want := []byte("v1=" + hex.EncodeToString(hmacSHA256([]byte(key), msg)))
		for _, got := range strings.Split(sig, " ") {
			if subtle.ConstantTimeCompare([]byte(got), want) == 1 {
				return nil
			}
		}
	}
	return errUnverified
}

// verifyingReceiver answers 204 to deliveries its verifier accepts and 401
// to the others.
func verifyingReceiver(t *testing.T, v verifier) *receiver {
	return newReceiver(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if err := v.verify(r.Header.Get("Svc-Timestamp"), r.Header.Get("Svc-Signature"), body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func newKey(t testing.TB) string {
	t.Helper()
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSignKnownVector pins Sign to a value computed by Python's hmac (the
// docs' receiver snippet) and by the test's own HMAC.
func TestSignKnownVector(t *testing.T) {
	key := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"id":"evt_1","type":"subscription.test"}`)
	const python = "v1=1c0fac2ca8749872991e717cc4d932c699e5a92773933202fb8162c0719ce8a7"
	if got := Sign([]string{key}, 1700000000, body); got != python {
		t.Errorf("Sign = %s, want %s", got, python)
	}
	own := "v1=" + hex.EncodeToString(hmacSHA256([]byte(key), append([]byte("1700000000."), body...)))
	if own != python {
		t.Errorf("the test's HMAC = %s, want %s", own, python)
	}
	if got := Sign([]string{key, "whsec_other"}, 1700000000, body); !strings.HasPrefix(got, python+" v1=") || len(got) != 2*len(python)+1 {
		t.Errorf("two keys: %s", got)
	}
	if got := Sign(nil, 1, body); got != "" {
		t.Errorf("no key: %q", got)
	}
}

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k := newKey(t)
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k, "whsec_"))
		if !strings.HasPrefix(k, "whsec_") || err != nil || len(raw) != 32 || strings.ContainsAny(k, "=+/") {
			t.Fatalf("key %q: %v, %d bytes", k, err, len(raw))
		}
		if seen[k] {
			t.Fatalf("key %q twice", k)
		}
		seen[k] = true
	}
}

// TestReceiverVerifies sends real deliveries to receivers that verify them
// independently: the key they hold verifies, with one key and with two
// (rotation overlap, either key); another key does not.
func TestReceiverVerifies(t *testing.T) {
	oldKey, newKeyV, otherKey := newKey(t), newKey(t), newKey(t)
	s := open(t, Options{Timeout: 5 * time.Second})
	tests := []struct {
		name     string
		signWith []string
		holds    []string
		want     int
	}{
		{"one key", []string{oldKey}, []string{oldKey}, 204},
		{"overlap, receiver has the new key", []string{newKeyV, oldKey}, []string{newKeyV}, 204},
		{"overlap, receiver still has the old key", []string{newKeyV, oldKey}, []string{oldKey}, 204},
		{"receiver holds both", []string{newKeyV}, []string{oldKey, newKeyV}, 204},
		{"another key", []string{newKeyV, oldKey}, []string{otherKey}, 401},
		{"after the overlap the old key no longer verifies", []string{newKeyV}, []string{oldKey}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := verifyingReceiver(t, verifier{keys: tt.holds, now: time.Now})
			for _, tmpl := range []string{"", `{"text": {{json .Subject}}}`} {
				res := s.Send(bg, Request{URL: rc.URL + "/hook", Keys: tt.signWith, DeliveryID: "dlv_1", Event: testEvent("evt_1"), Template: tmpl})
				if res.StatusCode != tt.want || res.Delivered() != (tt.want == 204) {
					t.Fatalf("template %q: %+v, want %d", tmpl, res, tt.want)
				}
			}
			got := rc.requests()
			if sig := got[0].Header.Get("Svc-Signature"); strings.Count(sig, "v1=") != len(tt.signWith) {
				t.Errorf("Svc-Signature %q, want %d signatures", sig, len(tt.signWith))
			}
		})
	}
}

// TestTimestamps: a receiver refuses a signature more than five minutes
// from its clock, either way, and accepts one within.
func TestTimestamps(t *testing.T) {
	key := newKey(t)
	rc := verifyingReceiver(t, verifier{keys: []string{key}, now: time.Now})
	for _, tt := range []struct {
		skew time.Duration
		want int
	}{
		{0, 204}, {-4 * time.Minute, 204}, {4 * time.Minute, 204},
		{-6 * time.Minute, 401}, {6 * time.Minute, 401}, {-24 * time.Hour, 401}, {365 * 24 * time.Hour, 401},
	} {
		s := open(t, Options{Now: func() time.Time { return time.Now().Add(tt.skew) }})
		res := s.Send(bg, Request{URL: rc.URL, Keys: []string{key}, Event: testEvent("evt_ts")})
		if res.StatusCode != tt.want {
			t.Errorf("clock %s off: %+v, want %d", tt.skew, res, tt.want)
		}
	}
}

// TestBitFlips: of signed deliveries as a receiver got them, every
// single-bit change of the body, the timestamp or the signature fails
// verification: at least 10,000 mutations.
func TestBitFlips(t *testing.T) {
	keys := []string{newKey(t)}
	v := verifier{keys: keys, now: time.Now}
	rc := verifyingReceiver(t, v)
	s := open(t, Options{})
	mutations := 0
	for i := 0; mutations < 10000; i++ {
		req := Request{URL: rc.URL, Keys: keys, DeliveryID: fmt.Sprintf("dlv_%d", i), Event: testEvent(fmt.Sprintf("evt_%d", i))}
		if i%2 == 1 {
			req.Template = `{"text": {{json .Body}}, "n": {{len .Fields}}}`
		}
		if res := s.Send(bg, req); !res.Delivered() {
			t.Fatalf("delivery %d: %+v", i, res)
		}
		got := rc.requests()[i]
		ts, sig, body := got.Header.Get("Svc-Timestamp"), got.Header.Get("Svc-Signature"), got.Body
		if err := v.verify(ts, sig, body); err != nil {
			t.Fatalf("the delivery itself: %v", err)
		}
		flip := func(b []byte, bit int) []byte {
			c := append([]byte(nil), b...)
			c[bit/8] ^= 1 << (bit % 8)
			return c
		}
		for bit := range 8 * len(body) {
			if v.verify(ts, sig, flip(body, bit)) == nil {
				t.Fatalf("body bit %d flipped still verifies", bit)
			}
			mutations++
		}
		for bit := range 8 * len(ts) {
			if v.verify(string(flip([]byte(ts), bit)), sig, body) == nil {
				t.Fatalf("timestamp bit %d flipped still verifies", bit)
			}
			mutations++
		}
		for bit := range 8 * len(sig) {
			if v.verify(ts, string(flip([]byte(sig), bit)), body) == nil {
				t.Fatalf("signature bit %d flipped still verifies", bit)
			}
			mutations++
		}
	}
	t.Logf("%d single-bit mutations, none verified", mutations)
}
