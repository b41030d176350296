package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/slots"
)

// connectTimeout bounds one connection attempt, whatever the caller's
// deadline.
const connectTimeout = 10 * time.Second

// Postgres is the adapter: one administrator connection, opened on first
// use and again after it broke, so that a server that is down when svc
// starts is used as soon as it is back, without a restart. Operations are
// serialised on the connection; provisioning is rare.
type Postgres struct {
	cfg Config

	mu     sync.Mutex // guards conn and closed, and is held while the connection is in use
	conn   *pgx.Conn
	super  bool
	closed bool

	version   atomic.Pointer[string]
	connected atomic.Bool
}

// New returns the adapter; it connects on first use.
func New(cfg Config) (*Postgres, error) {
	if _, err := cfg.connConfig(); err != nil {
		return nil, err
	}
	return &Postgres{cfg: cfg}, nil
}

// connConfig is pgx's configuration. The password is set on it after
// parsing, so that it is never part of a string the driver might quote in
// an error.
func (c Config) connConfig() (*pgx.ConnConfig, error) {
	q := url.Values{"sslmode": {c.SSLMode}, "application_name": {"svc"}}
	if c.CACert != "" {
		q.Set("sslrootcert", c.CACert)
	}
	u := url.URL{Scheme: "postgres", User: url.User(c.Username), Host: c.addr(), Path: "/" + c.Database, RawQuery: q.Encode()}
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		return nil, errcode.Invalid("config", "the postgres adapter's settings do not make a connection: %v", err)
	}
	cfg.Password = c.Password
	cfg.ConnectTimeout = connectTimeout
	// No statement cache: the adapter runs a handful of statements, some
	// of them built per call.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	return cfg, nil
}

// Type is the slot type the adapter provisions.
func (p *Postgres) Type() string { return slots.TypePostgres }

// with runs fn on the administrator connection, connecting first if
// needed. A connection that broke is dropped, so the next call connects
// again.
func (p *Postgres) with(ctx context.Context, what string, fn func(conn *pgx.Conn) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errcode.New(errcode.AdapterUnavailable, "the postgres adapter is closed")
	}
	if p.conn == nil || p.conn.IsClosed() {
		if err := p.connect(ctx); err != nil {
			return p.translate("connecting as "+p.cfg.Username, err)
		}
	}
	err := fn(p.conn)
	if p.conn.IsClosed() {
		p.conn = nil
		p.connected.Store(false)
	}
	return p.translate(what, err)
}

func (p *Postgres) connect(ctx context.Context) error {
	cfg, err := p.cfg.connConfig()
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		p.connected.Store(false)
		return err
	}
	var super bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		_ = conn.Close(context.Background())
		return err
	}
	v := conn.PgConn().ParameterStatus("server_version")
	p.version.Store(&v)
	p.conn, p.super = conn, super
	p.connected.Store(true)
	return nil
}

// Check says whether the server answers the administrator.
func (p *Postgres) Check(ctx context.Context) error {
	return p.with(ctx, "a health check", func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT 1")
		return err
	})
}

// Capabilities of the adapter: the slot types it provisions and, once it
// has connected, the server's version.
func (p *Postgres) Capabilities() map[string]any {
	caps := map[string]any{"types": []string{slots.TypePostgres}, "connected": p.connected.Load(), "server_version": nil}
	if v := p.version.Load(); v != nil {
		caps["server_version"] = *v
	}
	return caps
}

// Close closes the connection; calls after it answer ADAPTER_UNAVAILABLE.
func (p *Postgres) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.connected.Store(false)
	if p.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.conn.Close(ctx)
	p.conn = nil
	return err
}

// maxIdentifier is PostgreSQL's identifier length (NAMEDATALEN - 1).
const maxIdentifier = 63

// names returns the role (and database) names to try for a slot, in
// order: svc_<slug>_<key>, then the same cut to make room for a suffix
// hashed from the app ID and key, which no other slot shares. A name that
// would be too long has only the suffixed form.
func names(req slots.ProvisionRequest) []string {
	base := "svc_" + sanitize(req.AppSlug) + "_" + sanitize(req.Key)
	sum := sha256.Sum256([]byte(req.AppID + "/" + req.Key))
	suffix := "_" + hex.EncodeToString(sum[:4])
	cut := strings.TrimRight(base[:min(len(base), maxIdentifier-len(suffix))], "_")
	if len(base) > maxIdentifier {
		return []string{cut + suffix}
	}
	return []string{base, cut + suffix}
}

// sanitize reduces s to lower-case letters, digits and single underscores.
func sanitize(s string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" {
		return "x"
	}
	return out
}

// marker is the comment on a role (and database) made for a slot: it is
// how the adapter tells its own from others.
func marker(req slots.ProvisionRequest) string {
	return "svc slot " + req.AppID + "/" + req.Key
}

// lockKey is the advisory lock of a slot's provisioning.
func lockKey(mark string) int64 {
	sum := sha256.Sum256([]byte(mark))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// newPassword draws 32 random bytes, as URL-safe text.
func newPassword() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// state is what exists of a name on the server.
type state struct {
	roleExists  bool
	roleComment *string
	dbOwner     *string // nil when no database has the name
}

func (s state) roleOurs(mark string) bool {
	return s.roleExists && s.roleComment != nil && *s.roleComment == mark
}

// foreign says whether the name is taken by something not made for this
// slot: a role without its marker, or a database owned by another role.
func (s state) foreign(name, mark string) bool {
	return (s.roleExists && !s.roleOurs(mark)) || (s.dbOwner != nil && *s.dbOwner != name)
}

func inspect(ctx context.Context, conn *pgx.Conn, name string) (state, error) {
	var s state
	err := conn.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1),
		(SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1),
		(SELECT pg_get_userbyid(datdba)::text FROM pg_database WHERE datname = $1)`, name).
		Scan(&s.roleExists, &s.roleComment, &s.dbOwner)
	return s, err
}

// execer is a connection or a transaction.
type execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

var (
	_ execer = (*pgx.Conn)(nil)
	_ execer = pgx.Tx(nil)
)

// execf builds a statement on the server with format() (identifiers with
// %I, literals with %L, both quoted by the server) and runs it: utility
// statements such as CREATE ROLE take no parameters. The template is a
// constant of this package, without quotes; the values travel as
// parameters.
func execf(ctx context.Context, q execer, template string, args ...any) error {
	params := make([]string, len(args))
	for i := range args {
		params[i] = "$" + strconv.Itoa(i+1) + "::text"
	}
	var stmt string
	if err := q.QueryRow(ctx, "SELECT format('"+template+"', "+strings.Join(params, ", ")+")", args...).Scan(&stmt); err != nil {
		return err
	}
	_, err := q.Exec(ctx, stmt)
	return err
}

// Provision makes the slot's role and database, or finds them again: a
// role of the slot's name that carries the slot's marker is reused (its
// password set again), as is a database of that name it owns. A name
// taken by anything else is left alone and the suffixed name is used.
func (p *Postgres) Provision(ctx context.Context, req slots.ProvisionRequest) (slots.Provisioned, error) {
	pw := req.Password
	if pw == "" {
		pw = newPassword()
	}
	verifier, err := scramVerifier(pw)
	if err != nil {
		return slots.Provisioned{}, err
	}
	mark := marker(req)
	var name string
	err = p.with(ctx, "provisioning slot "+req.Key, func(conn *pgx.Conn) error {
		// One provision of a slot at a time, across every svc server: the
		// session lock is released below, or with the session if it breaks.
		lock := lockKey(mark)
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
			return err
		}
		defer func() {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", lock)
		}()
		// Twice: something other than svc may create the role or database
		// between looking and creating.
		for try := 1; ; try++ {
			name = ""
			err := p.provision(ctx, conn, req, mark, verifier, &name)
			if try < 2 && isDuplicate(err) {
				continue
			}
			return err
		}
	})
	if err != nil {
		return slots.Provisioned{}, err
	}
	port := strconv.Itoa(p.cfg.Port)
	u := url.URL{Scheme: "postgres", User: url.UserPassword(name, pw), Host: net.JoinHostPort(p.cfg.appHost(), port),
		Path: "/" + name, RawQuery: url.Values{"sslmode": {p.cfg.SSLMode}}.Encode()}
	return slots.Provisioned{
		Fields:       map[string]string{"host": p.cfg.appHost(), "port": port, "database": name, "username": name},
		SecretFields: map[string]string{"password": pw, "url": u.String()},
	}, nil
}

func (p *Postgres) provision(ctx context.Context, conn *pgx.Conn, req slots.ProvisionRequest, mark, verifier string, chosen *string) error {
	// The role and database the slot had before (made under an earlier
	// slug) come first, if they are still the slot's; they are never made
	// anew under that name.
	prev := req.Previous["username"]
	candidates := names(req)
	if prev != "" && prev == req.Previous["database"] && len(prev) <= maxIdentifier && !slices.Contains(candidates, prev) {
		candidates = append([]string{prev}, candidates...)
	}
	for _, name := range candidates {
		st, err := inspect(ctx, conn, name)
		if err != nil {
			return err
		}
		if st.foreign(name, mark) || (name == prev && !st.roleOurs(mark)) {
			continue
		}
		*chosen = name
		if st.roleExists {
			if err := execf(ctx, conn, "ALTER ROLE %I WITH LOGIN PASSWORD %L", name, verifier); err != nil {
				return err
			}
		} else if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// The role and its marker commit together: a role without
			// the marker would look like someone else's.
			if err := execf(ctx, tx, "CREATE ROLE %I WITH LOGIN PASSWORD %L", name, verifier); err != nil {
				return err
			}
			return execf(ctx, tx, "COMMENT ON ROLE %I IS %L", name, mark)
		}); err != nil {
			return err
		}
		if !p.super {
			// A non-superuser administrator must be a member of the role
			// to create a database owned by it.
			if err := execf(ctx, conn, "GRANT %I TO CURRENT_USER", name); err != nil {
				return err
			}
		}
		if st.dbOwner == nil {
			if err := execf(ctx, conn, "CREATE DATABASE %I WITH OWNER %I", name, name); err != nil {
				return err
			}
		}
		// Only its owner (and superusers) may connect to it.
		if err := execf(ctx, conn, "REVOKE ALL ON DATABASE %I FROM PUBLIC", name); err != nil {
			return err
		}
		return execf(ctx, conn, "COMMENT ON DATABASE %I IS %L", name, mark)
	}
	return errcode.New(errcode.AdapterFailed, "postgres at %s already has roles or databases named %s that svc did not make for slot %s of app %s; they are left alone",
		p.cfg.addr(), strings.Join(names(req), " and "), req.Key, req.AppID).
		WithRemedy("rename or drop them on the server, or fill the slot with bind or value")
}

// isDuplicate says whether a statement lost a race to create a role or
// database of the same name.
func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42710", "42P04", "23505": // duplicate_object, duplicate_database, unique_violation (catalog race)
		return true
	}
	return false
}

// Deprovision drops the slot's database and role, which the fill's
// database and username fields name, if the adapter made them for this
// slot; anything else of those names is left alone. A database with open
// connections is not dropped (ADAPTER_FAILED).
func (p *Postgres) Deprovision(ctx context.Context, req slots.ProvisionRequest, fields map[string]string) error {
	role, db := fields["username"], fields["database"]
	if role == "" || db == "" {
		return errcode.Invalid("fields", "the fill names no database and username to deprovision")
	}
	mark := marker(req)
	return p.with(ctx, "deprovisioning slot "+req.Key, func(conn *pgx.Conn) error {
		rs, err := inspect(ctx, conn, role)
		if err != nil {
			return err
		}
		ds, err := inspect(ctx, conn, db)
		if err != nil {
			return err
		}
		if rs.roleExists && !rs.roleOurs(mark) {
			return errcode.New(errcode.AdapterFailed, "the role %s on postgres at %s was not made by svc for slot %s of app %s; left alone", role, p.cfg.addr(), req.Key, req.AppID)
		}
		if ds.dbOwner != nil {
			if *ds.dbOwner != role || !rs.roleOurs(mark) {
				return errcode.New(errcode.AdapterFailed, "the database %s on postgres at %s is not the one svc made for slot %s of app %s; left alone", db, p.cfg.addr(), req.Key, req.AppID)
			}
			if err := execf(ctx, conn, "DROP DATABASE IF EXISTS %I", db); err != nil {
				return err
			}
		}
		if !rs.roleExists {
			return nil
		}
		return execf(ctx, conn, "DROP ROLE IF EXISTS %I", role)
	})
}
