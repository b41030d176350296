package netfail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// TestExplainByType: real failures of each kind, as an HTTP client meets
// them, are told apart by type; the message names who, never the URL.
func TestExplainByType(t *testing.T) {
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes of clients that do not trust it
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(http.NotFoundHandler())
	defer plainSrv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()

	get := func(u string) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name string
		err  error
		code errcode.Code
		says string
	}{
		{"refused", get("http://" + closed + "/secret-path"), errcode.AdapterUnavailable, "x is not reachable: connection refused"},
		{"untrusted certificate", get(tlsSrv.URL + "/secret-path"), errcode.AdapterFailed, "x presented a certificate this server does not trust: it is signed by an unknown authority"},
		{"not TLS", dialTLS(strings.TrimPrefix(plainSrv.URL, "http://")), errcode.AdapterFailed, "x does not speak TLS on that port"},
		{"deadline", &url.Error{Op: "Get", URL: "https://h/secret-path", Err: context.DeadlineExceeded}, errcode.AdapterUnavailable, "x did not answer in time"},
		{"cancelled", cancelled.Err(), errcode.AdapterUnavailable, "x: cancelled before it answered"},
	} {
		e, ok := Explain("x", tt.err, "secret-path")
		if !ok || e.Code != tt.code || e.Message != tt.says || e.Remedy == "" {
			t.Errorf("%s: Explain(%v) = %v, %t; want %s %q with a remedy", tt.name, tt.err, e, ok, tt.code, tt.says)
			continue
		}
		if s := fmt.Sprintf("%v %#v", e, e); strings.Contains(s, "secret-path") {
			t.Errorf("%s: the error shows the secret: %s", tt.name, s)
		}
		if !errors.Is(e, Unwrap(tt.err)) {
			t.Errorf("%s: the cause is lost", tt.name)
		}
	}
	if e, ok := Explain("x", errors.New("something else")); ok {
		t.Errorf("an unknown failure was explained as %v", e)
	}
}

// dialTLS makes a TLS handshake with addr.
func dialTLS(addr string) error {
	c, err := tls.Dial("tcp", addr, &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "localhost"})
	if err == nil {
		c.Close()
	}
	return err
}
