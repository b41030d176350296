package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseEnv checks that ParseEnv never panics, that its errors name the
// setting, and that whatever it accepts survives Map and FromMap, directly
// and through JSON, unchanged.
func FuzzParseEnv(f *testing.F) {
	seeds := []struct {
		i   uint8
		raw string
	}{
		{0, "github.com/acme/*, gitlab.com/x"}, {1, "app.exec,app.view"}, {2, " , app.delete"},
		{3, "passcode_only"}, {4, "yes"}, {5, "vm"}, {6, "sandbox"}, {7, "*.example.com,10.0.0.0/8,::1"},
		{8, "0"}, {9, "365"}, {10, "1.5GiB"}, {10, "9223372036854775807"}, {11, "TRUE"}, {12, "100"},
		{13, "stop"}, {14, "-1"}, {15, "no"}, {16, "1"}, {10, "100k"}, {7, "a..b"},
	}
	for _, s := range seeds {
		f.Add(s.i, s.raw)
	}
	names := Names()
	f.Fuzz(func(t *testing.T, i uint8, raw string) {
		name := names[int(i)%len(names)]
		v, err := ParseEnv(name, raw)
		if err != nil {
			var se *SettingError
			if !errors.As(err, &se) || se.Setting != name {
				t.Fatalf("ParseEnv(%s, %q) error %v is not a *SettingError for the setting", name, raw, err)
			}
			if !strings.HasPrefix(err.Error(), "policy setting "+name+": ") {
				t.Fatalf("error %q does not name the setting", err)
			}
			return
		}
		s, _ := lookup(name)
		p := Default()
		s.set(&p, v)
		if err := p.Validate(); err != nil {
			t.Fatalf("ParseEnv(%s, %q) = %#v, which Validate refuses: %v", name, raw, v, err)
		}
		got, err := FromMap(p.Map())
		if err != nil {
			t.Fatalf("FromMap(Map()) after ParseEnv(%s, %q) = %#v: %v", name, raw, v, err)
		}
		if diff := cmp.Diff(p, got); diff != "" {
			t.Fatalf("FromMap(Map()) changed the policy after ParseEnv(%s, %q) (-want +got):\n%s", name, raw, diff)
		}
		b, err := json.Marshal(p.Map())
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		got, err = FromMap(m)
		if err != nil {
			t.Fatalf("FromMap(JSON) after ParseEnv(%s, %q): %v", name, raw, err)
		}
		if diff := cmp.Diff(p, got); diff != "" {
			t.Fatalf("FromMap(JSON) changed the policy after ParseEnv(%s, %q) (-want +got):\n%s", name, raw, diff)
		}
		// The file form of the same string means the same thing.
		yv, err := ParseYAML(name, raw)
		if err != nil || !cmp.Equal(v, yv) {
			t.Fatalf("ParseYAML(%s, %q) = %#v, %v; ParseEnv gave %#v", name, raw, yv, err, v)
		}
	})
}
