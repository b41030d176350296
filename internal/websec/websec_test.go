package websec

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestSessionCookieName(t *testing.T) {
	if SessionCookieName(false) != "svc_session" || SessionCookieName(true) != "__Host-svc_session" {
		t.Errorf("names %q %q", SessionCookieName(false), SessionCookieName(true))
	}
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lines     []string
		want      string
		value     string
		count     int
		ambiguous bool
	}{
		{"none", nil, SessionCookie, "", 0, false},
		{"one", []string{"a=1; svc_session=ses_x; b=2"}, SessionCookie, "ses_x", 1, false},
		{"quoted", []string{`svc_session="ses_x"`}, SessionCookie, "ses_x", 1, false},
		{"spaced", []string{" svc_session = ses_x ;"}, SessionCookie, "ses_x", 1, false},
		{"two of one name (a tossed one at a longer path first)", []string{"svc_session=attacker; svc_session=victim"}, SessionCookie, "", 2, true},
		{"two across header lines", []string{"svc_session=a", "svc_session=b"}, SessionCookie, "", 2, true},
		{"both spellings", []string{"__Host-svc_session=a; svc_session=b"}, HostSessionCookie, "", 2, true},
		{"only the other spelling is no credential", []string{"svc_session=b"}, HostSessionCookie, "", 1, false},
		{"the wanted spelling alone", []string{"__Host-svc_session=a; other=1"}, HostSessionCookie, "a", 1, false},
		{"names are case-sensitive", []string{"SVC_SESSION=a; Svc_session=b"}, SessionCookie, "", 0, false},
		{"a pair without a value is skipped", []string{"svc_session; x=1"}, SessionCookie, "", 0, false},
		{"an empty value counts", []string{"svc_session=; svc_session=v"}, SessionCookie, "", 2, true},
		{"a quote does not hide a pair", []string{`a="x; svc_session=hidden"; svc_session=v`}, SessionCookie, "", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := SessionCookie
			if tc.want == SessionCookie {
				other = HostSessionCookie
			}
			f := Lookup(http.Header{"Cookie": tc.lines}, tc.want, other)
			if f.Value != tc.value || f.Count != tc.count || f.Ambiguous() != tc.ambiguous {
				t.Errorf("Lookup = %+v (ambiguous %v), want value %q count %d ambiguous %v", f, f.Ambiguous(), tc.value, tc.count, tc.ambiguous)
			}
		})
	}
}

func TestClearing(t *testing.T) {
	lines := func(cs []*http.Cookie) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.String())
		}
		return out
	}
	got := lines(Clearing(SessionCookie, "console.svc.example:8080", "/api/v1/me"))
	for _, want := range []string{
		"svc_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax",
		"svc_session=; Path=/api/v1; Max-Age=0; HttpOnly; SameSite=Lax",
		"svc_session=; Path=/api/v1/; Max-Age=0; HttpOnly; SameSite=Lax",
		"svc_session=; Path=/api/v1/me; Max-Age=0; HttpOnly; SameSite=Lax",
		"svc_session=; Path=/api/v1; Domain=svc.example; Max-Age=0; HttpOnly; SameSite=Lax",
		"svc_session=; Path=/; Domain=console.svc.example; Max-Age=0; HttpOnly; SameSite=Lax",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no %q among\n%s", want, strings.Join(got, "\n"))
		}
	}
	for _, l := range got {
		if strings.Contains(l, "Domain=example;") {
			t.Errorf("a top-level domain: %s", l)
		}
	}
	if h := lines(Clearing(HostSessionCookie, "svc.example", "/api/v1/me")); !slices.Equal(h, []string{"__Host-svc_session=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax"}) {
		t.Errorf("__Host- clearing: %q", h)
	}
	if ip := lines(Clearing(SessionCookie, "127.0.0.1:8080", "/a")); len(ip) != 2 || strings.Contains(strings.Join(ip, ""), "Domain") {
		t.Errorf("an IP host has no domains: %q", ip)
	}
	if v6 := lines(Clearing(SessionCookie, "[::1]:8080", "/")); len(v6) != 1 {
		t.Errorf("an IPv6 host: %q", v6)
	}
	deep := Clearing(SessionCookie, "a.b.c.d.e.example", "/"+strings.Repeat("x/", 100))
	if len(deep) != maxClearing {
		t.Errorf("a deep path gives %d lines, want the cap %d", len(deep), maxClearing)
	}
}

func TestCookiePaths(t *testing.T) {
	for in, want := range map[string][]string{
		"":          {"/"},
		"/":         {"/"},
		"/a":        {"/", "/a"},
		"/a/":       {"/", "/a", "/a/"},
		"/a/b":      {"/", "/a", "/a/", "/a/b"},
		"relative":  {"/"},
		"/apps/x/y": {"/", "/apps", "/apps/", "/apps/x", "/apps/x/", "/apps/x/y"},
	} {
		if got := cookiePaths(in); !slices.Equal(got, want) {
			t.Errorf("cookiePaths(%q) = %q, want %q", in, got, want)
		}
	}
}

// req builds a request with fetch metadata: site, mode, dest ("" leaves a
// header out) and an Origin.
func req(method, site, mode, dest, origin string) *http.Request {
	r := httptest.NewRequest(method, "http://app.example:8080/x", nil)
	for k, v := range map[string]string{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode, "Sec-Fetch-Dest": dest, "Origin": origin} {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	return r
}

func TestCookieAllowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *http.Request
		want bool
	}{
		{"same-origin fetch", req("POST", "same-origin", "cors", "empty", "http://app.example:8080"), true},
		{"typed address", req("GET", "none", "navigate", "document", ""), true},
		{"link from another site", req("GET", "cross-site", "navigate", "document", ""), true},
		{"link from a sibling (same-site)", req("GET", "same-site", "navigate", "document", ""), true},
		{"HEAD navigation", req("HEAD", "cross-site", "navigate", "document", ""), true},
		{"form post from another app", req("POST", "same-site", "navigate", "document", "http://other.example:8080"), false},
		{"form post from a sandboxed page", req("POST", "cross-site", "navigate", "document", "null"), false},
		{"fetch from another app", req("GET", "same-site", "cors", "empty", "http://other.example:8080"), false},
		{"no-cors fetch", req("POST", "cross-site", "no-cors", "empty", "http://evil.example"), false},
		{"image", req("GET", "cross-site", "no-cors", "image", ""), false},
		{"frame", req("GET", "cross-site", "navigate", "iframe", ""), false},
		{"websocket from another app", req("GET", "same-site", "websocket", "websocket", "http://other.example:8080"), false},
		{"unknown site value", req("GET", "sideways", "cors", "empty", ""), false},
		{"curl", req("POST", "", "", "", ""), true},
		{"old browser, same origin", req("POST", "", "", "", "http://app.example:8080"), true},
		{"old browser, same origin in another case", req("POST", "", "", "", "http://APP.example:8080"), true},
		{"old browser, other origin", req("POST", "", "", "", "http://evil.example"), false},
		{"old browser, other port", req("POST", "", "", "", "http://app.example:9000"), false},
		{"Origin null", req("GET", "", "", "", "null"), false},
		{"Origin not a URL", req("GET", "", "", "", "::"), false},
		{"Origin with another scheme", req("GET", "", "", "", "ftp://app.example:8080"), false},
		{"trusted origin", req("POST", "", "", "", "https://console.example"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := CookieAllowed(tc.r, "https://console.example/")
			if d.Allowed != tc.want || d.Reason == "" {
				t.Errorf("CookieAllowed = %+v, want %v", d, tc.want)
			}
		})
	}
}

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *http.Request
		want bool
	}{
		{"same-origin", req("GET", "same-origin", "cors", "empty", ""), true},
		{"typed", req("GET", "none", "navigate", "document", ""), true},
		{"a link from another site", req("GET", "cross-site", "navigate", "document", ""), false},
		{"not a browser", req("GET", "", "", "", ""), true},
		{"another origin", req("GET", "", "", "", "http://evil.example"), false},
	} {
		if d := SameOrigin(tc.r); d.Allowed != tc.want {
			t.Errorf("%s: %+v, want %v", tc.name, d, tc.want)
		}
	}
}

func TestTopLevelNavigation(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *http.Request
		want bool
	}{
		{"browser navigation", req("GET", "cross-site", "navigate", "document", ""), true},
		{"not a browser", req("GET", "", "", "", ""), true},
		{"not a browser, POST", req("POST", "", "", "", ""), false},
		{"frame", req("GET", "same-origin", "navigate", "iframe", ""), false},
		{"fetch", req("GET", "same-origin", "cors", "empty", ""), false},
		{"only the site header", req("GET", "cross-site", "", "", ""), false},
	} {
		if got := TopLevelNavigation(tc.r); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func FuzzLookup(f *testing.F) {
	for _, s := range []string{"svc_session=a", `a="b; svc_session=c"; svc_session=d`, "; ; =; svc_session", "__Host-svc_session=x;svc_session=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		h := http.Header{"Cookie": {line}}
		found := Lookup(h, SessionCookie, HostSessionCookie)
		n := 0
		for name, value := range Pairs(h) {
			if name == SessionCookie || name == HostSessionCookie {
				n++
			}
			if strings.Contains(value, ";") {
				t.Fatalf("a value holds a ';': %q", value)
			}
		}
		if found.Count != n || (found.Value != "" && n != 1) {
			t.Fatalf("Lookup %+v over %d session pairs", found, n)
		}
		for _, c := range Clearing(SessionCookie, line, line) {
			if c.MaxAge >= 0 || c.Value != "" {
				t.Fatalf("a clearing cookie that sets: %v", c)
			}
		}
	})
}
