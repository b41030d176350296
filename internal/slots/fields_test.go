package slots

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// FuzzPostgresURL: a URL from outside (PUT /slots bind or value) is taken
// apart or refused; a refusal never repeats its password, and what is
// taken is a usable set of fields.
func FuzzPostgresURL(f *testing.F) {
	for _, seed := range []string{
		"postgres://u:p@h:5432/d?sslmode=require", "postgresql://u@[::1]/d", "postgres://u:p@h1,h2/d",
		"postgres://:p@h/d", "postgres://u:p@h:0/d", "postgres://u:p%zz@h/d", "mysql://u:p@h/d", "postgres:opaque", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		fields, secret, err := postgresFromURL("bind.url", raw)
		if err != nil {
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.ValidInvalid {
				t.Fatalf("err = %v", err)
			}
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(e.Message+e.Remedy, pw) {
					t.Fatalf("the refusal repeats the password: %s", e.Message)
				}
			}
			return
		}
		port, perr := strconv.Atoi(fields["port"])
		if fields["host"] == "" || fields["database"] == "" || fields["username"] == "" || perr != nil || port < 1 || port > 65535 || secret["url"] != raw {
			t.Fatalf("fields %v from %q", fields, raw)
		}
		for name := range fields {
			if IsSecret(TypePostgres, name) {
				t.Fatalf("secret field %s among the shown ones", name)
			}
		}
	})
}
