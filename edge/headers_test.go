package edge

import (
	"net/http"
	"slices"
	"testing"
)

func TestReservedHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"X-Svc-Assertion": true, "x-svc-assertion": true, "X_Svc_Assertion": true, "X_svc_email": true,
		"X-SVC-": true, "X-Svc_User_Id": true, "x_SVC-groups": true,
		"X-Svc": false, "X-Svcx-Email": false, "Svc-Email": false, "X-Sv-Email": false, "Accept": false,
		"X-Forwarded-For": false, "X-Forwarded-Host": false, "Forwarded": false,
		"X_Forwarded_For": true, "x-forwarded-host": true, "X-FORWARDED-PROTO": true, "X_Forwarded_Prefix": true, "FORWARDED": true,
		"X-Forwarded-Port": true, "X-Real-IP": true, "x_real_ip": true, "True-Client-IP": true, "CF-Connecting-IP": true,
		"X-Client-IP": true, "X-Original-Forwarded-For": true, "X-Forwarded": true, "X-Original-URL": true,
		"X-Real-IPv4": false, "X-Realm": false, "Client-IPs": false,
	} {
		if got := reservedHeader(name); got != want {
			t.Errorf("reservedHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestStripCookieLine(t *testing.T) {
	for in, want := range map[string]string{
		"a=1; b=2":                      "a=1; b=2",
		"svc_session=x":                 "",
		"svc_session=x; a=1":            "a=1",
		"a=1; svc_session=x; b=2":       "a=1; b=2",
		"SVC_SESSION=x;Svc_p=y;c=3":     "c=3",
		`svc_q="v;svc_r=w"; d=4`:        "d=4",
		"  svc_s = v ; e=5":             "e=5",
		"svc_flag; f=6":                 "f=6",
		"f=svc_value; g=7":              "f=svc_value; g=7",
		"a=1;;  ; b=2; svc_x=1":         "a=1; b=2",
		"notsvc_x=1; xsvc_=2":           "notsvc_x=1; xsvc_=2",
		"\tsvc_tab=1;\th=8":             "h=8",
		"a=1; svc_=empty-name-is-ours ": "a=1",
	} {
		if got := stripCookieLine(in); got != want {
			t.Errorf("stripCookieLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStripCookiesAndHeaders(t *testing.T) {
	h := http.Header{
		"Cookie":          {"a=1; svc_session=x", "svc_only=1", "b=2"},
		"X-Svc-Email":     {"evil"},
		"X_svc_name":      {"evil"},
		"X-Forwarded-For": {"1.2.3.4"},
		"X_forwarded_for": {"evil"},
		"Authorization":   {"Bearer tok_abc.def", "Basic xyz"},
		"Accept":          {"*/*"},
	}
	stripReserved(h)
	stripCookies(h)
	stripBearer(h)
	want := http.Header{"Cookie": {"a=1", "b=2"}, "X-Forwarded-For": {"1.2.3.4"}, "Authorization": {"Basic xyz"}, "Accept": {"*/*"}}
	if len(h) != len(want) {
		t.Fatalf("got %v, want %v", h, want)
	}
	for k, v := range want {
		if !slices.Equal(h[k], v) {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
	h = http.Header{"Cookie": {"svc_a=1", "SVC_B=2"}, "Authorization": {"bearer  tok_x "}}
	stripCookies(h)
	stripBearer(h)
	if len(h) != 0 {
		t.Errorf("left %v", h)
	}
}

func TestSvcBearer(t *testing.T) {
	for v, want := range map[string]string{
		"Bearer tok_1.s": "tok_1.s", "bearer tok_1.s": "tok_1.s", "BEARER   tok_1.s ": "tok_1.s",
		"Bearer other": "", "Basic tok_1.s": "", "tok_1.s": "", "": "",
	} {
		got, ok := svcBearer(v)
		if got != want || ok != (want != "") {
			t.Errorf("svcBearer(%q) = %q, %v; want %q", v, got, ok, want)
		}
	}
	if got := bearerOf(http.Header{"Authorization": {"Basic x", "Bearer tok_2.s"}}); got != "tok_2.s" {
		t.Errorf("bearerOf = %q", got)
	}
}

func TestStripSetCookies(t *testing.T) {
	h := http.Header{"Set-Cookie": {"svc_session=x; Path=/", "a=1", "Svc_P=2; Domain=example.com", " svc_q=3"}}
	stripSetCookies(h)
	if !slices.Equal(h["Set-Cookie"], []string{"a=1"}) {
		t.Errorf("Set-Cookie = %q", h["Set-Cookie"])
	}
}

func TestHeaderValue(t *testing.T) {
	for in, want := range map[string]string{"Ann": "Ann", "Zoë Ünal": "Zoë Ünal", "a\r\nX-Evil: 1": "a  X-Evil: 1", "t\tab\x7f": "t ab "} {
		if got := headerValue(in); got != want {
			t.Errorf("headerValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSubdomainSlug(t *testing.T) {
	p := &Proxy{apps: "apps.test"}
	for host, want := range map[string]string{
		"notes.apps.test": "notes", "Notes.APPS.test:80": "Notes", "notes.apps.test.": "notes", "a.b.apps.test": "a.b",
		"apps.test": "", ".apps.test": "", "xapps.test": "", "notes.apps.test.evil": "", "[::1]:80": "", "": "",
	} {
		got, ok := p.subdomainSlug(host)
		if got != want || ok != (want != "") {
			t.Errorf("subdomainSlug(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}
}
