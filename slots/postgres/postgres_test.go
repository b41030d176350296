package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/pgtest"
	"github.com/svchost/svc/internal/slots"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func configFor(s *pgtest.Server) Config {
	return Config{Host: s.Host, Port: s.Port, Database: s.Database, Username: s.User, Password: s.Password, SSLMode: "disable"}
}

func newAdapter(t testing.TB, cfg Config) *Postgres {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// superuser connects to the cluster as its superuser, for the tests' own
// look at the server.
func superuser(t testing.TB, s *pgtest.Server) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func wantCode(t *testing.T, what string, err error, code errcode.Code, secrets ...string) *errcode.Error {
	t.Helper()
	e, ok := errcode.As(err)
	if !ok || e.Code != code {
		t.Fatalf("%s: err = %v, want %s", what, err, code)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) || strings.Contains(e.Remedy, s) || strings.Contains(fmt.Sprint(e.Details), s) {
			t.Errorf("%s: the error carries a password: %v", what, err)
		}
	}
	return e
}

// useAs connects with a provisioned URL and proves the role owns its
// database: it creates a table, writes and reads a row.
func useAs(t *testing.T, rawURL string) {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		t.Fatalf("connect with the provisioned URL: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS notes (id serial PRIMARY KEY, body text NOT NULL)`); err != nil {
		t.Fatalf("create a table as the provisioned role: %v", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO notes (body) VALUES ($1)`, "hello"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM notes`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("count = %d, %v", n, err)
	}
}

func TestProvisionIsIdempotentAndTheRoleOwnsItsDatabase(t *testing.T) {
	s := pgtest.Start(t)
	p := newAdapter(t, configFor(s))
	ctx := ctxT(t)
	req := slots.ProvisionRequest{AppID: "app_01JTESTAPP", AppSlug: "my-shop", Key: "db"}

	first, err := p.Provision(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"host": "127.0.0.1", "port": fmt.Sprint(s.Port), "database": "svc_my_shop_db", "username": "svc_my_shop_db"}
	for k, v := range want {
		if first.Fields[k] != v {
			t.Errorf("field %s = %q, want %q", k, first.Fields[k], v)
		}
	}
	pw := first.SecretFields["password"]
	if len(pw) != 43 || first.Fields["password"] != "" {
		t.Fatalf("password %q (%d chars); fields %v", pw, len(pw), first.Fields)
	}
	wantURL := fmt.Sprintf("postgres://svc_my_shop_db:%s@127.0.0.1:%d/svc_my_shop_db?sslmode=disable", pw, s.Port)
	if first.SecretFields["url"] != wantURL {
		t.Errorf("url = %s, want %s", first.SecretFields["url"], wantURL)
	}
	useAs(t, first.SecretFields["url"])

	// Again (a retry): the same role and database, a new password; the old
	// one no longer works.
	second, err := p.Provision(ctx, req)
	if err != nil {
		t.Fatalf("provision again: %v", err)
	}
	if second.Fields["database"] != "svc_my_shop_db" || second.SecretFields["password"] == pw {
		t.Fatalf("second provision = %v", second.Fields)
	}
	useAs(t, second.SecretFields["url"]) // the table from before is still there: IF NOT EXISTS, count > 0
	if c, err := pgx.Connect(ctx, first.SecretFields["url"]); err == nil {
		c.Close(ctx)
		t.Error("the first password still works after a re-provision")
	}

	// Keeping the password (a re-provision that must not break the app).
	req.Password = second.SecretFields["password"]
	third, err := p.Provision(ctx, req)
	if err != nil || third.SecretFields["url"] != second.SecretFields["url"] {
		t.Fatalf("provision keeping the password: %v, %v", third.SecretFields["url"] == second.SecretFields["url"], err)
	}
	useAs(t, third.SecretFields["url"])

	// The database is the role's alone: another slot's role cannot connect.
	other, err := p.Provision(ctx, slots.ProvisionRequest{AppID: "app_01JOTHER", AppSlug: "other", Key: "db"})
	if err != nil {
		t.Fatal(err)
	}
	crossed := strings.Replace(other.SecretFields["url"], "/svc_other_db?", "/svc_my_shop_db?", 1)
	if c, err := pgx.Connect(ctx, crossed); err == nil {
		c.Close(ctx)
		t.Error("another app's role connects to this app's database")
	}

	var comment string
	if err := superuser(t, s).QueryRow(ctx, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = 'svc_my_shop_db'`).Scan(&comment); err != nil || comment != "svc slot app_01JTESTAPP/db" {
		t.Errorf("role comment = %q, %v", comment, err)
	}
	caps := p.Capabilities()
	if caps["connected"] != true || !strings.HasPrefix(fmt.Sprint(caps["server_version"]), s.Version) {
		t.Errorf("capabilities = %v", caps)
	}
}

func TestProvisionLeavesNamesItDidNotMakeAlone(t *testing.T) {
	s := pgtest.Start(t)
	ctx := ctxT(t)
	su := superuser(t, s)
	// A role of the slot's name made by someone else, and a database of
	// the suffixed name's neighbour: neither may be taken over.
	if _, err := su.Exec(ctx, `CREATE ROLE svc_blog_db LOGIN PASSWORD 'theirs'`); err != nil {
		t.Fatal(err)
	}
	p := newAdapter(t, configFor(s))
	req := slots.ProvisionRequest{AppID: "app_01JBLOG", AppSlug: "blog", Key: "db"}
	out, err := p.Provision(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Fields["username"]; got == "svc_blog_db" || !strings.HasPrefix(got, "svc_blog_db_") || len(got) != len("svc_blog_db_")+8 {
		t.Fatalf("username = %q, want svc_blog_db_<hash>", got)
	}
	useAs(t, out.SecretFields["url"])
	// And the same suffixed name the next time.
	again, err := p.Provision(ctx, req)
	if err != nil || again.Fields["username"] != out.Fields["username"] {
		t.Fatalf("again = %v, %v", again.Fields, err)
	}
	// Both names taken: refused, nothing touched.
	for _, n := range names(slots.ProvisionRequest{AppID: "app_01JTAKEN", AppSlug: "taken", Key: "db"}) {
		if _, err := su.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{n}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	_, err = p.Provision(ctx, slots.ProvisionRequest{AppID: "app_01JTAKEN", AppSlug: "taken", Key: "db"})
	wantCode(t, "both names taken", err, errcode.AdapterFailed)
}

func TestProvisionKeepsTheDatabaseWhenTheSlugChanges(t *testing.T) {
	s := pgtest.Start(t)
	ctx := ctxT(t)
	p := newAdapter(t, configFor(s))
	req := slots.ProvisionRequest{AppID: "app_01JRENAME", AppSlug: "old-name", Key: "db"}
	first, err := p.Provision(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	useAs(t, first.SecretFields["url"])
	req.AppSlug, req.Previous = "new-name", first.Fields
	again, err := p.Provision(ctx, req)
	if err != nil || again.Fields["database"] != "svc_old_name_db" {
		t.Fatalf("after the slug changed: %v, %v", again.Fields, err)
	}
	useAs(t, again.SecretFields["url"]) // the table made before is there
	// A previous name that is not the slot's any more is not used.
	req.Previous = map[string]string{"username": "postgres", "database": "postgres"}
	other, err := p.Provision(ctx, req)
	if err != nil || other.Fields["database"] != "svc_new_name_db" {
		t.Fatalf("with a previous name that is someone else's: %v, %v", other.Fields, err)
	}
}

func TestNonSuperuserAdministrator(t *testing.T) {
	s := pgtest.Start(t)
	ctx := ctxT(t)
	su := superuser(t, s)
	if _, err := su.Exec(ctx, `CREATE ROLE svc_admin LOGIN CREATEROLE CREATEDB PASSWORD 'admin-pw-8c1e'`); err != nil {
		t.Fatal(err)
	}
	cfg := configFor(s)
	cfg.Username, cfg.Password = "svc_admin", "admin-pw-8c1e"
	p := newAdapter(t, cfg)
	out, err := p.Provision(ctx, slots.ProvisionRequest{AppID: "app_01JLEAST", AppSlug: "least", Key: "main-db"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Fields["database"] != "svc_least_main_db" {
		t.Errorf("fields = %v", out.Fields)
	}
	useAs(t, out.SecretFields["url"])

	// Without CREATEROLE: refused by the server, ADAPTER_FAILED.
	if _, err := su.Exec(ctx, `CREATE ROLE svc_weak LOGIN PASSWORD 'weak-pw-77aa'`); err != nil {
		t.Fatal(err)
	}
	cfg.Username, cfg.Password = "svc_weak", "weak-pw-77aa"
	weak := newAdapter(t, cfg)
	_, err = weak.Provision(ctx, slots.ProvisionRequest{AppID: "app_01JWEAK", AppSlug: "weak", Key: "db"})
	e := wantCode(t, "provision without CREATEROLE", err, errcode.AdapterFailed, "weak-pw-77aa")
	if e.Details["sqlstate"] != "42501" || e.Remedy == "" {
		t.Errorf("error = %+v", e)
	}
}

func TestRefusalsAndOutagesAreTranslated(t *testing.T) {
	s := pgtest.Start(t)
	ctx := ctxT(t)

	t.Run("wrong administrator password", func(t *testing.T) {
		cfg := configFor(s)
		cfg.Password = "wrong-canary-pw-2f7b"
		p := newAdapter(t, cfg)
		e := wantCode(t, "check", p.Check(ctx), errcode.AdapterFailed, cfg.Password, s.Password)
		if e.Details["sqlstate"] != "28P01" {
			t.Errorf("details = %v", e.Details)
		}
		_, err := p.Provision(ctx, slots.ProvisionRequest{AppID: "app_01JX", AppSlug: "x", Key: "db"})
		wantCode(t, "provision", err, errcode.AdapterFailed, cfg.Password, s.Password)
		if p.Capabilities()["connected"] != false {
			t.Errorf("capabilities = %v", p.Capabilities())
		}
	})
	t.Run("no such administrative database", func(t *testing.T) {
		cfg := configFor(s)
		cfg.Database = "nope"
		e := wantCode(t, "check", newAdapter(t, cfg).Check(ctx), errcode.AdapterFailed, s.Password)
		if e.Details["sqlstate"] != "3D000" {
			t.Errorf("details = %v", e.Details)
		}
	})
	t.Run("nothing listens", func(t *testing.T) {
		cfg := configFor(s)
		cfg.Port = 1
		wantCode(t, "check", newAdapter(t, cfg).Check(ctx), errcode.AdapterUnavailable, s.Password)
	})
	t.Run("a broken connection is opened again", func(t *testing.T) {
		p := newAdapter(t, configFor(s))
		if err := p.Check(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := superuser(t, s).Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'svc'`); err != nil {
			t.Fatal(err)
		}
		// The first use may see the broken connection; the next connects
		// again.
		if err := p.Check(ctx); err != nil {
			wantCode(t, "check on the terminated connection", err, errcode.AdapterUnavailable, s.Password)
		}
		if err := p.Check(ctx); err != nil {
			t.Fatalf("check after reconnecting: %v", err)
		}
	})
	t.Run("stopped server", func(t *testing.T) {
		p := newAdapter(t, configFor(s))
		if err := p.Check(ctx); err != nil {
			t.Fatal(err)
		}
		s.Stop()
		wantCode(t, "check", p.Check(ctx), errcode.AdapterUnavailable, s.Password)
		_, err := p.Provision(ctx, slots.ProvisionRequest{AppID: "app_01JY", AppSlug: "y", Key: "db"})
		wantCode(t, "provision", err, errcode.AdapterUnavailable, s.Password)
	})
	t.Run("closed adapter", func(t *testing.T) {
		p := newAdapter(t, configFor(s))
		_ = p.Close()
		wantCode(t, "check", p.Check(ctx), errcode.AdapterUnavailable)
	})
}

func TestConcurrentProvisionsOfOneSlot(t *testing.T) {
	s := pgtest.Start(t)
	ctx := ctxT(t)
	req := slots.ProvisionRequest{AppID: "app_01JRACE", AppSlug: "race", Key: "db"}
	// Two servers of a cluster, each with its own adapter instance.
	var wg sync.WaitGroup
	outs := make([]slots.Provisioned, 4)
	errs := make([]error, 4)
	for i := range outs {
		p := newAdapter(t, configFor(s))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = p.Provision(ctx, req)
		}()
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil || outs[i].Fields["database"] != "svc_race_db" {
			t.Errorf("provision %d: %v, %v", i, outs[i].Fields, errs[i])
		}
	}
}

func TestDeprovision(t *testing.T) {
	s := pgtest.Start(t)
	ctx := ctxT(t)
	p := newAdapter(t, configFor(s))
	req := slots.ProvisionRequest{AppID: "app_01JGONE", AppSlug: "gone", Key: "db"}
	out, err := p.Provision(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's slot cannot deprovision it.
	err = p.Deprovision(ctx, slots.ProvisionRequest{AppID: "app_01JOTHER", AppSlug: "gone", Key: "db"}, out.Fields)
	wantCode(t, "deprovision as another slot", err, errcode.AdapterFailed)
	if err := p.Deprovision(ctx, req, out.Fields); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := superuser(t, s).QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_roles WHERE rolname = 'svc_gone_db') + (SELECT count(*) FROM pg_database WHERE datname = 'svc_gone_db')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("left %d, %v", n, err)
	}
	if err := p.Deprovision(ctx, req, out.Fields); err != nil {
		t.Fatalf("deprovision again: %v", err)
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("a", 40)
	tests := []struct {
		slug, key string
		first     string
		count     int
	}{
		{"my-shop", "db", "svc_my_shop_db", 2},
		{"x", "Main-DB", "svc_x_main_db", 2},
		{"a--b", "c__d", "svc_a_b_c_d", 2},
		{long, long, "svc_" + strings.Repeat("a", 40) + "_" + strings.Repeat("a", 9) + "_", 1}, // cut, then the hash
	}
	for _, tt := range tests {
		got := names(slots.ProvisionRequest{AppID: "app_1", AppSlug: tt.slug, Key: tt.key})
		if len(got) != tt.count || !strings.HasPrefix(got[0], tt.first) {
			t.Errorf("names(%s, %s) = %v, want %s first (%d names)", tt.slug, tt.key, got, tt.first, tt.count)
		}
		for _, n := range got {
			if len(n) > maxIdentifier || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
				t.Errorf("name %q is not a plain identifier of at most %d bytes", n, maxIdentifier)
			}
		}
	}
	a := names(slots.ProvisionRequest{AppID: "app_1", AppSlug: "a", Key: "b"})
	b := names(slots.ProvisionRequest{AppID: "app_2", AppSlug: "a", Key: "b"})
	if a[0] != b[0] || a[1] == b[1] {
		t.Errorf("suffixes do not tell apps apart: %v %v", a, b)
	}
}

func TestKindValidatesSettings(t *testing.T) {
	k := Kind()
	if k.Category != adapters.CategorySlots || k.Name != "postgres" {
		t.Fatalf("kind = %s/%s", k.Category, k.Name)
	}
	ok := map[string]string{"host": "db.internal", "port": "5432", "database": "postgres", "username": "svc_admin", "sslmode": "prefer"}
	if err := k.Validate(ok, []string{"password"}); err != nil {
		t.Fatalf("valid settings refused: %v", err)
	}
	for name, bad := range map[string]string{"port": "http", "sslmode": "sometimes", "host": "a/b", "app_host": "x y"} {
		s := map[string]string{}
		for k, v := range ok {
			s[k] = v
		}
		s[name] = bad
		if err := k.Validate(s, []string{"password"}); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("%s=%q: %v", name, bad, err)
		}
	}
	inst, err := k.Open(context.Background(), adapters.Config{ID: "adp_pg", Settings: ok, Credentials: map[string]string{"password": "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.(*Postgres).Close()
	if _, isProvisioner := inst.(slots.Provisioner); !isProvisioner {
		t.Error("the instance is not a slots.Provisioner")
	}
	if caps := inst.Capabilities(); caps["connected"] != false || caps["server_version"] != nil {
		t.Errorf("capabilities before connecting = %v", caps)
	}
}

func BenchmarkProvision(b *testing.B) {
	s := pgtest.Start(b)
	p := newAdapter(b, configFor(s))
	ctx := context.Background()
	b.Run("new", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := p.Provision(ctx, slots.ProvisionRequest{AppID: fmt.Sprintf("app_%d", i), AppSlug: fmt.Sprintf("bench-%d", i), Key: "db"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("again", func(b *testing.B) {
		req := slots.ProvisionRequest{AppID: "app_again", AppSlug: "again", Key: "db"}
		for b.Loop() {
			if _, err := p.Provision(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
