package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// wrongTypeBodies returns, for every JSON field of a request type, a body
// giving that field a value of the wrong JSON type.
func wrongTypeBodies(req any) map[string]string {
	out := map[string]string{}
	rt := reflect.TypeOf(req)
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		var wrong any
		switch {
		case ft == reflect.TypeOf(json.RawMessage{}):
			wrong = "not an object" // bound raw, decoded by the handler
		case ft.Kind() == reflect.String:
			wrong = 12345
		case ft.Kind() == reflect.Bool:
			wrong = "yes"
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Float64:
			wrong = "ten"
		case ft.Kind() == reflect.Slice, ft.Kind() == reflect.Map, ft.Kind() == reflect.Struct:
			wrong = 7
		default:
			continue
		}
		out[name] = jsonOf(map[string]any{name: wrong})
	}
	return out
}

// badValues are values of the right JSON type that a route refuses, by
// route.
var badValues = map[string][]struct{ name, body, field string }{
	"POST /api/v1/apps/{appID}/deployments": {
		{"a negative revision", `{"revision":-1}`, "revision"},
		{"a revision past int64", `{"revision":9223372036854775808}`, "revision"},
		{"a huge revision", `{"revision":1e30}`, "revision"},
		{"a fractional revision", `{"revision":1.5}`, "revision"},
	},
	"POST /api/v1/apps/{appID}/grants": {
		{"an unknown plane", `{"plane":"both","principal_kind":"anonymous"}`, "plane"},
		{"an unknown principal kind", `{"plane":"data","principal_kind":"robot","principal_id":"x"}`, "principal_kind"},
		{"a passcode over 128 characters", jsonOf(map[string]string{"plane": "data", "principal_kind": "anonymous", "passcode": strings.Repeat("p", 129)}), "passcode"},
		{"a passcode with a control character", `{"plane":"data","principal_kind":"anonymous","passcode":"pass\u0007code"}`, "passcode"},
		{"a passcode for a user", `{"plane":"data","principal_kind":"user","principal_id":"usr_01M80000000000000000000000","passcode":"hunter22"}`, "passcode"},
		{"a role on the data plane", `{"plane":"data","principal_kind":"user","principal_id":"usr_01M80000000000000000000000","role_id":"role_viewer"}`, "role_id"},
	},
	"PATCH /api/v1/apps/{appID}/grants/{grantID}": {
		{"nothing to change", `{}`, ""},
		{"an empty role", `{"role_id":""}`, "role_id"},
		{"a huge passcode", jsonOf(map[string]string{"passcode": strings.Repeat("p", 10_000)}), "passcode"},
	},
	"POST /api/v1/subscriptions": {
		{"events not a list", `{"events":"deploy.*","url":"https://example.com/h"}`, "events"},
		{"a filter matching nothing", `{"events":["deploy.nope"],"url":"https://example.com/h"}`, "events"},
		{"a thousand filters", jsonOf(map[string]any{"events": slices.Repeat([]string{"*"}, 1000), "url": "https://example.com/h"}), "events"},
		{"a url that is not one", `{"events":["*"],"url":"::not a url"}`, "url"},
		{"headers not an object", `{"events":["*"],"url":"https://example.com/h","headers":["a"]}`, "headers"},
		{"a method that sends nothing", `{"events":["*"],"url":"https://example.com/h","method":"GET"}`, "method"},
	},
	"PATCH /api/v1/subscriptions/{subscriptionID}": {
		{"enabled not a boolean", `{"enabled":"yes"}`, "enabled"},
		{"no events", `{"events":[]}`, "events"},
		{"another app", `{"app_id":"app_01M80000000000000000000000"}`, "app_id"},
	},
	"POST /api/v1/backups": {
		{"app_id not a string", `{"app_id":7}`, "app_id"},
		{"app_id not a string either", `{"app_id":{"id":"x"}}`, "app_id"},
	},
	"POST /api/v1/apps/{appID}/restore": {
		{"no backup_id", `{}`, "backup_id"},
		{"backup_id not a string", `{"backup_id":["bkp_1"]}`, "backup_id"},
		{"an empty backup_id", `{"backup_id":""}`, "backup_id"},
	},
	"POST /api/v1/apps/{appID}/passcode": {
		{"no passcode", `{}`, "passcode"},
		{"an empty passcode", `{"passcode":""}`, "passcode"},
		{"a passcode over 128 characters", jsonOf(map[string]string{"passcode": strings.Repeat("p", 129)}), "passcode"},
	},
	"POST /api/v1/apps/{appID}/deployments/{depID}/reject": {
		{"no reason", `{}`, "reason"},
		{"an empty reason", `{"reason":" "}`, "reason"},
		{"a null reason", `{"reason":null}`, "reason"},
		{"a reason over 1000 bytes", jsonOf(map[string]string{"reason": strings.Repeat("r", 1001)}), "reason"},
	},
}

func TestBadInputOnEveryEndpoint(t *testing.T) {
	h := newHarness(t)
	m := newMatrix(t, h)
	admin := h.adminPrincipal()
	huge := `{"x":"` + strings.Repeat("a", defaultBodyLimit) + `"}`
	bound := 0
	for _, r := range h.srv.routes {
		if r.request == nil || (r.method != http.MethodPost && r.method != http.MethodPut && r.method != http.MethodPatch) {
			continue
		}
		bound++
		key := r.method + " " + r.path
		t.Run(key, func(t *testing.T) {
			build, ok := m.build[key]
			if !ok {
				t.Fatalf("no request for %s", key)
			}
			c := build(t, admin, h.account(t, "owner", nil, false))
			type bad struct {
				name, body, ctype string
				status            int
				field             string
			}
			cases := []bad{
				{"malformed JSON", `{"a":`, "application/json", 400, ""},
				{"not JSON", `username=x&password=y`, "application/json", 400, ""},
				{"a JSON array", `[{"name":"x"}]`, "application/json", 400, ""},
				{"a JSON string", `"x"`, "application/json", 400, ""},
				{"trailing data", `{} {}`, "application/json", 400, ""},
				{"an unknown field", `{"zz_unknown":1}`, "application/json", 400, "zz_unknown"},
				{"oversized", huge, "application/json", 413, ""},
				{"text/plain", `{}`, "text/plain", 415, ""},
				{"a form", `name=x`, "application/x-www-form-urlencoded", 415, ""},
				{"malformed content type", `{}`, "application/json; charset", 415, ""},
			}
			for field, body := range wrongTypeBodies(r.request) {
				cases = append(cases, bad{"wrong type for " + field, body, "application/json", 400, field})
			}
			if r.path != api+"/operator/raft/probes" { // an empty body is its default request
				cases = append(cases, bad{"an empty body", "", "application/json", 400, ""})
			}
			for _, v := range badValues[key] {
				cases = append(cases, bad{v.name, v.body, "application/json", 400, v.field})
			}
			before := len(h.auditEntries(t))
			for _, b := range cases {
				a := h.do(r.method, c.path, strings.NewReader(b.body), "Content-Type", b.ctype)
				e, isEnv := envelopeOf(a)
				if a.status != b.status || !isEnv || e.Code != errcode.ValidInvalid {
					t.Errorf("%s: got %d %s, want %d VALID_INVALID", b.name, a.status, a.body, b.status)
					continue
				}
				if b.field != "" && e.Details["field"] != b.field {
					t.Errorf("%s: details.field = %v, want %s (%s)", b.name, e.Details["field"], b.field, e.Message)
				}
			}
			// The oversized body without a Content-Length, streamed.
			req := httptest.NewRequest(r.method, c.path, io.MultiReader(strings.NewReader(huge)))
			req.ContentLength = -1
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+h.token)
			rec := httptest.NewRecorder()
			h.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusRequestEntityTooLarge || codeOf(answer{body: rec.Body.Bytes()}) != errcode.ValidInvalid {
				t.Errorf("oversized, streamed: got %d %s, want 413 VALID_INVALID", rec.Code, rec.Body)
			}
			if after := len(h.auditEntries(t)); after != before {
				t.Errorf("bad requests wrote %d audit entries", after-before)
			}
		})
	}
	if bound == 0 {
		t.Fatal("no route binds a body")
	}
	for _, bad := range []string{"handler panicked", `"level":"ERROR"`} {
		if strings.Contains(h.logs.String(), bad) {
			t.Errorf("the log has %q", bad)
		}
	}
	t.Logf("%d routes bind a body", bound)
}

// badQueries are query strings that a GET route refuses, by route.
var badQueries = map[string][]struct{ name, query, field string }{
	"GET /api/v1/apps/{appID}/principals": {
		{"a control character", "q=" + url.QueryEscape("a\x00b"), "q"},
		{"a tab", "q=" + url.QueryEscape("a\tb"), "q"},
		{"not UTF-8", "q=%FF", "q"},
		{"over 100 characters", "q=" + strings.Repeat("a", 101), "q"},
	},
}

func TestBadQueries(t *testing.T) {
	h := newHarness(t)
	m := newMatrix(t, h)
	admin := h.adminPrincipal()
	for key, cases := range badQueries {
		t.Run(key, func(t *testing.T) {
			c := m.build[key](t, admin, admin)
			path, _, _ := strings.Cut(c.path, "?")
			for _, b := range cases {
				a := h.send("GET", path+"?"+b.query, "")
				e, isEnv := envelopeOf(a)
				if a.status != http.StatusBadRequest || !isEnv || e.Code != errcode.ValidInvalid || e.Details["field"] != b.field {
					t.Errorf("%s: got %d %s, want 400 VALID_INVALID on %s", b.name, a.status, a.body, b.field)
				}
			}
		})
	}
}
