package upgrade

import (
	"strings"
	"testing"
)

func FuzzParseVersionOutput(f *testing.F) {
	for _, s := range []string{"1.2.3\n", "", "v1\x00", "a b\n", "\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v := ParseVersionOutput(b)
		if v != "" && (len(v) > 128 || strings.ContainsAny(v, " \t\r\n")) {
			t.Errorf("ParseVersionOutput(%q) = %q", b, v)
		}
	})
}

func FuzzCompareVersions(f *testing.F) {
	f.Add("1.2.3", "1.2.3-rc1")
	f.Add("v1.10", "1.9.9")
	f.Add("dev", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		x, y := CompareVersions(a, b), CompareVersions(b, a)
		if x != -y || (x == 0) != (a == b) {
			t.Errorf("CompareVersions(%q, %q) = %d, reversed %d", a, b, x, y)
		}
	})
}

func FuzzParseKeys(f *testing.F) {
	f.Add("AAAA")
	f.Add("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=")
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := ParsePublicKey(s); err == nil && len(k) != 32 {
			t.Errorf("ParsePublicKey(%q) gave %d bytes", s, len(k))
		}
		if k, err := ParsePrivateKey(s); err == nil && len(k) != 64 {
			t.Errorf("ParsePrivateKey(%q) gave %d bytes", s, len(k))
		}
	})
}
