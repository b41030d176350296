package slots

import (
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/svchost/svc/internal/errcode"
)

// Limits of a fill's values.
const (
	maxFields     = 32
	maxValueBytes = 4 << 10
)

var fieldRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// checkValue validates one value; the message never carries the value,
// which may be a password.
func checkValue(field, v string) error {
	switch {
	case len(v) > maxValueBytes:
		return errcode.Invalid(field, "%s must be at most %d bytes", field, maxValueBytes)
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		return errcode.Invalid(field, "%s must be UTF-8 text without NUL bytes: it becomes an environment variable", field)
	}
	return nil
}

// bindFields are the fields of a slot bound to a URL.
func bindFields(typ, raw string) (fields, secret map[string]string, err error) {
	if err := checkValue("bind.url", raw); err != nil {
		return nil, nil, err
	}
	if typ == TypePostgres {
		return postgresFromURL("bind.url", raw)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, nil, errcode.Invalid("bind.url", "bind.url must be an absolute URL such as redis://cache.internal:6379")
	}
	return map[string]string{}, map[string]string{"url": raw}, nil
}

// valueFields are the fields of a slot set to values.
func valueFields(typ string, in map[string]any) (fields, secret map[string]string, err error) {
	if len(in) == 0 || len(in) > maxFields {
		return nil, nil, errcode.Invalid("value", "value sets between 1 and %d fields", maxFields)
	}
	vals := map[string]string{}
	for name, raw := range in {
		path := "value." + name
		if !fieldRE.MatchString(name) {
			return nil, nil, errcode.Invalid(path, "a field's name is a lower-case letter followed by at most 31 lower-case letters, digits or '_'")
		}
		var v string
		switch x := raw.(type) {
		case string:
			v = x
		case float64:
			v = strconv.FormatFloat(x, 'f', -1, 64)
		case int:
			v = strconv.Itoa(x)
		case int64:
			v = strconv.FormatInt(x, 10)
		case bool:
			v = strconv.FormatBool(x)
		default:
			return nil, nil, errcode.Invalid(path, "%s must be a string, number or boolean", path)
		}
		if err := checkValue(path, v); err != nil {
			return nil, nil, err
		}
		vals[name] = v
	}
	if typ == TypePostgres {
		return postgresFromValues(vals)
	}
	// Nothing says which values of another type are secret: all are sealed.
	return map[string]string{}, vals, nil
}

// postgresFromURL takes a PostgreSQL connection URL apart into the fields
// of a postgres slot; the URL itself is kept as given (with its query).
func postgresFromURL(field, raw string) (fields, secret map[string]string, err error) {
	bad := func(format string, args ...any) error {
		return errcode.Invalid(field, "%s: "+format, append([]any{field}, args...)...).
			WithRemedy("for example postgres://app:password@db.internal:5432/app?sslmode=require")
	}
	u, perr := url.Parse(raw)
	if perr != nil {
		// url.Error quotes the URL, password included: say nothing of it.
		return nil, nil, bad("not a URL")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, nil, bad("the scheme must be postgres:// or postgresql://")
	}
	if u.Opaque != "" || u.Hostname() == "" || strings.Contains(u.Host, ",") {
		return nil, nil, bad("name exactly one host")
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	if err := checkPort(field, port); err != nil {
		return nil, nil, err
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, nil, bad("name the database as the path, e.g. /app")
	}
	if u.User == nil || u.User.Username() == "" {
		return nil, nil, bad("name the user, e.g. postgres://app@host/app")
	}
	fields = map[string]string{"host": u.Hostname(), "port": port, "database": db, "username": u.User.Username()}
	secret = map[string]string{"url": raw}
	if pw, ok := u.User.Password(); ok {
		secret["password"] = pw
	}
	return fields, secret, nil
}

// postgresFromValues reads a postgres slot's values: url alone, or host,
// database, username and optionally port (default 5432), password and
// sslmode, from which the URL is made.
func postgresFromValues(v map[string]string) (fields, secret map[string]string, err error) {
	allowed := []string{"url", "host", "port", "database", "username", "password", "sslmode"}
	for _, name := range slices.Sorted(maps.Keys(v)) {
		if !slices.Contains(allowed, name) {
			return nil, nil, errcode.Invalid("value."+name, "a postgres slot has no field %q", name).WithDetail("fields", allowed)
		}
	}
	if raw, ok := v["url"]; ok {
		if len(v) > 1 {
			return nil, nil, errcode.Invalid("value.url", "give either url alone, or host, port, database, username and password")
		}
		return postgresFromURL("value.url", raw)
	}
	for _, name := range []string{"host", "database", "username"} {
		if v[name] == "" {
			return nil, nil, errcode.Invalid("value."+name, "a postgres slot set by value needs host, database and username (or url)")
		}
	}
	port := v["port"]
	if port == "" {
		port = "5432"
	}
	if err := checkPort("value.port", port); err != nil {
		return nil, nil, err
	}
	if strings.ContainsAny(v["host"], "/,@?#") {
		return nil, nil, errcode.Invalid("value.host", "value.host must be a host name or address")
	}
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(v["host"], port), Path: "/" + v["database"], User: url.User(v["username"])}
	secret = map[string]string{}
	if pw, ok := v["password"]; ok {
		u.User = url.UserPassword(v["username"], pw)
		secret["password"] = pw
	}
	if mode, ok := v["sslmode"]; ok {
		if !slices.Contains(SSLModes(), mode) {
			return nil, nil, errcode.Invalid("value.sslmode", "sslmode is one of %s", strings.Join(SSLModes(), ", "))
		}
		u.RawQuery = url.Values{"sslmode": {mode}}.Encode()
	}
	secret["url"] = u.String()
	fields = map[string]string{"host": v["host"], "port": port, "database": v["database"], "username": v["username"]}
	return fields, secret, nil
}

// SSLModes lists libpq's sslmode values.
func SSLModes() []string {
	return []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}
}

func checkPort(field, port string) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return errcode.Invalid(field, "%s: the port must be a number from 1 to 65535", field)
	}
	return nil
}
