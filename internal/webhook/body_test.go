package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/notify"
)

func TestEnvelope(t *testing.T) {
	ev := testEvent("evt_01")
	ev.OccurredAt = ev.OccurredAt.In(time.FixedZone("CEST", 2*3600))
	got, err := Envelope(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"evt_01","type":"deploy.failed","occurred_at":"2025-06-07T08:09:10.123Z",` +
		`"app":{"id":"app_01JB4R3Q8S2W5Y7Z9A1C3E5G7J","name":"Shop <&> \"front\"","slug":"shop"},` +
		`"actor":{"kind":"user","id":"usr_01JB4R3Q8S2W5Y7Z9A1C3E5G7K"},` +
		`"data":{"deployment_id":"dep_01JB4R3Q8S2W5Y7Z9A1C3E5G7M","error_code":"BUILD_FAILED","message":"step 3/7: exit status 1","spec_id":"spec_01JB4R3Q8S2W5Y7Z9A1C3E5G7N","trigger":"push"}}`
	if string(got) != want {
		t.Errorf("Envelope =\n%s\nwant\n%s", got, want)
	}
	for range 50 { // map order never shows
		again, _ := Envelope(ev)
		if string(again) != string(got) {
			t.Fatalf("Envelope is not deterministic:\n%s\n%s", got, again)
		}
	}
	got, _ = Envelope(&events.Event{ID: "evt_2", Type: "policy.updated", OccurredAt: time.Unix(0, 0), Actor: events.Actor{Kind: "system"}})
	if want := `{"id":"evt_2","type":"policy.updated","occurred_at":"1970-01-01T00:00:00Z","actor":{"kind":"system"},"data":{}}`; string(got) != want {
		t.Errorf("an install event without data: %s, want %s", got, want)
	}
	if _, err := Envelope(nil); err == nil {
		t.Error("Envelope(nil) gave no error")
	}
	if _, err := Envelope(&events.Event{Data: map[string]any{"c": make(chan int)}}); err == nil {
		t.Error("an event that is not JSON gave no error")
	}
}

// render1 renders a template for one event the way Send would.
func render1(t *testing.T, tmpl string, ev *events.Event) string {
	t.Helper()
	b, err := Body(Request{Template: tmpl, ContentType: "text/plain", Event: ev, ConsoleURL: "https://svc.example.com/"})
	if err != nil {
		t.Fatalf("template %q: %v", tmpl, err)
	}
	return string(b)
}

func TestTemplateVariables(t *testing.T) {
	ev := testEvent("evt_v")
	m := notify.Render(ev, "https://svc.example.com/")
	var fields strings.Builder
	for _, f := range m.Fields {
		fmt.Fprintf(&fields, "%s=%s;", f.Name, f.Value)
	}
	tests := []struct{ tmpl, want string }{
		{"{{.ID}} {{.Type}} {{.OccurredAt}}", "evt_v deploy.failed 2025-06-07T08:09:10.123Z"},
		{"{{.App.ID}}|{{.App.Name}}|{{.App.Slug}}", "app_01JB4R3Q8S2W5Y7Z9A1C3E5G7J|Shop <&> \"front\"|shop"},
		{"{{.Actor.Kind}} {{.Actor.ID}}", "user usr_01JB4R3Q8S2W5Y7Z9A1C3E5G7K"},
		{"{{.Data.trigger}} {{.Data.error_code}}", "push BUILD_FAILED"},
		{"{{.Subject}}", m.Subject},
		{"{{.Body}}", m.Body},
		{"{{range .Fields}}{{.Name}}={{.Value}};{{end}}", fields.String()},
		{"{{.Link}}", "https://svc.example.com/apps/app_01JB4R3Q8S2W5Y7Z9A1C3E5G7J/deploys"},
		{"{{.Envelope.id}} {{.Envelope.app.slug}} {{.Envelope.data.trigger}}", "evt_v shop push"},
		{`{{json .Data.message}}`, `"step 3/7: exit status 1"`},
		{`{{json .App.Name}}`, `"Shop <&> \"front\""`},
		{`{{.App.Name | json}}`, `"Shop <&> \"front\""`},
		{`{{default "none" .Data.nope}} {{default "none" .Data.trigger}} {{.Data.nope | default "piped"}}`, "none push piped"},
		{`{{len .Fields}} {{index .Data "trigger"}} {{slice .Data.trigger 0 2}}`, "5 push pu"},
		{`{{printf "%s/%s" .Type .Data.trigger}} {{print .Type 1}} {{println "x"}}`, "deploy.failed/push deploy.failed1 x\n"},
		{`{{html .App.Name}} {{js "a'b"}} {{urlquery "a b&c"}}`, `Shop &lt;&amp;&gt; &#34;front&#34; a\'b a+b%26c`},
		{`{{if eq .Data.trigger "push" "manual"}}yes{{end}} {{if ne .Type "x"}}ne{{end}} {{if and .App (not .Data.nope)}}and{{end}}`, "yes ne and"},
		{`{{/* a comment */}}{{with .App}}{{.Slug}}{{end}}{{with .Data.nope}}x{{else}}none{{end}}`, "shopnone"},
		{`{{range $i, $f := .Fields}}{{if ge $i 3}}{{break}}{{end}}{{$i}}{{end}}`, "012"},
		{`{{$t := .Type}}{{range .Fields}}{{$t}}{{break}}{{end}}`, "deploy.failed"},
	}
	for _, tt := range tests {
		if got := render1(t, tt.tmpl, ev); got != tt.want {
			t.Errorf("%s\n got %q\nwant %q", tt.tmpl, got, tt.want)
		}
	}
	// {{json .Envelope}} is the standard body (keys sorted, same JSON).
	var a, b any
	body, _ := Envelope(ev)
	_ = json.Unmarshal(body, &a)
	if err := json.Unmarshal([]byte(render1(t, "{{json .Envelope}}", ev)), &b); err != nil || !reflect.DeepEqual(a, b) {
		t.Errorf("{{json .Envelope}} is not the envelope: %v", err)
	}
}

// TestTemplateValues: numbers are float64 and read as numbers, compare with
// integer literals, and are never an integer to range over; missing fields
// render as nothing at any depth.
func TestTemplateValues(t *testing.T) {
	ev := testEvent("evt_n")
	ev.Data = map[string]any{"used_bytes": 1500000000, "limit_bytes": 2e9, "over": false, "ratio": 0.75, "critical": 0,
		"reasons": []any{"a", "b"}, "obj": map[string]any{"k": "v"}, "nothing": nil, "empty": ""}
	tests := []struct{ tmpl, want string }{
		{"{{.Data.used_bytes}} {{.Data.limit_bytes}} {{.Data.ratio}} {{.Data.critical}}", "1500000000 2000000000 0.75 0"},
		{"{{print .Data.used_bytes}} {{printf \"%v|%.1f\" .Data.limit_bytes .Data.ratio}}", "1500000000 2000000000|0.8"},
		{"{{if gt .Data.used_bytes 1e9}}big{{end}} {{if lt .Data.critical 1}}none{{end}} {{if eq .Data.critical 0}}zero{{end}}", "big none zero"},
		{"{{if eq .Data.used_bytes 1500000000.0}}same{{end}} {{if le .Data.ratio 0.75}}le{{end}}", "same le"},
		{"{{.Data.over}} {{default \"x\" .Data.over}} {{default \"x\" .Data.critical}} {{default \"x\" .Data.empty}} {{default \"x\" .Data.nothing}}", "false false 0 x x"},
		{"{{range .Data.reasons}}[{{.}}]{{end}} {{.Data.obj.k}} {{json .Data.obj}}", `[a][b] v {"k":"v"}`},
		{"<{{.Data.missing}}><{{.Data.missing.deeper.still}}><{{.Data.nothing}}><{{.Nope}}><{{.Data.obj.nope}}>", "<><><><><>"},
		{"{{json .Data.missing}} {{json .Data.nothing}} {{print .Data.missing}}|{{printf \"%s\" .Data.missing}}", "null null |"},
		{"{{if eq .Data.missing nil}}nil{{end}} {{if not .Data.missing}}falsy{{end}} {{range .Data.missing}}x{{else}}empty{{end}}", "nil falsy empty"},
	}
	for _, tt := range tests {
		got := render1(t, tt.tmpl, ev)
		if got != tt.want {
			t.Errorf("%s\n got %q\nwant %q", tt.tmpl, got, tt.want)
		}
		if strings.Contains(got, "no value") {
			t.Errorf("%s printed %q", tt.tmpl, got)
		}
	}
	// An install event has no .App: it renders as nothing, and if is false.
	if got := render1(t, `<{{.App.Name}}>{{if .App}}app{{else}}install{{end}}{{json .App}}`, installEvent("evt_i")); got != "<>installnull" {
		t.Errorf("an install event: %q", got)
	}
	// A comparison of a number with a string is an error, not a guess.
	if _, err := Body(Request{Template: `{{eq .Data.used_bytes "1"}}`, ContentType: "text/plain", Event: ev}); err == nil {
		t.Error("eq of a number with a string gave no error")
	}
}

// TestSlackExample renders the docs' Slack-style template.
func TestSlackExample(t *testing.T) {
	tmpl := `{
  "text": {{json .Subject}},
  "blocks": [
    {"type": "section", "text": {"type": "mrkdwn", "text": {{json (printf "*%s*\n%s" .Subject .Body)}}}},
    {"type": "context", "elements": [{{range $i, $f := .Fields}}{{if $i}},{{end}}{"type": "mrkdwn", "text": {{json (printf "%s: %s" $f.Name $f.Value)}}}{{end}}]}{{if .Link}},
    {"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Open in svc"}, "url": {{json .Link}}}]}{{end}}
  ]
}`
	if err := CheckTemplate(tmpl, "application/json"); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []*events.Event{testEvent("evt_s"), installEvent("evt_t")} {
		for _, console := range []string{"", "https://svc.example.com"} {
			b, err := Body(Request{Template: tmpl, Event: ev, ConsoleURL: console})
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Text   string `json:"text"`
				Blocks []struct {
					Type     string           `json:"type"`
					Elements []map[string]any `json:"elements"`
				} `json:"blocks"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			m := notify.Render(ev, console)
			if v.Text != m.Subject || len(v.Blocks[1].Elements) != len(m.Fields) || (len(v.Blocks) == 3) != (console != "") {
				t.Errorf("Slack body for %s (console %q): %s", ev.Type, console, b)
			}
		}
	}
}

// bigEvent carries a list of 100 items.
func bigEvent() *events.Event {
	ev := testEvent("evt_big")
	var reasons []any
	for i := range 100 {
		reasons = append(reasons, fmt.Sprintf("reason %d", i))
	}
	ev.Type = "deploy.waiting_approval"
	ev.Data = map[string]any{"reasons": reasons, "trigger": "push", "message": `a "quoted" word`}
	return ev
}

const tenWide = `{{printf "%1000d%1000d%1000d%1000d%1000d%1000d%1000d%1000d%1000d%1000d" 1 2 3 4 5 6 7 8 9 10}}`

// hostile are templates written to stall, crash or flood: each is refused
// when saved ("save"), or passes the sample event and is cut off when
// rendering an event that makes it go wrong ("render"). says lists what
// the refusal may say, "|" between; the ones that do much work before
// reaching their limit may be cut off by the clock first on a slow
// machine.
var hostile = []struct {
	name, tmpl, ct string
	stage, says    string
}{
	{"range over a number", `{{range 1000000000}}x{{end}}`, "", "save", "range goes only over a field"},
	{"range over a small number", `{{range 5}}x{{end}}`, "", "save", "range goes only over a field"},
	{"range over a variable", `{{$n := len .Body}}{{range $n}}x{{end}}`, "", "save", "range goes only over a field"},
	{"range over dot set by with", `{{with len .Body}}{{range .}}x{{end}}{{end}}`, "", "save", "range goes only over a field"},
	{"range over a function", `{{range (len .Body)}}x{{end}}`, "", "save", "range goes only over a field"},
	{"range over a pipeline", `{{range .Body | len}}x{{end}}`, "", "save", "range goes only over a field"},
	{"range with declarations over a number", `{{range $i, $e := 100}}x{{end}}`, "", "save", "range goes only over a field"},
	{"a big integer", `{{$n := 20000}}{{$n}}`, "text/plain", "save", "at most 10000"},
	{"a big integer in hex", `{{print 0x10000}}`, "text/plain", "save", "at most 10000"},
	{"a big character", `{{print '\U0010FFFF'}}`, "text/plain", "save", "at most 10000"},
	{"ranges nested four deep", `{{range .Fields}}{{range $.Fields}}{{range $.Fields}}{{range $.Fields}}x{{end}}{{end}}{{end}}{{end}}`, "text/plain", "save", "nest at most 3"},
	{"recursion through define", `{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`, "", "save", "one template"},
	{"recursion into itself", `x{{template "payload" .}}`, "", "save", "may not call a template"},
	{"recursion by redefining itself", `{{define "payload"}}{{template "payload" .}}{{end}}`, "", "save", "may not call a template"},
	{"block", `{{block "b" .}}{{template "b" .}}{{end}}`, "", "save", "one template"},
	{"huge output", `{{range .Fields}}{{range $.Fields}}{{range $.Fields}}` + tenWide + `{{end}}{{end}}{{end}}`, "text/plain", "save", "larger than 256 KiB|rendering took longer than 1s"},
	{"printf width", `{{printf "%100000d" 1}}`, "text/plain", "save", "at most 1000"},
	{"printf width from an argument", `{{printf "%*d" 1000 1}}`, "text/plain", "save", "(*)"},
	{"printf widths adding up", `{{printf "` + strings.Repeat("%1000d", 17) + `"}}`, "text/plain", "save", "add up"},
	{"js doubling", `{{$x := "\\"}}{{range .Fields}}{{range $.Fields}}{{range $.Fields}}{{$x = js $x}}{{end}}{{end}}{{end}}{{$x}}`, "text/plain", "save", "larger than 64 KiB|rendering took longer than 1s"},
	{"json doubling", `{{$x := "\""}}{{range .Fields}}{{range $.Fields}}{{$x = json $x}}{{end}}{{end}}{{$x}}`, "text/plain", "save", "larger than 64 KiB|rendering took longer than 1s"},
	{"function output piling up", `{{range .Fields}}{{range $.Fields}}{{range $.Fields}}{{$x := json $.Envelope}}{{$y := printf "%1000d%1000d%1000d%1000d%1000d%1000d%1000d%1000d" 1 2 3 4 5 6 7 8}}{{end}}{{end}}{{end}}`, "text/plain", "save", "more than 1024 KiB in all|rendering took longer than 1s"},
	{"a source over 64 KiB", strings.Repeat("x", MaxTemplateBytes+1), "text/plain", "save", "longer than 64 KiB"},
	{"an unknown function", `{{exec "rm -rf /"}}`, "", "save", `"exec" not defined`},
	{"index out of range", `{{index .Fields 99}}`, "text/plain", "save", "out of range"},
	{"slice out of range", `{{slice .Body 10 2}}`, "text/plain", "save", "slice"},
	{"call of data", `{{call .Data.message}}`, "text/plain", "save", "call"},
	{"a field of a string", `{{.Data.message.x}}`, "text/plain", "save", "can't evaluate field"},
	{"not JSON", `{"text": "{{.Body}}"`, "application/json", "save", "not JSON"},
	{"not JSON, +json type", `text`, "application/vnd.x+json", "save", "not JSON"},
	{"empty output for JSON", `{{if .Data.nope}}{}{{end}}`, "", "save", "not JSON"},
	{"a million loop iterations", `{{range .Data.reasons}}{{range $.Data.reasons}}{{range $.Data.reasons}}{{end}}{{end}}{{end}}`, "text/plain", "render", "more than 100000 loop iterations|rendering took longer than 1s"},
	{"quotes break naive JSON", `{"text": "{{.Data.message}}"}`, "application/json", "render", "not JSON"},
	{"output growing with the event", `{{range .Data.reasons}}{{range $.Data.reasons}}` + tenWide + `{{end}}{{end}}`, "text/plain", "render", "larger than 256 KiB|rendering took longer than 1s"},
}

// saysOneOf reports whether msg contains one of the "|"-separated says.
func saysOneOf(msg, says string) bool {
	return slices.ContainsFunc(strings.Split(says, "|"), func(s string) bool { return strings.Contains(msg, s) })
}

func TestHostileTemplates(t *testing.T) {
	rc := newReceiver(t, nil)
	s := open(t, Options{Timeout: 5 * time.Second})
	for _, h := range hostile {
		t.Run(h.name, func(t *testing.T) {
			var saveErr error
			var res Result
			within(t, 10*time.Second, "checking and sending "+h.name, func() {
				saveErr = CheckTemplate(h.tmpl, h.ct)
				res = s.Send(bg, Request{URL: rc.URL, Keys: []string{"whsec_k"}, Template: h.tmpl, ContentType: h.ct, Event: bigEvent()})
			})
			t.Logf("saved: %v; sent: %s", saveErr, res.Error)
			switch h.stage {
			case "save":
				if e := invalidField(t, saveErr, "payload_template"); e != nil && !saysOneOf(e.Message, h.says) {
					t.Errorf("refused with %q, want it to say %q", e.Message, h.says)
				}
			case "render":
				if saveErr != nil {
					t.Fatalf("refused when saved: %v", saveErr)
				}
				if !saysOneOf(res.Error, h.says) {
					t.Errorf("sent: %+v, want an error saying %q", res, h.says)
				}
			}
			if res.Delivered() || res.StatusCode != 0 || !strings.HasPrefix(res.Error, "the payload template") {
				t.Errorf("sent: %+v, want a failure of the template", res)
			}
		})
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests from hostile templates", n)
	}
}

// TestHostileTemplatesConcurrently: the whole hostile batch, eight times at
// once, checked and sent together, finishes in bounded time; a plain
// delivery still goes through at once afterwards.
func TestHostileTemplatesConcurrently(t *testing.T) {
	rc := newReceiver(t, nil)
	s := open(t, Options{Timeout: 5 * time.Second})
	start := time.Now()
	within(t, 60*time.Second, "the hostile batch", func() {
		var wg sync.WaitGroup
		for range 8 {
			for _, h := range hostile {
				wg.Go(func() {
					_ = CheckTemplate(h.tmpl, h.ct)
					if r := s.Send(bg, Request{URL: rc.URL, Keys: []string{"whsec_k"}, Template: h.tmpl, ContentType: h.ct, Event: bigEvent()}); r.Delivered() {
						t.Errorf("%s was delivered", h.name)
					}
				})
			}
		}
		wg.Wait()
	})
	t.Logf("%d hostile templates checked and sent concurrently in %s", 8*len(hostile), time.Since(start).Round(time.Millisecond))
	r := s.Send(bg, Request{URL: rc.URL, Keys: []string{"whsec_k"}, Event: testEvent("evt_after")})
	if !r.Delivered() || r.Duration > 5*time.Second {
		t.Errorf("a plain delivery after the batch: %+v", r)
	}
}

// TestRenderBounds: a function that stalls is abandoned at the render
// deadline; one that panics is an error; neither takes the process down.
func TestRenderBounds(t *testing.T) {
	data, err := templateData(testEvent("evt_b"), "")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	extra := map[string]any{
		"stall": func() string { <-release; return "" },
		"boom":  func() string { panic("boom") },
		"nilmap": func() string {
			var m map[string]int
			m["x"] = 1
			return ""
		},
	}
	start := time.Now()
	if _, err := render(`{{stall}}`, data, extra); err != errSlow {
		t.Errorf("a stalling function: %v, want %v", err, errSlow)
	}
	if d := time.Since(start); d < renderTimeout || d > renderTimeout+3*time.Second {
		t.Errorf("the stalling render returned after %s, want about %s", d, renderTimeout)
	}
	for _, src := range []string{`{{boom}}`, `{{nilmap}}`, `{{range .Fields}}{{boom}}{{end}}`} {
		if _, err := render(src, data, extra); err == nil || !strings.Contains(err.Error(), "error calling") {
			t.Errorf("%s: %v, want an error", src, err)
		}
	}
}
