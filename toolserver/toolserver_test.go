package toolserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/svchost/svc/api"
)

var (
	opGetApp = api.Operation{Name: "apps_get", Method: "GET", Path: "/api/v1/apps/{appID}", Summary: "Name, source, state", Verb: "app.view"}
	opDelete = api.Operation{Name: "apps_delete", Method: "DELETE", Path: "/api/v1/apps/{appID}", Summary: "Delete an app", Verb: "app.delete",
		Query: []api.QueryParam{{Name: "backup", Type: "boolean", Doc: "keep a copy"}}}
	opDeploy = api.Operation{Name: "deployments_create", Method: "POST", Path: "/api/v1/apps/{appID}/deployments", Summary: "Deploy a revision", Verb: "app.deploy",
		Idempotent: true, Body: json.RawMessage(`{"type":"object","properties":{"revision":{"type":"integer"}},"required":["revision"]}`)}
	opList = api.Operation{Name: "audit_list", Method: "GET", Path: "/api/v1/audit", Summary: "Audit log", Verb: "install.audit.read", Paging: "before",
		Query: []api.QueryParam{{Name: "action", Type: "string", Doc: "only this action"}, {Name: "command", Type: "string", Doc: "argv", Repeat: true}}}
	opUpload = api.Operation{Name: "source_upload", Method: "POST", Path: "/api/v1/apps/{appID}/source", Summary: "Upload a source archive", Verb: "app.spec.edit", Upload: "archive"}
)

func schemaOf(t *testing.T, tl *tool) map[string]any {
	t.Helper()
	s, ok := tl.def.InputSchema.(map[string]any)
	if !ok {
		t.Fatalf("%s: input schema is %T", tl.op.Name, tl.def.InputSchema)
	}
	return s
}

// TestInputSchemas: path parameters are required strings, query
// parameters typed (arrays when they repeat), paging by the operation's
// kind, body fields merged at the top level without the body's own
// "required" (the generator marks every field without omitempty, which
// says nothing of what a request must give), an upload's content and
// type; each a valid JSON Schema object.
func TestInputSchemas(t *testing.T) {
	tools, err := makeTools([]api.Operation{opGetApp, opDelete, opDeploy, opList, opUpload,
		{Name: "apps_exec", Method: "GET", Path: "/api/v1/apps/{appID}/exec", NoTool: "a terminal"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 5 {
		t.Fatalf("%d tools; want 5 (apps_exec has no tool)", len(tools))
	}
	want := map[string]struct {
		props    []string
		required []string
	}{
		"apps_get":           {[]string{"appID"}, []string{"appID"}},
		"apps_delete":        {[]string{"appID", "backup"}, []string{"appID"}},
		"deployments_create": {[]string{"appID", "idempotency_key", "revision"}, []string{"appID"}},
		"audit_list":         {[]string{"action", "before", "command", "limit"}, nil},
		"source_upload":      {[]string{"appID", "content_base64", "content_type"}, []string{"appID", "content_base64", "content_type"}},
	}
	for _, tl := range tools {
		s := schemaOf(t, tl)
		b, _ := json.Marshal(s)
		var js jsonschema.Schema
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatalf("%s: %v", tl.op.Name, err)
		}
		if _, err := js.Resolve(nil); err != nil || js.Type != "object" {
			t.Errorf("%s: not a valid object schema (%v): %s", tl.op.Name, err, b)
		}
		props := s["properties"].(map[string]any)
		var names []string
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		req, _ := s["required"].([]string)
		w := want[tl.op.Name]
		if !slices.Equal(names, w.props) || !slices.Equal(req, w.required) {
			t.Errorf("%s: properties %v required %v; want %v and %v", tl.op.Name, names, req, w.props, w.required)
		}
	}
	cmd := schemaOf(t, tools[3])["properties"].(map[string]any)["command"].(map[string]any)
	if cmd["type"] != "array" {
		t.Errorf("a repeated query parameter is %v; want an array", cmd)
	}
	if d := tools[0].def.Description; !strings.Contains(d, "GET /api/v1/apps/{appID}") || !strings.Contains(d, "app.view") {
		t.Errorf("description %q names neither the endpoint nor the verb", d)
	}
}

// TestArgumentCollision: a body field named as a path or query parameter
// makes no tool (the route table must resolve it), rather than one
// argument silently feeding two parts of the call.
func TestArgumentCollision(t *testing.T) {
	op := opDelete
	op.Method = "POST"
	op.Body = json.RawMessage(`{"type":"object","properties":{"backup":{"type":"boolean"}}}`)
	if _, err := makeTools([]api.Operation{op}); err == nil || !strings.Contains(err.Error(), `"backup"`) {
		t.Errorf("a body field named as a query parameter: %v; want an error naming it", err)
	}
	op.Body = json.RawMessage(`{"type":"object","properties":{"appID":{"type":"string"}}}`)
	if _, err := makeTools([]api.Operation{op}); err == nil {
		t.Error("a body field named as a path parameter made a tool")
	}
	if _, err := makeTools([]api.Operation{{Name: "apps_exec", Method: "GET", Path: "/x", Produces: "websocket"}}); err == nil {
		t.Error("a websocket operation without a no-tool reason made a tool")
	}
}

func TestAnnotations(t *testing.T) {
	for _, tc := range []struct {
		op                                api.Operation
		readOnly, destructive, idempotent bool
	}{
		{opGetApp, true, false, true},
		{opDelete, false, true, true},
		{opDeploy, false, true, true},
		{opUpload, false, false, false},
		{api.Operation{Name: "apps_stop", Method: "POST"}, false, true, false},
		{api.Operation{Name: "secrets_set", Method: "PUT"}, false, true, true},
		{api.Operation{Name: "apps_create", Method: "POST", Idempotent: true}, false, false, true},
	} {
		a := annotate(tc.op)
		destroys := a.DestructiveHint != nil && *a.DestructiveHint
		if a.ReadOnlyHint != tc.readOnly || destroys != tc.destructive || a.IdempotentHint != tc.idempotent || (!tc.readOnly && a.DestructiveHint == nil) {
			t.Errorf("%s: %+v; want read-only %v, destructive %v, idempotent %v", tc.op.Name, a, tc.readOnly, tc.destructive, tc.idempotent)
		}
		r := Refs([]api.Operation{tc.op})[0]
		if r.ReadOnly != tc.readOnly || r.Destructive != tc.destructive || r.Idempotent != tc.idempotent || r.Endpoint != tc.op.Method+" "+tc.op.Path {
			t.Errorf("%s: ref %+v disagrees", tc.op.Name, r)
		}
	}
}

func TestParseArguments(t *testing.T) {
	tools, err := makeTools([]api.Operation{opDeploy, opList, opUpload})
	if err != nil {
		t.Fatal(err)
	}
	dep, list, up := tools[0], tools[1], tools[2]
	c, err := dep.parse(json.RawMessage(`{"appID":"notes","revision":3,"idempotency_key":"k1"}`))
	if err != nil || c.path["appID"] != "notes" || string(c.body["revision"]) != "3" || c.idemKey != "k1" {
		t.Errorf("deployments_create: %+v %v", c, err)
	}
	if b := c.apiCall(true).Body; string(b) != `{"revision":3}` {
		t.Errorf("body %s", b)
	}
	if _, err := dep.parse(json.RawMessage(`{"revision":3}`)); err == nil || !strings.Contains(err.Error(), "appID") {
		t.Errorf("no appID: %v", err)
	}
	if _, err := dep.parse(json.RawMessage(`{"appID":"a","revison":3}`)); err == nil || !strings.Contains(err.Error(), "revison") {
		t.Errorf("an unknown argument: %v", err)
	}
	c, err = list.parse(json.RawMessage(`{"command":["ls","-l"],"limit":5,"before":"aud_1","action":null}`))
	if err != nil || !slices.Equal(c.query["command"], []string{"ls", "-l"}) || c.query.Get("limit") != "5" || c.query.Get("before") != "aud_1" || c.query.Has("action") {
		t.Errorf("audit_list: %v %v", c.query, err)
	}
	c, err = up.parse(json.RawMessage(`{"appID":"a","content_base64":"aGVsbG8=","content_type":"application/gzip"}`))
	if err != nil || string(c.upload) != "hello" {
		t.Errorf("source_upload: %q %v", c.upload, err)
	}
	if _, err := up.parse(json.RawMessage(`{"appID":"a","content_base64":"aGVsbG8=","content_type":"text/plain"}`)); err == nil {
		t.Error("an archive of type text/plain was taken")
	}
}

func text(t *testing.T, r *mcp.CallToolResult, i int) string {
	t.Helper()
	if len(r.Content) <= i {
		t.Fatalf("result has %d contents; want more than %d", len(r.Content), i)
	}
	tc, ok := r.Content[i].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %d is %T", i, r.Content[i])
	}
	return tc.Text
}

func TestShapeResults(t *testing.T) {
	refusal := shape(opGetApp, api.Answer{}, &api.Error{Status: 404, Code: "NOT_FOUND", Message: "no app x", Remedy: "list apps with apps_list", RequestID: "req_1"})
	if s := text(t, refusal, 0); !refusal.IsError || !strings.Contains(s, "NOT_FOUND: no app x") || !strings.Contains(s, "Remedy: list apps with apps_list") {
		t.Errorf("refusal: %v %q", refusal.IsError, s)
	}
	if m, _ := refusal.StructuredContent.(map[string]any); m["code"] != "NOT_FOUND" || m["request_id"] != "req_1" || m["remedy"] != "list apps with apps_list" {
		t.Errorf("refusal's structured content %v", refusal.StructuredContent)
	}

	done := shape(opDelete, api.Answer{Status: 204}, nil)
	if s := text(t, done, 0); done.IsError || !strings.HasPrefix(s, "Done: Delete an app") || !strings.Contains(s, "204") {
		t.Errorf("204: %q", s)
	}

	img := shape(opGetApp, api.Answer{Status: 200, ContentType: "image/png", Body: []byte("\x89PNG")}, nil)
	if ic, ok := img.Content[0].(*mcp.ImageContent); !ok || ic.MIMEType != "image/png" || string(ic.Data) != "\x89PNG" {
		t.Errorf("image: %#v", img.Content[0])
	}

	body := `{"app":{"id":"app_1","slug":"notes"}}`
	obj := shape(opGetApp, api.Answer{Status: 200, ContentType: "application/json", Body: []byte(body)}, nil)
	if text(t, obj, 0) != body || string(obj.StructuredContent.(json.RawMessage)) != body {
		t.Errorf("JSON object: %q, %v", text(t, obj, 0), obj.StructuredContent)
	}
	arr := shape(opGetApp, api.Answer{Status: 200, ContentType: "application/json", Body: []byte(`[1]`)}, nil)
	if arr.StructuredContent != nil {
		t.Errorf("a JSON array became structured content")
	}

	held := `{"deployment":{"id":"dep_1","app_id":"app_1","revision":2,"state":"waiting_approval","approvals_required":1,"approval_reasons":["revision 2 asks for 1 approval(s) before it deploys"],"approvals":[]}}`
	r := shape(opDeploy, api.Answer{Status: 202, ContentType: "application/json", Body: []byte(held)}, nil)
	note := text(t, r, 0)
	for _, want := range []string{"NOT DEPLOYED", "has NOT run", "revision 2 asks for 1 approval(s)", "0 of the 1", "app.deploy", "deployments_approve", "depID dep_1"} {
		if !strings.Contains(note, want) {
			t.Errorf("held deploy's note lacks %q: %s", want, note)
		}
	}
	if r.IsError || text(t, r, 1) != held {
		t.Errorf("held deploy: the API's answer must follow unchanged")
	}
	queued := strings.Replace(held, "waiting_approval", "queued", 1)
	if note := text(t, shape(opDeploy, api.Answer{Status: 202, Body: []byte(queued)}, nil), 0); !strings.Contains(note, "is queued") || strings.Contains(note, "NOT") {
		t.Errorf("queued deploy's note: %s", note)
	}
}

func TestTailBuffer(t *testing.T) {
	b := tailBuffer{max: 10}
	for _, l := range []string{"aaaa", "bbbb", "cccc"} {
		b.add(l)
	}
	if b.String() != "(1 earlier lines left out)\nbbbb\ncccc\n" {
		t.Errorf("%q", b.String())
	}
}

// TestInProcessStreams: the in-process transport hands the request to the
// handler with the origin's address, host and forwarding headers (and not
// the caller's), and the answer streams: the first event is read while the
// handler still waits to write the second.
func TestInProcessStreams(t *testing.T) {
	second := make(chan struct{})
	seen := make(chan *http.Request, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "event: log\ndata: one\n\n")
		w.(http.Flusher).Flush()
		<-second
		_, _ = io.WriteString(w, "event: end\ndata: two\n\n")
	})
	o := origin{token: "tok", remoteAddr: "192.0.2.1:1234", host: "svc.example", forwarded: http.Header{"X-Forwarded-For": {"198.51.100.7"}}}
	tr := &inProcess{h: h, o: o}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://in-process.invalid/api/v1/x?a=1", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := <-seen
	if r.RemoteAddr != o.remoteAddr || r.Host != "svc.example" || r.Header.Get("X-Forwarded-For") != "198.51.100.7" || r.URL.RawQuery != "a=1" {
		t.Errorf("the handler saw %s %s %v %s", r.RemoteAddr, r.Host, r.Header, r.URL)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("answer %d %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() { l, _ := br.ReadString('\n'); got <- l }()
	select {
	case l := <-got:
		if l != "event: log\n" {
			t.Errorf("first line %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event did not arrive while the handler was still writing")
	}
	close(second)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: two") {
		t.Errorf("rest %q", rest)
	}
}

// TestClientDefaults: a query parameter with a client default is sent when
// the caller gives neither it nor the parameter that excludes it
// (guarantee 4: deleting an app keeps a final backup unless force).
func TestClientDefaults(t *testing.T) {
	del := api.Operation{Name: "apps_delete", Method: "DELETE", Path: "/api/v1/apps/{appID}", Summary: "Delete an app", Verb: "app.delete",
		Query: []api.QueryParam{{Name: "backup", Type: "boolean", Doc: "keep a copy", Default: "true", DefaultUnless: "force"}, {Name: "force", Type: "boolean", Doc: "discard"}}}
	tools, err := makeTools([]api.Operation{del})
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"appID":"a"}`:                              "backup=true",
		`{"appID":"a","force":true}`:                 "force=true",
		`{"appID":"a","force":false}`:                "backup=true&force=false",
		`{"appID":"a","backup":false}`:               "backup=false",
		`{"appID":"a","backup":true,"force":true}`:   "backup=true&force=true",
		`{"appID":"a","backup":null,"force":"true"}`: "force=true",
	} {
		c, err := tools[0].parse(json.RawMessage(args))
		if err != nil || c.query.Encode() != want {
			t.Errorf("%s: query %q, %v; want %q", args, c.query.Encode(), err, want)
		}
	}
	if d := schemaOf(t, tools[0])["properties"].(map[string]any)["backup"].(map[string]any)["description"]; !strings.Contains(d.(string), "true unless force") {
		t.Errorf("backup's description %q does not say its default", d)
	}
}
