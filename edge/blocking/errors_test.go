package blocking

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

var testVendor = &Vendor{
	Name: "acme", Address: "http://acme:1",
	DeniedWhy: "why-denied", DeniedRemedy: "fix-denied",
	NotFoundRemedy: "fix-404", RefusedRemedy: "fix-4xx", FailedRemedy: "fix-5xx",
}

func TestStatusError(t *testing.T) {
	for _, tc := range []struct {
		status      int
		msg, remedy string
	}{
		{401, "acme refused reading x (HTTP 401): why-denied", "fix-denied"},
		{403, "acme refused reading x (HTTP 403): why-denied", "fix-denied"},
		{404, "acme at http://acme:1 has no such endpoint for reading x (HTTP 404)", "fix-404"},
		{429, "acme refused reading x: rate limited (HTTP 429)", "raise acme's request rate limits"},
		{400, "acme refused reading x (HTTP 400)", "fix-4xx"},
		{500, "acme failed reading x (HTTP 500)", "fix-5xx"},
		{302, "acme answered reading x with HTTP 302", "acme's HTTP API"},
	} {
		err := testVendor.StatusError("reading x", tc.status)
		if !errcode.Has(err, errcode.AdapterFailed) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Remedy, tc.remedy) {
			t.Errorf("StatusError(%d) = %v (remedy %q), want %q (remedy %q)", tc.status, err, err.Remedy, tc.msg, tc.remedy)
		}
		if !strings.Contains(errors.Unwrap(err).Error(), "acme answered reading x with HTTP") {
			t.Errorf("StatusError(%d) wraps %v", tc.status, errors.Unwrap(err))
		}
	}
}

func TestTransportError(t *testing.T) {
	ue := func(err error) error { return &url.Error{Op: "Get", URL: "http://acme:1", Err: err} }
	for _, tc := range []struct {
		err  error
		code errcode.Code
		msg  string
	}{
		{context.Canceled, errcode.AdapterUnavailable, "reading x was cancelled before acme answered"},
		{ue(context.DeadlineExceeded), errcode.AdapterUnavailable, "did not answer in time"},
		{ue(&net.DNSError{Err: "no such host", Name: "acme"}), errcode.AdapterUnavailable, "does not resolve"},
		{ue(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), errcode.AdapterUnavailable, "connection refused"},
		{ue(errors.New("reset")), errcode.AdapterUnavailable, "acme at http://acme:1 is not reachable (while reading x)"},
		{errors.New("odd"), errcode.AdapterFailed, "acme's answer to reading x could not be used"},
	} {
		err := testVendor.TransportError("reading x", tc.err)
		if !errcode.Has(err, tc.code) || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, tc.err) {
			t.Errorf("TransportError(%v) = %v, want %s %q", tc.err, err, tc.code, tc.msg)
		}
	}
}
