// Package notifytest holds what the notification adapters' tests share: a
// test CA that signs certificates for 127.0.0.1, PEM files of it, events
// rendered as the dispatcher renders them, and the assertion that an error
// carries no secret. Tests only; production code never imports it.
package notifytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/notify"
)

// CA is a certificate authority made for one test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA's certificate as a PEM file, for an adapter's ca_file.
	File string
}

// NewCA makes a CA and writes its certificate to a PEM file in a
// temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, File: file}
}

// ServerTLS returns a server configuration whose certificate, signed by
// the CA, is valid for 127.0.0.1, ::1 and localhost.
func (ca *CA) ServerTLS(t testing.TB) *tls.Config {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ConsoleURL is the external URL messages link to.
const ConsoleURL = "https://svc.example.com"

// DeployFailed is a deploy.failed event of app "shop", rendered.
func DeployFailed() notify.Message {
	return notify.Render(&events.Event{ID: "evt_01", Type: "deploy.failed", OccurredAt: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		App:   &events.AppRef{ID: "app_01", Name: "shop", Slug: "shop"},
		Actor: events.Actor{Kind: "system"},
		Data: map[string]any{"deployment_id": "dep_01", "spec_id": "spc_01", "trigger": "push",
			"error_code": "BUILD_FAILED", "message": "npm ci exited with status 1"}}, ConsoleURL)
}

// Rendered renders an event of type typ with data for an app named
// appName (empty: an install event).
func Rendered(typ, appName string, data map[string]any) notify.Message {
	ev := &events.Event{ID: "evt_02", Type: typ, OccurredAt: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		Actor: events.Actor{Kind: "user"}, Data: data}
	if appName != "" {
		ev.App = &events.AppRef{ID: "app_02", Name: appName, Slug: "app-02"}
	}
	return notify.Render(ev, ConsoleURL)
}

// NoSecret fails the test unless err is an *errcode.Error of code whose
// text (message, remedy, details and cause) contains none of secrets.
func NoSecret(t testing.TB, err error, code errcode.Code, secrets ...string) {
	t.Helper()
	e, ok := errcode.As(err)
	if !ok {
		t.Fatalf("error %v (%T) has no code", err, err)
	}
	if e.Code != code {
		t.Errorf("error %q has code %s, want %s", err, e.Code, code)
	}
	text := err.Error() + " " + e.Remedy
	for k, v := range e.Details {
		text += " " + k + "=" + strings.TrimSpace(anyString(v))
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("error %q (remedy %q, details %v) contains the secret %q", err, e.Remedy, e.Details, s)
		}
	}
}

// Validated checks a Validate answer: accepted when field is empty, else
// a refusal (VALID_INVALID) naming field in details.
func Validated(t testing.TB, err error, field string, what string) {
	t.Helper()
	e, _ := errcode.As(err)
	switch {
	case field == "" && err != nil:
		t.Errorf("Validate(%s) = %v; want it accepted", what, err)
	case field != "" && (e == nil || e.Code != errcode.ValidInvalid || e.Details["field"] != field):
		t.Errorf("Validate(%s) = %v; want a refusal of %s", what, err, field)
	}
}

func anyString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
