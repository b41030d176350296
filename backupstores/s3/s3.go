// Package s3 is the backup storage adapter that keeps a backup
// repository's objects in a bucket of S3-compatible object storage (Amazon
// S3, Cloudflare R2, Backblaze B2, MinIO, Garage, versitygw, …), through
// the MinIO Go client (github.com/minio/minio-go/v7), under a key prefix.
//
// Put sends the object with its size: up to 16 MiB as one PUT, larger as
// a multipart upload of 16 MiB parts read one at a time (so memory stays
// at one part), which the server assembles only when it is complete. An
// object is therefore whole or absent; a failed multipart upload is
// aborted. The reader is wrapped so that it yields exactly the size given,
// failing before its last byte otherwise.
//
// Errors are translated by type: the server unreachable, timing out or
// answering 5xx is ADAPTER_UNAVAILABLE; a refusal (credentials, access,
// missing bucket, TLS) is ADAPTER_FAILED, each with a remedy; an absent
// object is NOT_FOUND. No error carries the access key, the secret or a
// signed URL: messages are built from the server's error code and the
// host, and causes have the credentials removed. Plain http is refused
// unless insecure_http is set, and then only for a server on this machine.
//
// This package must not touch the store, HTTP routing or another adapter;
// it is the only package that imports the S3 client.
package s3

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/svchost/svc/backupstores/internal/objects"
	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/backuprepo"
	"github.com/svchost/svc/internal/cacert"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/netfail"
)

// Interface guards.
var (
	_ adapters.Instance  = (*S3)(nil)
	_ backuprepo.Storage = (*S3)(nil)
	_ io.Closer          = (*S3)(nil)
)

// Kind declares the S3 backup storage.
func Kind() adapters.Kind {
	return adapters.Kind{
		Category: adapters.CategoryBackup,
		Name:     "s3",
		Description: "Keeps backups in a bucket of S3-compatible object storage (Amazon S3, R2, B2, MinIO, Garage, …), " +
			"under a key prefix; every object written whole or not at all",
		Settings: []adapters.Setting{
			{Name: "endpoint", Description: "URL of the S3 API, https (http only with insecure_http, for a server on this machine)",
				Required: true, Example: "https://s3.eu-west-1.amazonaws.com"},
			{Name: "bucket", Description: "Bucket the backups are kept in; it must exist", Required: true, Example: "acme-svc-backups"},
			{Name: "prefix", Description: "Key prefix inside the bucket (segments of letters, digits, '.', '_' and '-', separated by '/'); empty for the bucket's root",
				Example: "svc/prod/"},
			{Name: "region", Description: "Region of the bucket; empty to ask the server (which needs s3:GetBucketLocation)", Example: "eu-west-1"},
			{Name: "ca_file", Description: "PEM file of the CA that signed a self-hosted server's certificate; empty for the system's roots", Example: "/etc/svc/s3-ca.pem"},
			{Name: "insecure_http", Description: "true to allow an http endpoint, which is refused unless it is on this machine (localhost or a loopback address): over http, requests and backups would cross the network unprotected",
				Default: "false"},
			{Name: "access_key_id", Description: "Access key ID of the user svc signs requests as", Credential: true, Required: true},
			{Name: "secret_access_key", Description: "Secret access key of that user", Credential: true, Required: true},
		},
		Validate: func(settings map[string]string, _ []string) error {
			_, err := configOf(settings)
			return err
		},
		Open: func(_ context.Context, c adapters.Config) (adapters.Instance, error) {
			return New(c.Settings, c.Credentials["access_key_id"], c.Credentials["secret_access_key"])
		},
	}
}

// config is a checked configuration.
type config struct {
	endpoint *url.URL // scheme and host only
	bucket   string
	prefix   string // empty or ending in "/"
	region   string
	caFile   string
}

var (
	prefixSegment = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	regionSyntax  = regexp.MustCompile(`^[a-z0-9-]{0,40}$`)
)

// configOf checks the settings.
func configOf(settings map[string]string) (config, error) {
	insecure, err := strconv.ParseBool(cmpOr(settings["insecure_http"], "false"))
	if err != nil {
		return config{}, errcode.Invalid("config.insecure_http", "insecure_http must be true or false")
	}
	u, err := url.Parse(settings["endpoint"])
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" || u.Opaque != "":
		return config{}, errcode.Invalid("config.endpoint", "endpoint must be the http or https URL of the S3 API, such as https://s3.eu-west-1.amazonaws.com")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return config{}, errcode.Invalid("config.endpoint", "endpoint must be a plain URL of the S3 API: no user, path, query or fragment").
			WithRemedy("give the bucket as bucket, the key prefix as prefix and the keys as credentials")
	case u.Scheme == "http" && !insecure:
		return config{}, errcode.Invalid("config.endpoint", "endpoint must be https: over http, requests and backups would cross the network unprotected").
			WithRemedy("use the server's https address; for a server on this machine, set insecure_http to true")
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return config{}, errcode.Invalid("config.insecure_http", "insecure_http is allowed only for a server on this machine (localhost or a loopback address), not %s", u.Hostname()).
			WithRemedy("use the server's https address (with ca_file for a private CA)")
	case u.Scheme == "https" && insecure:
		return config{}, errcode.Invalid("config.insecure_http", "insecure_http is for an http endpoint; this endpoint is https").
			WithRemedy("leave insecure_http false")
	}
	c := config{endpoint: &url.URL{Scheme: u.Scheme, Host: u.Host}, bucket: settings["bucket"], region: settings["region"], caFile: settings["ca_file"]}
	if err := s3utils.CheckValidBucketNameStrict(c.bucket); err != nil {
		return config{}, errcode.Invalid("config.bucket", "bucket must be a bucket's name: 3 to 63 lowercase letters, digits, '.' and '-', such as acme-svc-backups")
	}
	if !regionSyntax.MatchString(c.region) {
		return config{}, errcode.Invalid("config.region", "region must be a region's name, such as eu-west-1, or empty")
	}
	if p := strings.TrimSuffix(settings["prefix"], "/"); p != "" {
		for seg := range strings.SplitSeq(p, "/") {
			if !prefixSegment.MatchString(seg) || seg == "." || seg == ".." {
				return config{}, errcode.Invalid("config.prefix", "prefix must be segments of letters, digits, '.', '_' and '-' separated by '/', such as svc/prod/")
			}
		}
		c.prefix = p + "/"
	}
	return c, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// isLoopback reports whether host is this machine without asking DNS.
func isLoopback(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// S3 keeps objects in one bucket under a prefix. It is safe for
// concurrent use.
type S3 struct {
	cfg       config
	client    *minio.Client
	transport *http.Transport
	who       string
	secrets   []string // never in an error
}

// New makes the adapter from its settings and credentials. It does not
// contact the server (Check does).
func New(settings map[string]string, accessKeyID, secretAccessKey string) (*S3, error) {
	cfg, err := configOf(settings)
	if err != nil {
		return nil, err
	}
	if accessKeyID == "" || secretAccessKey == "" {
		return nil, errcode.Invalid("credentials", "access_key_id and secret_access_key are both required")
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.caFile != "" {
		pool, err := cacert.Pool(cfg.caFile)
		if err != nil {
			return nil, errcode.New(errcode.ValidInvalid, "ca_file: %v", err).WithDetail("field", "config.ca_file").
				WithRemedy("ca_file must name a PEM file of CA certificates readable by svc on every server")
		}
		tlsConf.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // as every adapter: the health check takes the path requests take
	tr.TLSClientConfig = tlsConf
	tr.MaxIdleConnsPerHost = 16
	client, err := minio.New(cfg.endpoint.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(accessKeyID, secretAccessKey, ""),
		Secure:    cfg.endpoint.Scheme == "https",
		Transport: tr,
		Region:    cfg.region,
	})
	if err != nil {
		return nil, errcode.Invalid("config.endpoint", "endpoint %s cannot be used: %s", cfg.endpoint.Host,
			netfail.Redact(err.Error(), accessKeyID, secretAccessKey))
	}
	return &S3{cfg: cfg, client: client, transport: tr,
		who:     fmt.Sprintf("S3 storage at %s (bucket %s)", cfg.endpoint.Host, cfg.bucket),
		secrets: []string{secretAccessKey, accessKeyID}}, nil
}

// Close drops the idle connections.
func (s *S3) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// tracked remembers the error its reader returned, so that a Put that
// failed because of its reader says so rather than blaming the server.
type tracked struct {
	r   io.Reader
	err error
}

func (t *tracked) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// Put uploads the object with its size: whole or not at all.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := objects.ValidKey(key); err != nil {
		return err
	}
	if size < 0 {
		return errcode.Invalid("size", "an object's size is known: %d is not a size", size)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	body := &tracked{r: objects.Exact(ctx, r, size)}
	if size == 0 {
		// The client sends no body for an empty object and never reads
		// the reader: check here that it is empty.
		if _, err := io.Copy(io.Discard, body); err != nil {
			return fmt.Errorf("put %s: read the object: %w", key, err)
		}
	}
	_, err := s.client.PutObject(ctx, s.cfg.bucket, s.cfg.prefix+key, body, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
	})
	switch {
	case err == nil:
		return nil
	case body.err != nil:
		return fmt.Errorf("put %s: read the object: %w", key, body.err)
	case ctx.Err() != nil:
		return fmt.Errorf("put %s: %w", key, ctx.Err())
	}
	return s.explain("write "+key, err)
}

// Get opens the object; an absent one is NOT_FOUND. Reading it is bound
// to ctx.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := objects.ValidKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.cfg.bucket, s.cfg.prefix+key, minio.GetObjectOptions{})
	if err == nil {
		// The first request is made here, so that an absent object is
		// known before the caller reads.
		_, err = obj.Stat()
	}
	if err != nil {
		if obj != nil {
			_ = obj.Close()
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("get %s: %w", key, ctx.Err())
		}
		if code := minio.ToErrorResponse(err).Code; code == minio.NoSuchKey {
			return nil, errcode.New(errcode.NotFound, "backup storage holds no object %s", key)
		}
		return nil, s.explain("read "+key, err)
	}
	return &reader{obj: obj, s: s, key: key}, nil
}

// reader is an object being read, its failures translated.
type reader struct {
	obj *minio.Object
	s   *S3
	key string
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.obj.Read(p)
	if err != nil && err != io.EOF {
		err = r.s.explain("read "+r.key, err)
	}
	return n, err
}

func (r *reader) Close() error { return r.obj.Close() }

// List returns the objects whose keys start with prefix, by key (the
// client pages through the listing). Objects under the adapter's prefix
// whose names are not keys are not listed.
func (s *S3) List(ctx context.Context, prefix string) ([]backuprepo.Object, error) {
	if err := objects.ValidPrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the client's listing when this returns early
	out := []backuprepo.Object{}
	for obj := range s.client.ListObjectsIter(ctx, s.cfg.bucket, minio.ListObjectsOptions{Prefix: s.cfg.prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("list %s: %w", prefix, ctx.Err())
			}
			return nil, s.explain("list "+cmpOr(prefix, "the objects"), obj.Err)
		}
		key := strings.TrimPrefix(obj.Key, s.cfg.prefix)
		if objects.ValidKey(key) != nil || !strings.HasPrefix(key, prefix) {
			continue
		}
		out = append(out, backuprepo.Object{Key: key, Size: obj.Size})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b backuprepo.Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete removes the object; an absent one is no error.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := objects.ValidKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.cfg.bucket, s.cfg.prefix+key, minio.RemoveObjectOptions{})
	switch {
	case err == nil || minio.ToErrorResponse(err).Code == minio.NoSuchKey:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("delete %s: %w", key, ctx.Err())
	}
	return s.explain("delete "+key, err)
}

// Check says whether the bucket exists and the credentials may list the
// prefix: it lists one key under the prefix (rather than HeadBucket, which
// a policy that grants s3:ListBucket only under the prefix refuses).
func (s *S3) Check(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range s.client.ListObjectsIter(ctx, s.cfg.bucket, minio.ListObjectsOptions{Prefix: s.cfg.prefix, MaxKeys: 1, Recursive: true}) {
		if obj.Err != nil {
			return s.explain("list the objects under the prefix", obj.Err)
		}
		break
	}
	return ctx.Err()
}

func (s *S3) missingBucket() error {
	return errcode.New(errcode.AdapterFailed, "%s: the bucket does not exist", s.who).
		WithRemedy("create the bucket %s, or set bucket to an existing one", s.cfg.bucket)
}

// Capabilities of the adapter: where the objects go, never a credential.
func (s *S3) Capabilities() map[string]any {
	return map[string]any{"endpoint": s.cfg.endpoint.String(), "bucket": s.cfg.bucket, "prefix": s.cfg.prefix, "region": s.cfg.region}
}

// Error codes of S3 answers, by what they mean.
var (
	credentialCodes = []string{"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
		"TokenRefreshRequired", "AuthorizationHeaderMalformed", "InvalidSecurity", "MissingSecurityHeader",
		"XAdminUserNotFound"} // versitygw's answer to an unknown access key ID
	deniedCodes      = []string{"AccessDenied", "AllAccessDisabled", "AccountProblem"}
	unavailableCodes = []string{"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "RequestTimeTooSkewed", "XMinioServerNotInitialized"}
)

// explain translates a failure to what (write a key, list, …) into an
// error with a code: an S3 error answer by its code, a failure to talk to
// the server by its type (internal/netfail), never by message text. Its
// message names the storage and the S3 code; the cause is kept with the
// credentials removed and never as a *url.Error.
func (s *S3) explain(what string, err error) error {
	err = netfail.Unwrap(err)
	cause := netfail.Cause(err, s.secrets...)
	if resp, ok := errors.AsType[minio.ErrorResponse](err); ok && resp.Code != "" {
		code := resp.Code
		switch {
		case code == minio.NoSuchBucket:
			return s.missingBucket()
		case slices.Contains(credentialCodes, code):
			return errcode.Wrap(cause, errcode.AdapterFailed, "%s refused the credentials to %s (%s)", s.who, what, code).
				WithRemedy("check access_key_id and secret_access_key (set them again with POST /api/v1/adapters) and region")
		case slices.Contains(deniedCodes, code):
			return errcode.Wrap(cause, errcode.AdapterFailed, "%s denied the permission to %s (%s)", s.who, what, code).
				WithRemedy("grant the user the permissions docs/backup-storage.md lists, on the bucket and the prefix %q", s.cfg.prefix)
		case slices.Contains(unavailableCodes, code) || resp.StatusCode >= 500:
			return errcode.Wrap(cause, errcode.AdapterUnavailable, "%s could not %s: it answered %s (HTTP %d)", s.who, what, code, resp.StatusCode).
				WithRemedy("retry later; check the storage's status, and this server's clock when the code is RequestTimeTooSkewed")
		}
		return errcode.Wrap(cause, errcode.AdapterFailed, "%s refused to %s: %s (HTTP %d)", s.who, what, code, resp.StatusCode).
			WithRemedy("check the bucket's configuration and the user's permissions")
	}
	if e, ok := netfail.Explain(s.who, err, s.secrets...); ok {
		return e
	}
	return errcode.Wrap(cause, errcode.AdapterFailed, "%s could not %s: %s", s.who, what, urls.ReplaceAllString(cause.Error(), "(URL)")).
		WithRemedy("check the endpoint, the bucket and the storage's log")
}

// urls finds URLs in a message: a signed one would carry a signature and
// the access key ID.
var urls = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]*`)
