package scan

import (
	"strings"
	"testing"
)

// TestRedact: every secret a rule matches is replaced, including what the
// secret check lets pass (a low-entropy generic value) and a private key
// cut before its closing line; text without secrets is unchanged.
func TestRedact(t *testing.T) {
	tok := token(t)
	key := "-----BEGIN RSA " + "PRIVATE KEY-----\n" + strings.Repeat("QUJD", 30) + "\n"
	cases := []struct {
		name, in string
		gone     []string
		kept     []string
	}{
		{"a token", "const gh = '" + tok + "';\nconsole.log(1)\n", []string{tok, tok[4:20]}, []string{"const gh = '", "console.log(1)"}},
		{"a generic value under the entropy floor", "password = \"aaaaaaaaaaaa\"\n", []string{"aaaaaaaaaaaa"}, []string{"password"}},
		{"a truncated private key", "x = 1\n" + key, []string{"QUJD"}, []string{"x = 1"}},
		{"two secrets on a line", tok + " " + strings.Replace(tok, "ghp", "ghs", 1), []string{tok[4:], "ghs_"}, nil},
		{"nothing secret", "FROM golang:1.26\nRUN go build ./...\n", nil, []string{"FROM golang:1.26\nRUN go build ./...\n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := string(Redact([]byte(c.in)))
			for _, g := range c.gone {
				if strings.Contains(out, g) {
					t.Errorf("%q is still in %q", g, out)
				}
			}
			for _, k := range c.kept {
				if !strings.Contains(out, k) {
					t.Errorf("%q is gone from %q", k, out)
				}
			}
			if c.gone != nil && !strings.Contains(out, Redacted) {
				t.Errorf("no %s in %q", Redacted, out)
			}
		})
	}
}

// TestMerge: findings added are sorted in, counted and scored with the
// rest; the basis grows; the result merged into is not changed.
func TestMerge(t *testing.T) {
	res := Result{Score: 80, Basis: []Basis{{ScannerSecrets, "x"}}, Findings: []Finding{{ID: "a", Severity: High, Fixable: true}}, Counts: Counts{High: 1}}
	got := Merge(res, []Finding{{ID: "ai:1", Severity: Critical}, {ID: "ai:2", Severity: Low, Fixable: true}}, []Basis{{"ai:adp", "model m"}}, true)
	if got.Score != 78 || got.Counts != (Counts{Critical: 1, High: 1, Low: 1}) || len(got.Basis) != 2 || got.Findings[0].ID != "ai:1" || got.Findings[2].ID != "ai:2" {
		t.Fatalf("merged %+v", got)
	}
	if len(res.Findings) != 1 || len(res.Basis) != 1 {
		t.Fatalf("the result merged into changed: %+v", res)
	}
	if none := Merge(Result{}, nil, nil, false); none.Findings == nil || none.Score != 100 {
		t.Fatalf("empty: %+v", none)
	}
}
