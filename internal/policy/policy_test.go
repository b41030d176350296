package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

func TestDefault(t *testing.T) {
	want := Policy{
		SourceAllowlist:      []string{},
		DisabledVerbs:        []string{},
		AgentDisabledVerbs:   []string{},
		AllowAnonymousGrants: true,
		MinBuildIsolation:    "none",
		MinRuntimeIsolation:  "none",
		EgressAllowlist:      []string{},
		InsecureAction:       "warn",
		InsecureGraceHours:   24,
	}
	if diff := cmp.Diff(want, Default()); diff != "" {
		t.Errorf("Default() mismatch (-want +got):\n%s", diff)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v, want nil", err)
	}
	if got := Default().EffectivePublicSharing(); got != "allowed" {
		t.Errorf("Default().EffectivePublicSharing() = %q, want %q", got, "allowed")
	}
}

func TestNames(t *testing.T) {
	want := []string{
		"source_allowlist", "disabled_verbs", "agent_disabled_verbs", "public_sharing",
		"allow_anonymous_grants", "min_build_isolation", "min_runtime_isolation",
		"egress_allowlist", "require_backup_before_destroy", "max_token_lifetime_days",
		"max_log_disk_bytes", "disable_ai_screening", "min_security_score", "insecure_action",
		"insecure_grace_hours", "ignore_unfixable_findings", "allow_private_webhooks",
	}
	if diff := cmp.Diff(want, Names()); diff != "" {
		t.Errorf("Names() mismatch (-want +got):\n%s", diff)
	}
	// The names are the JSON tags of Policy, in the same order.
	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		t.Fatalf("token: %v", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("decode: %v", err)
		}
	}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("JSON keys of Policy mismatch (-want +got):\n%s", diff)
	}
	// Names returns a copy.
	n := Names()
	n[0] = "changed"
	if got := Names()[0]; got != "source_allowlist" {
		t.Errorf("Names()[0] after changing a returned slice = %q, want source_allowlist", got)
	}
}

func TestEffectivePublicSharing(t *testing.T) {
	tests := []struct {
		sharing   string
		anonymous bool
		want      string
	}{
		{"", true, "allowed"},
		{"", false, "none"},
		{"allowed", false, "allowed"},
		{"passcode_only", true, "passcode_only"},
		{"passcode_only", false, "passcode_only"},
		{"none", true, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.sharing+"/"+map[bool]string{true: "anon", false: "noanon"}[tt.anonymous], func(t *testing.T) {
			p := Policy{PublicSharing: tt.sharing, AllowAnonymousGrants: tt.anonymous}
			if got := p.EffectivePublicSharing(); got != tt.want {
				t.Errorf("EffectivePublicSharing() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIsolation(t *testing.T) {
	ranks := []struct {
		level string
		rank  int
		ok    bool
	}{
		{"none", 0, true}, {"sandbox", 1, true}, {"container", 2, true}, {"vm", 3, true},
		{"", 0, false}, {"VM", 0, false}, {"docker", 0, false},
	}
	for _, tt := range ranks {
		t.Run("rank/"+tt.level, func(t *testing.T) {
			got, ok := IsolationRank(tt.level)
			if got != tt.rank || ok != tt.ok {
				t.Errorf("IsolationRank(%q) = %d, %v, want %d, %v", tt.level, got, ok, tt.rank, tt.ok)
			}
		})
	}
	atLeast := []struct {
		have, want string
		ok         bool
	}{
		{"none", "none", true},
		{"vm", "none", true},
		{"container", "sandbox", true},
		{"container", "container", true},
		{"sandbox", "container", false},
		{"none", "vm", false},
		{"bogus", "none", false},
		{"vm", "bogus", false},
		{"", "", false},
	}
	for _, tt := range atLeast {
		t.Run("atleast/"+tt.have+">="+tt.want, func(t *testing.T) {
			if got := AtLeast(tt.have, tt.want); got != tt.ok {
				t.Errorf("AtLeast(%q, %q) = %v, want %v", tt.have, tt.want, got, tt.ok)
			}
		})
	}
}

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name, setting, raw string
		want               any
		wantErr            string // substring; "" means success
	}{
		{"list", "source_allowlist", "github.com/acme/*, gitlab.com/x ,,", []string{"github.com/acme/*", "gitlab.com/x"}, ""},
		{"empty list", "source_allowlist", "", []string{}, ""},
		{"only commas", "egress_allowlist", " , ,", []string{}, ""},
		{"verbs", "disabled_verbs", "app.exec, app.secrets.read", []string{"app.exec", "app.secrets.read"}, ""},
		{"agent verbs", "agent_disabled_verbs", "app.delete", []string{"app.delete"}, ""},
		{"unknown verb", "disabled_verbs", "app.exec,app.fly", nil, `policy setting disabled_verbs: item 2: "app.fly" is not a known verb (known verbs: app.create,`},
		{"egress", "egress_allowlist", "api.example.com,*.example.org,10.0.0.1,10.0.0.0/8,::1,fd00::/8,localhost", []string{"api.example.com", "*.example.org", "10.0.0.1", "10.0.0.0/8", "::1", "fd00::/8", "localhost"}, ""},
		{"egress url", "egress_allowlist", "https://example.com", nil, `"https://example.com" is not a hostname, *.domain wildcard, IP address or CIDR`},
		{"egress port", "egress_allowlist", "example.com:443", nil, "is not a hostname"},
		{"egress bad wildcard", "egress_allowlist", "*example.com", nil, "is not a hostname"},
		{"egress bare wildcard", "egress_allowlist", "*", nil, "is not a hostname"},
		{"egress bad cidr", "egress_allowlist", "10.0.0.0/33", nil, "is not a hostname"},
		{"egress numeric", "egress_allowlist", "1.2.3", nil, "is not a hostname"},
		{"egress zone", "egress_allowlist", "fe80::1%eth0", nil, "is not a hostname"},
		{"egress underscore", "egress_allowlist", "a_b.example.com", nil, "is not a hostname"},
		{"source with space", "source_allowlist", "github.com/a b", nil, `"github.com/a b" contains whitespace`},
		{"sharing", "public_sharing", "passcode_only", "passcode_only", ""},
		{"sharing unset", "public_sharing", "", "", ""},
		{"sharing trimmed", "public_sharing", " none ", "none", ""},
		{"sharing bad", "public_sharing", "everyone", nil, `policy setting public_sharing: "everyone" is not accepted (accepted: allowed, passcode_only, none, or empty for unset)`},
		{"sharing case", "public_sharing", "None", nil, "is not accepted"},
		{"isolation", "min_build_isolation", "container", "container", ""},
		{"isolation vm", "min_runtime_isolation", "vm", "vm", ""},
		{"isolation bad", "min_runtime_isolation", "docker", nil, `"docker" is not accepted (accepted: none, sandbox, container, vm)`},
		{"isolation empty", "min_runtime_isolation", "", nil, `"" is not accepted`},
		{"action", "insecure_action", "stop", "stop", ""},
		{"action bad", "insecure_action", "block", nil, `"block" is not accepted (accepted: warn, stop)`},
		{"bool true", "allow_anonymous_grants", "TRUE", true, ""},
		{"bool yes", "require_backup_before_destroy", "Yes", true, ""},
		{"bool 1", "disable_ai_screening", "1", true, ""},
		{"bool no", "ignore_unfixable_findings", " no ", false, ""},
		{"bool 0", "allow_private_webhooks", "0", false, ""},
		{"bool false", "allow_anonymous_grants", "False", false, ""},
		{"bool bad", "allow_anonymous_grants", "maybe", nil, `policy setting allow_anonymous_grants: "maybe" is not a boolean (accepted: true, false, 1, 0, yes, no)`},
		{"bool empty", "allow_anonymous_grants", "", nil, "is not a boolean"},
		{"int", "max_token_lifetime_days", "90", 90, ""},
		{"int zero", "max_token_lifetime_days", "0", 0, ""},
		{"int negative", "max_token_lifetime_days", "-1", nil, "-1 is out of range (0 or more; 0 means no cap)"},
		{"int words", "insecure_grace_hours", "abc", nil, `policy setting insecure_grace_hours: "abc" is not a whole number`},
		{"int hex", "insecure_grace_hours", "0x10", nil, "is not a whole number"},
		{"int fraction", "insecure_grace_hours", "1.5", nil, "is not a whole number"},
		{"int overflow", "insecure_grace_hours", "99999999999999999999", nil, "is out of range"},
		{"int empty", "insecure_grace_hours", "", nil, "is not a whole number"},
		{"score", "min_security_score", "100", 100, ""},
		{"score high", "min_security_score", "101", nil, "101 is out of range (0 to 100)"},
		{"size plain", "max_log_disk_bytes", "1048576", int64(1048576), ""},
		{"size MiB", "max_log_disk_bytes", "512MiB", int64(512 << 20), ""},
		{"size GB", "max_log_disk_bytes", "1GB", int64(1e9), ""},
		{"size k", "max_log_disk_bytes", "100k", int64(100000), ""},
		{"size spaced", "max_log_disk_bytes", " 2 GiB ", int64(2 << 30), ""},
		{"size fraction", "max_log_disk_bytes", "1.5KiB", int64(1536), ""},
		{"size zero", "max_log_disk_bytes", "0", int64(0), ""},
		{"size bad unit", "max_log_disk_bytes", "5 parsecs", nil, `policy setting max_log_disk_bytes: "5 parsecs" is not a size (accepted: a whole number of bytes, or a size such as 512MiB, 1GB or 100k)`},
		{"size negative", "max_log_disk_bytes", "-5", nil, "is not a size"},
		{"size partial byte", "max_log_disk_bytes", "1.5", nil, `"1.5" is not a whole number of bytes`},
		{"size overflow", "max_log_disk_bytes", "9EiB", nil, "is not a size"},
		{"size overflow unit", "max_log_disk_bytes", "9000000PiB", nil, "is out of range"},
		{"size max", "max_log_disk_bytes", "9223372036854775807", int64(math.MaxInt64), ""},
		{"unknown", "max_widgets", "1", nil, `unknown policy setting "max_widgets" (known settings: source_allowlist, disabled_verbs,`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEnv(tt.setting, tt.raw)
			checkParse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func checkParse(t *testing.T, got any, err error, want any, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil {
			t.Fatalf("got value %#v, want error containing %q", got, wantErr)
		}
		if !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("got error %q, want it to contain %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("got error %v, want %#v", err, want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("value mismatch (-want +got):\n%s", diff)
	}
}

func TestParseYAML(t *testing.T) {
	tests := []struct {
		name, setting, yaml string // yaml is the text after "v: "
		want                any
		wantErr             string
	}{
		{"sequence", "source_allowlist", `["github.com/acme/*", "example.com/x"]`, []string{"github.com/acme/*", "example.com/x"}, ""},
		{"block sequence", "egress_allowlist", "\n  - api.example.com\n  - 10.0.0.0/8", []string{"api.example.com", "10.0.0.0/8"}, ""},
		{"comma string", "disabled_verbs", `"app.exec, app.deploy"`, []string{"app.exec", "app.deploy"}, ""},
		{"null list", "source_allowlist", ``, []string{}, ""},
		{"empty sequence", "source_allowlist", `[]`, []string{}, ""},
		{"sequence with number", "egress_allowlist", `[example.com, 5]`, nil, "item 2: 5 is not a string"},
		{"sequence with empty", "source_allowlist", `["a", ""]`, nil, "item 2: an empty pattern is not accepted"},
		{"sequence with bad verb", "agent_disabled_verbs", `[app.exec, nope]`, nil, `item 2: "nope" is not a known verb`},
		{"mapping for list", "source_allowlist", `{a: b}`, nil, "a mapping is not a list"},
		{"number for list", "source_allowlist", `5`, nil, "5 is not a list"},
		{"bool", "allow_anonymous_grants", `false`, false, ""},
		{"bool word", "allow_anonymous_grants", `"yes"`, true, ""},
		{"bool yes unquoted", "allow_anonymous_grants", `no`, false, ""},
		{"bool one", "disable_ai_screening", `1`, true, ""},
		{"bool two", "disable_ai_screening", `2`, nil, "2 is not a boolean"},
		{"bool null", "disable_ai_screening", ``, nil, "a value is required"},
		{"bool list", "disable_ai_screening", `[true]`, nil, "a list is not a boolean"},
		{"int", "max_token_lifetime_days", `30`, 30, ""},
		{"int string", "max_token_lifetime_days", `"30"`, 30, ""},
		{"int float whole", "max_token_lifetime_days", `30.0`, 30, ""},
		{"int float fraction", "max_token_lifetime_days", `30.5`, nil, "30.5 is not a whole number"},
		{"int huge", "insecure_grace_hours", `99999999999999999999`, nil, "is out of range"},
		{"int huge uint", "insecure_grace_hours", `18446744073709551615`, nil, "is out of range"},
		{"int bool", "insecure_grace_hours", `true`, nil, "true is not a whole number"},
		{"int null", "insecure_grace_hours", ``, nil, "a value is required"},
		{"int negative", "insecure_grace_hours", `-3`, nil, "-3 is out of range"},
		{"score", "min_security_score", `70`, 70, ""},
		{"size int", "max_log_disk_bytes", `1073741824`, int64(1 << 30), ""},
		{"size string", "max_log_disk_bytes", `512MiB`, int64(512 << 20), ""},
		{"size float", "max_log_disk_bytes", `1.5`, nil, "1.5 is not a whole number"},
		{"size negative", "max_log_disk_bytes", `-1`, nil, "-1 is negative"},
		{"sharing", "public_sharing", `none`, "none", ""},
		{"sharing null", "public_sharing", ``, "", ""},
		{"sharing number", "public_sharing", `1`, nil, "1 is not a string"},
		{"isolation null", "min_build_isolation", ``, nil, "an empty value is not a string"},
		{"action", "insecure_action", `stop`, "stop", ""},
		{"unknown", "bogus", `1`, nil, `unknown policy setting "bogus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc map[string]any
			if err := yaml.Unmarshal([]byte("v: "+tt.yaml), &doc); err != nil {
				t.Fatalf("yaml: %v", err)
			}
			got, err := ParseYAML(tt.setting, doc["v"])
			checkParse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestSettingErrorShape(t *testing.T) {
	_, err := ParseEnv("min_security_score", "200")
	var se *SettingError
	if !errors.As(err, &se) {
		t.Fatalf("got error %T %v, want *SettingError", err, err)
	}
	if se.Setting != "min_security_score" {
		t.Errorf("got Setting %q, want min_security_score", se.Setting)
	}
	if got, want := se.Err.Error(), "200 is out of range (0 to 100)"; got != want {
		t.Errorf("got inner error %q, want %q", got, want)
	}
	_, err = ParseYAML("nope", 1)
	var ue *UnknownSettingError
	if !errors.As(err, &ue) || ue.Name != "nope" {
		t.Fatalf("got error %v, want *UnknownSettingError for nope", err)
	}
	want := `unknown policy setting "nope" (known settings: ` + strings.Join(Names(), ", ") + ")"
	if err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
}

func TestFromMapJSON(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		useNumber bool
		want      func(*Policy)
		wantErrs  []string
	}{
		{name: "empty body takes defaults", body: `{}`, want: func(*Policy) {}},
		{
			name: "every kind, float64 numbers",
			body: `{"source_allowlist":["github.com/acme/*"],"disabled_verbs":["app.exec"],"public_sharing":"passcode_only",
				"allow_anonymous_grants":false,"min_runtime_isolation":"vm","egress_allowlist":["*.example.com"],
				"max_token_lifetime_days":30,"max_log_disk_bytes":1073741824,"min_security_score":80,"insecure_action":"stop",
				"insecure_grace_hours":0,"allow_private_webhooks":true}`,
			want: func(p *Policy) {
				p.SourceAllowlist = []string{"github.com/acme/*"}
				p.DisabledVerbs = []string{"app.exec"}
				p.PublicSharing = "passcode_only"
				p.AllowAnonymousGrants = false
				p.MinRuntimeIsolation = "vm"
				p.EgressAllowlist = []string{"*.example.com"}
				p.MaxTokenLifetimeDays = 30
				p.MaxLogDiskBytes = 1 << 30
				p.MinSecurityScore = 80
				p.InsecureAction = "stop"
				p.InsecureGraceHours = 0
				p.AllowPrivateWebhooks = true
			},
		},
		{
			name:      "json.Number",
			body:      `{"max_log_disk_bytes":9223372036854775807,"min_security_score":1e1}`,
			useNumber: true,
			want: func(p *Policy) {
				p.MaxLogDiskBytes = math.MaxInt64
				p.MinSecurityScore = 10
			},
		},
		{name: "null list", body: `{"egress_allowlist":null}`, want: func(*Policy) {}},
		{name: "null sharing", body: `{"public_sharing":null}`, want: func(*Policy) {}},
		{name: "size string", body: `{"max_log_disk_bytes":"2GiB"}`, want: func(p *Policy) { p.MaxLogDiskBytes = 2 << 30 }},
		{
			name:     "unknown keys refused",
			body:     `{"zeta":1,"alpha":true,"min_security_score":5}`,
			wantErrs: []string{`unknown policy setting "alpha"`, `unknown policy setting "zeta"`},
		},
		{
			name:     "every bad value reported",
			body:     `{"min_security_score":1.5,"max_token_lifetime_days":-2,"disabled_verbs":["x"],"public_sharing":"all","allow_anonymous_grants":"perhaps"}`,
			wantErrs: []string{"disabled_verbs: item 1:", "public_sharing:", "allow_anonymous_grants:", "max_token_lifetime_days: -2 is out of range", "min_security_score: 1.5 is not a whole number"},
		},
		{name: "float overflow", body: `{"max_log_disk_bytes":9223372036854775807}`, wantErrs: []string{"max_log_disk_bytes: 9.223372036854776e+18 is out of range"}},
		{name: "number fraction", body: `{"min_security_score":2.5}`, useNumber: true, wantErrs: []string{`"2.5" is not a whole number`}},
		{name: "number overflow", body: `{"insecure_grace_hours":1e30}`, useNumber: true, wantErrs: []string{`"1e30" is out of range`}},
		{name: "number huge exponent", body: `{"insecure_grace_hours":1e999999999}`, useNumber: true, wantErrs: []string{"is not a whole number"}},
		{name: "object for list", body: `{"source_allowlist":{"a":1}}`, wantErrs: []string{"a mapping is not a list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tt.body))
			if tt.useNumber {
				dec.UseNumber()
			}
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, err := FromMap(m)
			if len(tt.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("got policy %+v, want errors %q", got, tt.wantErrs)
				}
				lines := strings.Split(err.Error(), "\n")
				if len(lines) != len(tt.wantErrs) {
					t.Fatalf("got %d error lines %q, want %d", len(lines), lines, len(tt.wantErrs))
				}
				for i, w := range tt.wantErrs {
					if !strings.Contains(lines[i], w) {
						t.Errorf("error line %d = %q, want it to contain %q", i, lines[i], w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			want := Default()
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FromMap mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func samplePolicy() Policy {
	return Policy{
		SourceAllowlist:            []string{"github.com/acme/*"},
		DisabledVerbs:              []string{"app.exec", "app.secrets.read"},
		AgentDisabledVerbs:         []string{"app.delete"},
		PublicSharing:              "none",
		AllowAnonymousGrants:       false,
		MinBuildIsolation:          "sandbox",
		MinRuntimeIsolation:        "container",
		EgressAllowlist:            []string{"*.example.com", "10.0.0.0/8"},
		RequireBackupBeforeDestroy: true,
		MaxTokenLifetimeDays:       90,
		MaxLogDiskBytes:            512 << 20,
		DisableAIScreening:         true,
		MinSecurityScore:           60,
		InsecureAction:             "stop",
		InsecureGraceHours:         12,
		IgnoreUnfixableFindings:    true,
		AllowPrivateWebhooks:       true,
	}
}

func TestMapRoundTrip(t *testing.T) {
	for _, p := range []Policy{Default(), samplePolicy()} {
		m := p.Map()
		if len(m) != len(Names()) {
			t.Errorf("Map() has %d entries, want %d", len(m), len(Names()))
		}
		got, err := FromMap(m)
		if err != nil {
			t.Fatalf("FromMap(Map()) error: %v", err)
		}
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("FromMap(Map()) mismatch (-want +got):\n%s", diff)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var decoded map[string]any
		if err := json.Unmarshal(b, &decoded); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		got, err = FromMap(decoded)
		if err != nil {
			t.Fatalf("FromMap(JSON(Map())) error: %v", err)
		}
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("FromMap(JSON(Map())) mismatch (-want +got):\n%s", diff)
		}
	}
	// Map hands out copies.
	p := samplePolicy()
	p.Map()["source_allowlist"].([]string)[0] = "changed"
	if p.SourceAllowlist[0] != "github.com/acme/*" {
		t.Errorf("changing Map's list changed the policy: %q", p.SourceAllowlist)
	}
}

func TestMarshalJSONLists(t *testing.T) {
	b, err := json.Marshal(Policy{})
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	got := string(b)
	for _, name := range []string{"source_allowlist", "disabled_verbs", "agent_disabled_verbs", "egress_allowlist"} {
		if want := `"` + name + `":[]`; !strings.Contains(got, want) {
			t.Errorf("json %s does not contain %s", got, want)
		}
	}
	if strings.Contains(got, "null") {
		t.Errorf("json %s contains null", got)
	}
	b, err = json.Marshal(map[string]any{"policy": Policy{}.Map()})
	if err != nil {
		t.Fatalf("marshal map: %v", err)
	}
	if strings.Contains(string(b), "null") {
		t.Errorf("json of Map %s contains null", b)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Policy)
		wantErr string
	}{
		{"sample", func(*Policy) {}, ""},
		{"nil lists", func(p *Policy) { p.SourceAllowlist, p.EgressAllowlist = nil, nil }, ""},
		{"bad verb", func(p *Policy) { p.DisabledVerbs = []string{"root"} }, `disabled_verbs: item 1: "root" is not a known verb`},
		{"bad isolation", func(p *Policy) { p.MinBuildIsolation = "" }, `min_build_isolation: "" is not accepted`},
		{"bad score", func(p *Policy) { p.MinSecurityScore = -1 }, "min_security_score: -1 is out of range"},
		{"bad size", func(p *Policy) { p.MaxLogDiskBytes = -1 }, "max_log_disk_bytes: -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := samplePolicy()
			tt.change(&p)
			err := p.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestFixed(t *testing.T) {
	var f Fixed
	if got := f.Names(); len(got) != 0 || got == nil {
		t.Errorf("zero Fixed Names() = %#v, want empty non-nil", got)
	}
	if got := f.Apply(samplePolicy()); !cmp.Equal(got, samplePolicy()) {
		t.Errorf("zero Fixed Apply changed the policy: %+v", got)
	}

	setErrs := []struct {
		name    string
		setting string
		value   any
		origin  string
		wantErr string
	}{
		{"unknown", "max_widgets", 1, OriginEnvironment, `unknown policy setting "max_widgets"`},
		{"bad origin", "min_security_score", 1, "default", `origin "default" is not accepted (accepted: environment, config_file)`},
		{"bad value", "min_security_score", 500, OriginConfigFile, "min_security_score: 500 is out of range"},
		{"bad raw value", "public_sharing", "everyone", OriginEnvironment, `"everyone" is not accepted`},
	}
	for _, tt := range setErrs {
		t.Run("set/"+tt.name, func(t *testing.T) {
			var f Fixed
			err := f.Set(tt.setting, tt.value, tt.origin)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Set() = %v, want error containing %q", err, tt.wantErr)
			}
			if f.Len() != 0 {
				t.Errorf("a refused Set fixed %v", f.Names())
			}
		})
	}

	mustSet := func(name string, v any, origin string) {
		t.Helper()
		if err := f.Set(name, v, origin); err != nil {
			t.Fatalf("Set(%s) = %v", name, err)
		}
	}
	mustSet("public_sharing", "none", OriginConfigFile)
	mustSet("egress_allowlist", []any{"a.example.com"}, OriginConfigFile)
	mustSet("max_log_disk_bytes", "1GiB", OriginConfigFile)
	v, err := ParseEnv("egress_allowlist", "b.example.com,c.example.com")
	if err != nil {
		t.Fatalf("ParseEnv: %v", err)
	}
	mustSet("egress_allowlist", v, OriginEnvironment) // environment replaces the file's value
	mustSet("min_security_score", float64(50), OriginEnvironment)

	if diff := cmp.Diff([]string{"public_sharing", "egress_allowlist", "max_log_disk_bytes", "min_security_score"}, f.Names()); diff != "" {
		t.Errorf("Names() mismatch (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		name string
		want bool
	}{{"public_sharing", true}, {"min_security_score", true}, {"insecure_action", false}, {"bogus", false}} {
		if got := f.Has(tt.name); got != tt.want {
			t.Errorf("Has(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	wantEntries := []FixedEntry{
		{Name: "public_sharing", Value: "none", Origin: "config_file"},
		{Name: "egress_allowlist", Value: []string{"b.example.com", "c.example.com"}, Origin: "environment"},
		{Name: "max_log_disk_bytes", Value: int64(1 << 30), Origin: "config_file"},
		{Name: "min_security_score", Value: 50, Origin: "environment"},
	}
	if diff := cmp.Diff(wantEntries, f.Entries()); diff != "" {
		t.Errorf("Entries() mismatch (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(f.Entries())
	if err != nil {
		t.Fatalf("marshal entries: %v", err)
	}
	wantJSON := `[{"name":"public_sharing","value":"none","origin":"config_file"},` +
		`{"name":"egress_allowlist","value":["b.example.com","c.example.com"],"origin":"environment"},` +
		`{"name":"max_log_disk_bytes","value":1073741824,"origin":"config_file"},` +
		`{"name":"min_security_score","value":50,"origin":"environment"}]`
	if string(b) != wantJSON {
		t.Errorf("entries JSON = %s, want %s", b, wantJSON)
	}

	saved := samplePolicy()
	saved.PublicSharing = "allowed"
	got := f.Apply(saved)
	want := saved.Clone()
	want.PublicSharing = "none"
	want.EgressAllowlist = []string{"b.example.com", "c.example.com"}
	want.MaxLogDiskBytes = 1 << 30
	want.MinSecurityScore = 50
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Apply() mismatch (-want +got):\n%s", diff)
	}
	if saved.PublicSharing != "allowed" || saved.EgressAllowlist[0] != "*.example.com" {
		t.Errorf("Apply changed its argument: %+v", saved)
	}
	// Neither Apply's result nor Entries alias the fixed values.
	got.EgressAllowlist[0] = "changed"
	f.Entries()[1].Value.([]string)[0] = "changed"
	if e, _ := f.Get("egress_allowlist"); e.Value.([]string)[0] != "b.example.com" {
		t.Errorf("fixed value changed through a returned slice: %v", e.Value)
	}
}

func TestParseSizeUnits(t *testing.T) {
	tests := []struct {
		raw  string
		want int64
	}{
		{"1b", 1}, {"1B", 1}, {"1k", 1000}, {"1KB", 1000}, {"1Ki", 1024}, {"1kib", 1024},
		{"1m", 1e6}, {"1MiB", 1 << 20}, {"1g", 1e9}, {"1GiB", 1 << 30}, {"1T", 1e12}, {"1TiB", 1 << 40},
		{"1P", 1e15}, {"1PiB", 1 << 50}, {".5k", 500}, {"0.25KiB", 256}, {"8191PiB", 8191 << 50},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := parseSize(tt.raw)
			if err != nil || got != tt.want {
				t.Errorf("parseSize(%q) = %d, %v, want %d", tt.raw, got, err, tt.want)
			}
		})
	}
	for _, raw := range []string{"", ".", "k", "1..5k", "1e3", "+5", "5 k b", "8192PiB", "1.k.", "１k"} {
		t.Run("bad/"+raw, func(t *testing.T) {
			if got, err := parseSize(raw); err == nil {
				t.Errorf("parseSize(%q) = %d, want an error", raw, got)
			}
		})
	}
}

func TestParseYAMLAgreesWithParseEnvOnStrings(t *testing.T) {
	for _, name := range Names() {
		for _, raw := range []string{"", "1", "true", "none", "app.exec, app.view", "5MiB", "x y"} {
			ev, eerr := ParseEnv(name, raw)
			yv, yerr := ParseYAML(name, raw)
			if (eerr == nil) != (yerr == nil) || !cmp.Equal(ev, yv) {
				t.Errorf("%s %q: ParseEnv = %#v, %v; ParseYAML = %#v, %v", name, raw, ev, eerr, yv, yerr)
			}
		}
	}
}

// TestEffectiveIsolation: an egress list raises an isolation minimum
// below sandbox to sandbox and leaves a stronger one as it is; without a
// list the minimum is the setting.
func TestEffectiveIsolation(t *testing.T) {
	for _, c := range []struct {
		min    string
		egress []string
		want   string
	}{
		{IsolationNone, nil, IsolationNone},
		{IsolationVM, nil, IsolationVM},
		{IsolationNone, []string{"api.example.com"}, IsolationSandbox},
		{IsolationSandbox, []string{"api.example.com"}, IsolationSandbox},
		{IsolationContainer, []string{"10.0.0.0/8"}, IsolationContainer},
	} {
		p := Default()
		p.EgressAllowlist = c.egress
		if got := p.EffectiveIsolation(c.min); got != c.want {
			t.Errorf("EffectiveIsolation(%s) with egress %v = %s, want %s", c.min, c.egress, got, c.want)
		}
	}
}
