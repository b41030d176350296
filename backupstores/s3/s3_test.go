package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/backuprepo/storagetest"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/s3test"
)

var buckets atomic.Int64

// newBucket makes a fresh bucket on srv.
func newBucket(t testing.TB, srv *s3test.Server) string {
	name := fmt.Sprintf("svc-test-%d", buckets.Add(1))
	srv.Bucket(t, name)
	return name
}

// settings for a bucket on srv, with extra settings.
func settings(srv *s3test.Server, bucket string, extra ...string) map[string]string {
	s := map[string]string{"endpoint": srv.Endpoint, "bucket": bucket}
	if strings.HasPrefix(srv.Endpoint, "http:") {
		s["insecure_http"] = "true"
	}
	if srv.CAFile != "" {
		s["ca_file"] = srv.CAFile
	}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i]] = extra[i+1]
	}
	return s
}

// open opens the adapter through its kind, as the adapters service does.
func open(t testing.TB, settings map[string]string, id, secret string) *S3 {
	t.Helper()
	k := Kind()
	for _, st := range k.Settings {
		if _, ok := settings[st.Name]; !ok && st.Default != "" && !st.Credential {
			settings[st.Name] = st.Default
		}
	}
	if err := k.Validate(settings, []string{"access_key_id", "secret_access_key"}); err != nil {
		t.Fatalf("Validate(%v): %v", settings, err)
	}
	inst, err := k.Open(context.Background(), adapters.Config{ID: "adp_s3", Settings: settings,
		Credentials: map[string]string{"access_key_id": id, "secret_access_key": secret}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s := inst.(*S3)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	storagetest.Run(t, func(t *testing.T) backuprepo.Storage {
		return open(t, settings(srv, newBucket(t, srv)), srv.AccessKey, srv.SecretKey)
	})
}

// TestContractUnderAPrefix: with a prefix, the adapter sees only its own
// objects, and writes none outside the prefix.
func TestContractUnderAPrefix(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	bucket := newBucket(t, srv)
	var n atomic.Int64
	storagetest.Run(t, func(t *testing.T) backuprepo.Storage {
		return open(t, settings(srv, bucket, "prefix", fmt.Sprintf("svc/run-%d", n.Add(1))), srv.AccessKey, srv.SecretKey)
	})
	entries, err := os.ReadDir(filepath.Join(srv.Root, bucket))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "svc" && !strings.HasPrefix(e.Name(), ".sgw") { // versitygw's own
			t.Errorf("the bucket holds %s, outside the prefix svc/", e.Name())
		}
	}
}

func TestPrefixSeparatesStorages(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	bucket := newBucket(t, srv)
	ctx := context.Background()
	a := open(t, settings(srv, bucket, "prefix", "team-a/"), srv.AccessKey, srv.SecretKey)
	b := open(t, settings(srv, bucket, "prefix", "team-a-more"), srv.AccessKey, srv.SecretKey)
	root := open(t, settings(srv, bucket), srv.AccessKey, srv.SecretKey)
	if err := a.Put(ctx, "k", strings.NewReader("a"), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "k", strings.NewReader("bb"), 2); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    *S3
		want []backuprepo.Object
	}{
		{a, []backuprepo.Object{{Key: "k", Size: 1}}},
		{b, []backuprepo.Object{{Key: "k", Size: 2}}},
		// From the bucket's root, both are keys.
		{root, []backuprepo.Object{{Key: "team-a-more/k", Size: 2}, {Key: "team-a/k", Size: 1}}},
	} {
		got, err := c.s.List(ctx, "")
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("List under %q = %v, %v; want %v", c.s.cfg.prefix, got, err, c.want)
		}
	}
	// Objects under the prefix whose names are not keys are not listed.
	if err := os.WriteFile(filepath.Join(srv.Root, bucket, "team-a", "Not-A-Key"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := a.List(ctx, ""); err != nil || len(got) != 1 {
		t.Errorf("List = %v, %v; want only k", got, err)
	}
}

func TestCheck(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	bucket := newBucket(t, srv)
	ctx := context.Background()
	if err := open(t, settings(srv, bucket), srv.AccessKey, srv.SecretKey).Check(ctx); err != nil {
		t.Errorf("Check of a reachable bucket: %v", err)
	}
	s := open(t, settings(srv, "no-such-bucket"), srv.AccessKey, srv.SecretKey)
	err := s.Check(ctx)
	noSecret(t, err, errcode.AdapterFailed, srv.AccessKey, srv.SecretKey)
	if e, _ := errcode.As(err); e == nil || !strings.Contains(e.Message, "bucket does not exist") || !strings.Contains(e.Remedy, "create the bucket no-such-bucket") {
		t.Errorf("Check of a missing bucket: %v; want it to say the bucket does not exist, and to create it", err)
	}
	// Every operation on a missing bucket says so.
	err = s.Put(ctx, "k", strings.NewReader("x"), 1)
	if e, _ := errcode.As(err); e == nil || e.Code != errcode.AdapterFailed || !strings.Contains(e.Message, "bucket does not exist") {
		t.Errorf("Put into a missing bucket: %v", err)
	}
	if _, err := s.List(ctx, ""); !errcode.Has(err, errcode.AdapterFailed) {
		t.Errorf("List of a missing bucket: %v; want ADAPTER_FAILED", err)
	}
}

const canary = "CANARY-do-not-leak-7f3k2"

// TestWrongCredentialsNeverLeak: a wrong secret or key ID is
// ADAPTER_FAILED, and no error of any operation carries either (the
// canary is in both).
func TestWrongCredentialsNeverLeak(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	bucket := newBucket(t, srv)
	ctx := context.Background()
	for _, c := range []struct{ name, id, secret string }{
		{"wrong secret", srv.AccessKey, srv.SecretKey + canary},
		{"unknown key ID", "AK" + canary, srv.SecretKey + canary},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, settings(srv, bucket), c.id, c.secret)
			secrets := []string{canary, c.secret}
			if c.id != srv.AccessKey {
				secrets = append(secrets, c.id)
			}
			noSecret(t, s.Check(ctx), errcode.AdapterFailed, secrets...)
			noSecret(t, s.Put(ctx, "k", strings.NewReader("x"), 1), errcode.AdapterFailed, secrets...)
			noSecret(t, s.Put(ctx, "big", bytes.NewReader(make([]byte, 17<<20)), 17<<20), errcode.AdapterFailed, secrets...)
			_, err := s.Get(ctx, "k")
			noSecret(t, err, errcode.AdapterFailed, secrets...)
			_, err = s.List(ctx, "")
			noSecret(t, err, errcode.AdapterFailed, secrets...)
			noSecret(t, s.Delete(ctx, "k"), errcode.AdapterFailed, secrets...)
			if e, _ := errcode.As(s.Check(ctx)); e == nil || !strings.Contains(e.Message, "refused the credentials") || !strings.Contains(e.Remedy, "access_key_id") {
				t.Errorf("Check with %s: %v; want it to say the credentials were refused", c.name, e)
			}
			if fmt.Sprint(s.Capabilities()) == "" || strings.Contains(fmt.Sprint(s.Capabilities()), canary) {
				t.Errorf("capabilities %v", s.Capabilities())
			}
		})
	}
}

// noSecret checks that err has the code and that none of its texts (its
// message, remedy, details, and the whole chain) carries a secret.
func noSecret(t *testing.T, err error, code errcode.Code, secrets ...string) {
	t.Helper()
	if !errcode.Has(err, code) {
		t.Errorf("err = %v; want %s", err, code)
	}
	if err == nil {
		return
	}
	texts := []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), errcode.MessageOf(err)}
	if e, ok := errcode.As(err); ok {
		texts = append(texts, e.Remedy, fmt.Sprint(e.Details))
	}
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
		texts = append(texts, u.Error())
	}
	for _, text := range texts {
		for _, sec := range secrets {
			if strings.Contains(text, sec) {
				t.Errorf("an error carries a credential: %q", text)
			}
		}
	}
}

// TestServerDown: a storage that does not answer is ADAPTER_UNAVAILABLE,
// for every operation and for Check. (The client retries before it gives
// up: the operations run at once.)
func TestServerDown(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	bucket := newBucket(t, srv)
	s := open(t, settings(srv, bucket), srv.AccessKey, srv.SecretKey)
	ctx := context.Background()
	if err := s.Put(ctx, "kept", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	ops := map[string]func() error{
		"Check":  func() error { return s.Check(ctx) },
		"Put":    func() error { return s.Put(ctx, "k", strings.NewReader("x"), 1) },
		"Get":    func() error { _, err := s.Get(ctx, "kept"); return err },
		"List":   func() error { _, err := s.List(ctx, ""); return err },
		"Delete": func() error { return s.Delete(ctx, "kept") },
	}
	errs := make(map[string]error, len(ops))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, op := range ops {
		wg.Go(func() {
			err := op()
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, err := range errs {
		noSecret(t, err, errcode.AdapterUnavailable, srv.AccessKey, srv.SecretKey)
		if e, _ := errcode.As(err); e == nil || !strings.Contains(e.Message, "connection refused") || e.Remedy == "" {
			t.Errorf("%s with the server down: %v; want connection refused, with a remedy", name, err)
		}
	}
}

// TestTLS: an https endpoint is trusted through ca_file, and refused with
// a remedy without it.
func TestTLS(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{TLS: true})
	bucket := newBucket(t, srv)
	ctx := context.Background()
	s := open(t, settings(srv, bucket), srv.AccessKey, srv.SecretKey)
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check over TLS with ca_file: %v", err)
	}
	if err := s.Put(ctx, "over/tls", strings.NewReader("hello"), 5); err != nil {
		t.Fatalf("Put over TLS: %v", err)
	}
	rc, err := s.Get(ctx, "over/tls")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "hello" {
		t.Errorf("Get over TLS = %q", b)
	}
	untrusting := open(t, map[string]string{"endpoint": srv.Endpoint, "bucket": bucket}, srv.AccessKey, srv.SecretKey)
	err = untrusting.Check(ctx)
	noSecret(t, err, errcode.AdapterFailed, srv.SecretKey)
	if e, _ := errcode.As(err); e == nil || !strings.Contains(e.Message, "unknown authority") || !strings.Contains(e.Remedy, "ca_file") {
		t.Errorf("Check without ca_file: %v; want an untrusted certificate, with ca_file as remedy", err)
	}
	// Plain http to the https port.
	plain := open(t, settings(srv, bucket, "endpoint", strings.Replace(srv.Endpoint, "https:", "http:", 1), "insecure_http", "true", "ca_file", ""), srv.AccessKey, srv.SecretKey)
	noSecret(t, plain.Check(ctx), errcode.AdapterFailed, srv.SecretKey)
}

func TestValidate(t *testing.T) {
	k := Kind()
	ok := map[string]string{"endpoint": "https://s3.example.com", "bucket": "acme-backups", "insecure_http": "false"}
	with := func(kv ...string) map[string]string {
		s := map[string]string{}
		for k, v := range ok {
			s[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			s[kv[i]] = kv[i+1]
		}
		return s
	}
	for _, s := range []map[string]string{
		ok,
		with("endpoint", "https://s3.eu-west-1.amazonaws.com/"),
		with("endpoint", "http://127.0.0.1:9000", "insecure_http", "true"),
		with("endpoint", "http://localhost:9000", "insecure_http", "true"),
		with("endpoint", "http://[::1]:9000", "insecure_http", "true"),
		with("prefix", "svc/prod/"),
		with("prefix", "Team_A/svc.1"),
		with("region", "eu-west-1"),
	} {
		if err := k.Validate(s, nil); err != nil {
			t.Errorf("Validate(%v): %v", s, err)
		}
	}
	for field, s := range map[string]map[string]string{
		"config.endpoint":               with("endpoint", ""),
		"config.endpoint ftp":           with("endpoint", "ftp://s3.example.com"),
		"config.endpoint path":          with("endpoint", "https://s3.example.com/bucket"),
		"config.endpoint user":          with("endpoint", "https://AKIA:secret@s3.example.com"),
		"config.endpoint q":             with("endpoint", "https://s3.example.com?X-Amz-Signature=abc"),
		"config.endpoint http":          with("endpoint", "http://s3.example.com"),
		"config.insecure_http":          with("endpoint", "http://s3.example.com", "insecure_http", "true"),
		"config.insecure_http 10.0.0.1": with("endpoint", "http://10.0.0.1:9000", "insecure_http", "true"),
		"config.insecure_http https":    with("insecure_http", "true"),
		"config.insecure_http yes":      with("insecure_http", "maybe"),
		"config.bucket":                 with("bucket", ""),
		"config.bucket upper":           with("bucket", "Acme"),
		"config.bucket short":           with("bucket", "ab"),
		"config.prefix":                 with("prefix", "/abs"),
		"config.prefix dots":            with("prefix", "a/../b"),
		"config.prefix space":           with("prefix", "a b"),
		"config.prefix double":          with("prefix", "a//b"),
		"config.region":                 with("region", "EU West"),
	} {
		err := k.Validate(s, nil)
		want, _, _ := strings.Cut(field, " ")
		if e, ok := errcode.As(err); !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != want {
			t.Errorf("Validate(%v) = %v; want VALID_INVALID on %s", s, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") && !strings.Contains(field, "user") {
			t.Errorf("%v", err)
		}
	}
	if e, _ := errcode.As(k.Validate(with("endpoint", "https://AKIA:hunter22@s3.example.com"), nil)); e != nil && strings.Contains(e.Error(), "hunter22") {
		t.Errorf("a refused endpoint's error carries its password: %v", e)
	}
	// Credentials are required, and declared as credentials.
	for _, name := range []string{"access_key_id", "secret_access_key"} {
		found := false
		for _, st := range k.Settings {
			if st.Name == name {
				found = st.Credential && st.Required
			}
		}
		if !found {
			t.Errorf("%s is not a required credential", name)
		}
	}
	if _, err := New(ok, "", "x"); !errcode.Has(err, errcode.ValidInvalid) {
		t.Errorf("New without an access key ID: %v", err)
	}
	if _, err := New(with("ca_file", "/nonexistent/ca.pem"), "a", "b"); !errcode.Has(err, errcode.ValidInvalid) {
		t.Errorf("New with a missing ca_file: %v", err)
	}
}

// TestFailedMultipartUploadIsAborted: a large Put that fails leaves no
// incomplete multipart upload holding the parts sent.
func TestFailedMultipartUploadIsAborted(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	s := open(t, settings(srv, newBucket(t, srv)), srv.AccessKey, srv.SecretKey)
	ctx := context.Background()
	incomplete := func() []string {
		var uploads []string
		for u := range s.client.ListIncompleteUploads(ctx, s.cfg.bucket, "", true) {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			uploads = append(uploads, u.Key)
		}
		return uploads
	}
	// The listing sees an upload left incomplete.
	core := &minio.Core{Client: s.client}
	id, err := core.NewMultipartUpload(ctx, s.cfg.bucket, "left/open", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := incomplete(); len(got) != 1 || got[0] != "left/open" {
		t.Fatalf("incomplete uploads %v; want left/open", got)
	}
	if err := core.AbortMultipartUpload(ctx, s.cfg.bucket, "left/open", id); err != nil {
		t.Fatal(err)
	}

	errSource := errors.New("source failed")
	r := io.MultiReader(bytes.NewReader(make([]byte, 20<<20)), iotestErr{errSource})
	if err := s.Put(ctx, "big/object", r, 40<<20); !errors.Is(err, errSource) {
		t.Fatalf("Put: %v; want the source's error", err)
	}
	if uploads := incomplete(); len(uploads) > 0 {
		t.Errorf("incomplete uploads left: %v", uploads)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

// BenchmarkStorageS3: put and get of a 64 MiB object through a real
// versitygw on loopback (its posix backend in the temporary directory),
// over http (the client signs every chunk of the payload) and https (it
// signs the headers; TLS protects the payload).
func BenchmarkStorageS3(b *testing.B) {
	for _, c := range []struct {
		name string
		opts s3test.Options
	}{{"http", s3test.Options{}}, {"https", s3test.Options{TLS: true}}} {
		b.Run(c.name, func(b *testing.B) {
			srv := s3test.Start(b, c.opts)
			storagetest.Bench(b, open(b, settings(srv, newBucket(b, srv)), srv.AccessKey, srv.SecretKey))
		})
	}
}
