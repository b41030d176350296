package webhook

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		addr string
		kind string // "" is public; otherwise a word the kind contains
	}{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"140.82.121.4", ""},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.254", "private"},
		{"172.32.0.1", ""},
		{"192.168.1.1", "private"},
		{"100.64.0.1", "carrier NAT"},
		{"100.127.255.255", "carrier NAT"},
		{"100.128.0.1", ""},
		{"169.254.169.254", "metadata"},
		{"169.254.1.1", "link-local"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"192.0.0.170", "reserved"},
		{"198.18.0.1", "reserved"},
		{"192.0.2.1", "reserved"},
		{"::1", "loopback"},
		{"::", "unspecified"},
		{"fc00::1", "private"},
		{"fd00:ec2::254", "private"},
		{"fec0::1", "private"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"ff02::1", "multicast"},
		{"::ffff:127.0.0.1", "loopback address (IPv4-mapped)"},
		{"::ffff:10.1.1.1", "private address (IPv4-mapped)"},
		{"::ffff:169.254.169.254", "metadata"},
		{"::ffff:8.8.8.8", ""},
		{"::127.0.0.1", "loopback address (IPv4-compatible)"},
		{"::8.8.8.8", "reserved address (IPv4-compatible)"},
		{"64:ff9b::7f00:1", "loopback address (through NAT64)"},
		{"64:ff9b::a9fe:a9fe", "metadata"},
		{"64:ff9b::808:808", ""},
		{"64:ff9b:1::1", "reserved"},
		{"2002:7f00:1::", "loopback address (through 6to4)"},
		{"2002:c0a8:101::1", "private address (through 6to4)"},
		{"2002:808:808::1", ""},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback address (through Teredo)"}, // client 127.0.0.1
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ""},                                  // client 8.8.8.8
		{"2001:db8::1", "reserved"},
		{"100::1", "reserved"},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		got := classify(a)
		if (tt.kind == "") != (got == "") || !strings.Contains(got, tt.kind) {
			t.Errorf("classify(%s) = %q, want %q", tt.addr, got, tt.kind)
		}
	}
}

func TestParseLegacyIPv4(t *testing.T) {
	tests := []struct {
		host string
		want string // "" is not an address
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0177.0.0.01", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0x7f.0x0.0x0.0x1", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"0x", "0.0.0.0"},
		{"3232235777", "192.168.1.1"},
		{"2852039166", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"10.1", "10.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"256.0.0.1", ""},
		{"127.0.0.0.1", ""},
		{"1.2.3.256", ""},
		{"1.2.65536", ""},
		{"08.0.0.1", ""},
		{"0x7g", ""},
		{"1..1", ""},
		{"", ""},
		{"a.1", ""},
	}
	for _, tt := range tests {
		a, ok := parseLegacyIPv4(tt.host)
		if got := map[bool]string{true: a.String(), false: ""}[ok]; got != tt.want {
			t.Errorf("parseLegacyIPv4(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

// invalidField checks err is VALID_INVALID about field.
func invalidField(t *testing.T, err error, field string) *errcode.Error {
	t.Helper()
	e, ok := errcode.As(err)
	if !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != field {
		t.Errorf("%v: want VALID_INVALID with details.field %q", err, field)
		return nil
	}
	return e
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url          string
		allowPrivate bool
		ok           bool
		says         string
	}{
		{"https://hooks.example.com/services/T0/B0/x", false, true, ""},
		{"http://example.com:8080/x?y=1#z", false, true, ""},
		{"https://8.8.8.8/", false, true, ""},
		{"https://[2606:4700:4700::1111]:443/", false, true, ""},
		{"https://xn--bcher-kva.example/", false, true, ""},
		{"HTTPS://EXAMPLE.COM/", false, true, ""},
		{"https://example.com./", false, true, ""},
		{"http://127.0.0.1:8080/", true, true, ""},
		{"http://localhost:8080/", true, true, ""},
		{"http://[::1]/", true, true, ""},
		{"http://10.0.0.1/", true, true, ""},

		{"", false, false, "empty"},
		{"ftp://example.com/", false, false, "https://"},
		{"file:///etc/passwd", false, false, "https://"},
		{"gopher://example.com/", false, false, "https://"},
		{"https://user:pass@example.com/", false, false, "user name"},
		{"https://user@example.com/", false, false, "user name"},
		{"https:///path", false, false, "no host"},
		{"https:example.com", false, false, "no host"},
		{"/relative", false, false, "https://"},
		{"https://example.com:0/", false, false, "port"},
		{"https://example.com:70000/", false, false, "port"},
		{"https://exa mple.com/", false, false, "not a URL"},
		{"https://bücher.example/", false, false, "xn--"},
		{"https://a..b/", false, false, "host name"},
		{"https://a_b!.com/", false, false, "host name"},
		{"https://" + strings.Repeat("a", 64) + ".com/", false, false, "host name"},
		{"https://example.com/" + strings.Repeat("a", 2048), false, false, "2048"},
		{"http://127.0.0.1/", false, false, "loopback"},
		{"http://127.0.0.1:8080/", false, false, "allow_private_webhooks"},
		{"http://[::1]/", false, false, "loopback"},
		{"http://[::ffff:127.0.0.1]/", false, false, "loopback"},
		{"http://[::ffff:7f00:1]/", false, false, "loopback"},
		{"http://[0:0:0:0:0:ffff:127.0.0.1]/", false, false, "loopback"},
		{"http://[::127.0.0.1]/", false, false, "loopback"},
		{"http://[64:ff9b::7f00:1]/", false, false, "NAT64"},
		{"http://[2002:a9fe:a9fe::]/", false, false, "metadata"},
		{"http://[fe80::1%25eth0]/", true, false, "zone"},
		{"http://[fe80::1]/", false, false, "link-local"},
		{"http://[fc00::1]/", false, false, "private"},
		{"http://[::]/", false, false, "unspecified"},
		{"http://0.0.0.0/", false, false, "unspecified"},
		{"http://10.0.0.1/", false, false, "private"},
		{"http://172.16.5.4/", false, false, "private"},
		{"http://192.168.0.1/", false, false, "private"},
		{"http://100.64.1.1/", false, false, "carrier NAT"},
		{"http://169.254.169.254/latest/meta-data/", false, false, "metadata"},
		{"http://224.0.0.1/", false, false, "multicast"},
		{"http://255.255.255.255/", false, false, "broadcast"},
		{"http://2130706433/", false, false, "127.0.0.1 written in another form"},
		{"http://2130706433/", true, false, "four decimal numbers"},
		{"http://0x7f000001/", false, false, "127.0.0.1"},
		{"http://0x7F000001/", false, false, "127.0.0.1"},
		{"http://0177.0.0.1/", false, false, "127.0.0.1"},
		{"http://127.1/", false, false, "127.0.0.1"},
		{"http://0/", false, false, "0.0.0.0"},
		{"http://0x08080808/", false, false, "8.8.8.8 written in another form"},
		{"http://010.0.0.1/", true, false, "8.0.0.1"},
		{"http://127.0.0.1./", false, false, "another form"},
		{"http://%31%32%37.0.0.1/", false, false, "not a URL"},
		{"http://1.2.3.4.5/", false, false, "not one"},
		{"http://08.1/", false, false, "not one"},
		{"http://localhost/", false, false, "names this host"},
		{"http://LOCALHOST./", false, false, "names this host"},
		{"http://app.localhost/", false, false, "names this host"},
		{"http://localhost.localdomain/", false, false, "names this host"},
	}
	for _, tt := range tests {
		err := CheckURL(tt.url, tt.allowPrivate)
		if (err == nil) != tt.ok {
			t.Errorf("CheckURL(%q, %v) = %v, want ok %v", tt.url, tt.allowPrivate, err, tt.ok)
			continue
		}
		if err != nil {
			if e := invalidField(t, err, "url"); e != nil && !strings.Contains(e.Message, tt.says) {
				t.Errorf("CheckURL(%q): %q does not say %q", tt.url, e.Message, tt.says)
			}
		}
	}
}

func TestCheckHeaders(t *testing.T) {
	long := strings.Repeat("v", MaxHeaderValueBytes)
	many := map[string]string{}
	for i := range MaxHeaders + 1 {
		many["X-H"+strings.Repeat("a", i)] = "v"
	}
	tests := []struct {
		h    map[string]string
		ok   bool
		says string
	}{
		{nil, true, ""},
		{map[string]string{"Authorization": "Bearer s3cret-value", "X-Team": "ops", "User-Agent": "mine", "x-lower": "ok\tok"}, true, ""},
		{map[string]string{"X-Long": long}, true, ""},
		{map[string]string{"X-Too-Long": long + "v"}, false, "4096"},
		{many, false, "at most 20"},
		{map[string]string{"": "v"}, false, "not a header name"},
		{map[string]string{"X Bad": "v"}, false, "not a header name"},
		{map[string]string{"X:Bad": "v"}, false, "not a header name"},
		{map[string]string{"X-Ünicode": "v"}, false, "not a header name"},
		{map[string]string{"X-A": "a\r\nX-Injected: 1"}, false, "control character"},
		{map[string]string{"X-A": "a\nb"}, false, "control character"},
		{map[string]string{"X-A": "a\x00b"}, false, "control character"},
		{map[string]string{"X-A": "a\x7fb"}, false, "control character"},
		{map[string]string{"X-A": "1", "x-a": "2"}, false, "twice"},
		{map[string]string{"Svc-Signature": "v1=forged"}, false, "Svc-*"},
		{map[string]string{"svc-event": "x"}, false, "Svc-*"},
		{map[string]string{"SVC-EVENT-ID": "x"}, false, "Svc-*"},
		{map[string]string{"Svc-Anything-New": "x"}, false, "Svc-*"},
		{map[string]string{"Content-Type": "text/plain"}, false, "content_type"},
		{map[string]string{"content-length": "1"}, false, "connection"},
		{map[string]string{"Host": "internal"}, false, "connection"},
		{map[string]string{"Transfer-Encoding": "chunked"}, false, "connection"},
		{map[string]string{"Connection": "close"}, false, "connection"},
		{map[string]string{"Upgrade": "h2c"}, false, "connection"},
		{map[string]string{"TE": "trailers"}, false, "connection"},
		{map[string]string{"Trailer": "X"}, false, "connection"},
		{map[string]string{"Keep-Alive": "1"}, false, "connection"},
		{map[string]string{"Proxy-Authorization": "x"}, false, "connection"},
		{map[string]string{"proxy-connection": "x"}, false, "connection"},
	}
	for _, tt := range tests {
		err := CheckHeaders(tt.h)
		if (err == nil) != tt.ok {
			t.Errorf("CheckHeaders(%d headers, %q): %v, want ok %v", len(tt.h), keys(tt.h), err, tt.ok)
			continue
		}
		if err == nil {
			continue
		}
		e := invalidField(t, err, "headers")
		if e != nil && !strings.Contains(e.Message, tt.says) {
			t.Errorf("CheckHeaders(%q): %q does not say %q", keys(tt.h), e.Message, tt.says)
		}
		for _, v := range tt.h {
			if len(v) > 2 && e != nil && strings.Contains(e.Message, v) {
				t.Errorf("the refusal %q quotes a header value", e.Message)
			}
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestCheckMethodAndContentType(t *testing.T) {
	for _, m := range []string{"", "POST", "PUT", "PATCH"} {
		if err := CheckMethod(m); err != nil {
			t.Errorf("CheckMethod(%q): %v", m, err)
		}
	}
	for _, m := range []string{"GET", "DELETE", "post", "CONNECT", "TRACE", "POST ", "PO\nST"} {
		invalidField(t, CheckMethod(m), "method")
	}
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "application/cloudevents+json", "text/plain", "application/x-www-form-urlencoded"} {
		if err := CheckContentType(ct); err != nil {
			t.Errorf("CheckContentType(%q): %v", ct, err)
		}
	}
	for _, ct := range []string{"json", "application/", "/json", "text/plain\r\nX-Injected: 1", "a/b; c", strings.Repeat("a", 300) + "/b"} {
		invalidField(t, CheckContentType(ct), "content_type")
	}
	for ct, want := range map[string]bool{"": true, "application/json": true, "Application/JSON; charset=utf-8": true, "application/vnd.api+json": true, "text/plain": false, "application/jsonx": false} {
		if isJSON(ct) != want {
			t.Errorf("isJSON(%q) = %v", ct, !want)
		}
	}
}
