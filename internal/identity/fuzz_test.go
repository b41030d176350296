package identity

import (
	"strings"
	"testing"

	"github.com/svchost/svc/internal/ids"
)

func FuzzSplitCredential(f *testing.F) {
	_, sesCred, _ := newSecret(ids.Session)
	_, tokCred, _ := newSecret(ids.Token)
	for _, s := range []string{
		sesCred, tokCred, "", ".", "ses_", "ses_.", "tok_." + strings.Repeat("a", 43),
		sesCred + "." + strings.Repeat("x", 43), strings.ToLower(sesCred), "ses_" + strings.Repeat("Z", 26) + "." + strings.Repeat("b", 43),
		"\xff\xfe.\x00", tokCred[:len(tokCred)-1] + "é",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cred string) {
		for _, p := range []ids.Prefix{ids.Session, ids.Token} {
			id, secret, ok := splitCredential(p, cred)
			if !ok {
				if id != "" || secret != "" {
					t.Fatalf("splitCredential(%q, %q) refused but returned %q, %q", p, cred, id, secret)
				}
				continue
			}
			if !ids.Valid(p, id) {
				t.Fatalf("splitCredential(%q, %q) accepted invalid ID %q", p, cred, id)
			}
			if len(secret) != 43 {
				t.Fatalf("splitCredential(%q, %q) accepted a %d-byte secret", p, cred, len(secret))
			}
			if id+"."+secret != cred {
				t.Fatalf("splitCredential(%q, %q) = %q, %q: not the parts of the credential", p, cred, id, secret)
			}
		}
	})
}

func TestSplitCredential(t *testing.T) {
	id, cred, hash := newSecret(ids.Token)
	gotID, secret, ok := splitCredential(ids.Token, cred)
	if !ok || gotID != id || len(secret) != 43 || !secretMatches(secret, hash) {
		t.Errorf("splitCredential(newSecret) = %q, %q, %v", gotID, secret, ok)
	}
	if _, _, ok := splitCredential(ids.Session, cred); ok {
		t.Error("a token credential parsed as a session")
	}
	if secretMatches(secret[:42]+"x", hash) || secretMatches("", hash) || secretMatches(secret, nil) {
		t.Error("secretMatches accepts a wrong secret")
	}
}
