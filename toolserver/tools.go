package toolserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/svchost/svc/api"
)

// Where an argument of a tool goes in the API call.
type place int

const (
	inPath place = iota
	inQuery
	inBody
	inUpload      // content_base64: the raw body
	inContentType // content_type: the raw body's Content-Type
	inIdemKey     // idempotency_key: the Idempotency-Key header
)

// Argument names that are not the API's own.
const (
	argContent     = "content_base64"
	argContentType = "content_type"
	argIdemKey     = "idempotency_key"
)

// tool is one operation as a tool: its definition and where each of its
// arguments goes.
type tool struct {
	op     api.Operation
	def    *mcp.Tool
	places map[string]place
	// repeat names the query parameters that may be given more than once.
	repeat map[string]bool
}

// archiveTypes are the content types of a source archive.
var archiveTypes = []string{"application/gzip", "application/x-tar", "application/zip"}

// makeTools makes one tool per operation that has one (NoTool empty). An
// operation it cannot describe (a websocket, an argument whose name two
// parts of the call share) is an error: the route table must say why an
// operation has no tool instead.
func makeTools(ops []api.Operation) ([]*tool, error) {
	var out []*tool
	seen := map[string]bool{}
	for _, op := range ops {
		if op.NoTool != "" {
			continue
		}
		if seen[op.Name] {
			return nil, fmt.Errorf("toolserver: two operations are named %s", op.Name)
		}
		seen[op.Name] = true
		t, err := makeTool(op)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func makeTool(op api.Operation) (*tool, error) {
	if op.Produces == "websocket" {
		return nil, fmt.Errorf("toolserver: %s answers with a websocket, which no tool speaks: give it a no-tool reason", op.Name)
	}
	t := &tool{op: op, places: map[string]place{}, repeat: map[string]bool{}}
	props := map[string]any{}
	var required []string
	add := func(name string, p place, schema map[string]any) error {
		if _, dup := t.places[name]; dup {
			return fmt.Errorf("toolserver: %s: argument %q would be both %s and %s", op.Name, name, placeName(t.places[name]), placeName(p))
		}
		t.places[name] = p
		props[name] = schema
		return nil
	}
	for _, p := range op.PathParams() {
		if err := add(p, inPath, map[string]any{"type": "string", "minLength": 1, "description": pathDoc(p)}); err != nil {
			return nil, err
		}
		required = append(required, p)
	}
	for _, q := range op.Query {
		s := map[string]any{"type": q.Type, "description": q.Doc}
		switch {
		case q.Default != "" && q.DefaultUnless != "":
			s["description"] = fmt.Sprintf("%s (sent as %s unless %s is given)", q.Doc, q.Default, q.DefaultUnless)
		case q.Default != "":
			s["description"] = fmt.Sprintf("%s (sent as %s when not given)", q.Doc, q.Default)
		}
		if q.Repeat {
			s = map[string]any{"type": "array", "items": map[string]any{"type": q.Type}, "description": q.Doc + " (one or more)"}
			t.repeat[q.Name] = true
		}
		if err := add(q.Name, inQuery, s); err != nil {
			return nil, err
		}
	}
	for _, p := range pagingArgs(op.Paging) {
		if err := add(p.name, inQuery, p.schema); err != nil {
			return nil, err
		}
	}
	if op.Idempotent {
		if err := add(argIdemKey, inIdemKey, map[string]any{"type": "string", "maxLength": 255,
			"description": "Sent as Idempotency-Key: a retry with the same key within 24 hours replays the first answer instead of doing it twice"}); err != nil {
			return nil, err
		}
	}
	switch op.Upload {
	case "":
	case "archive", "image":
		what := "the source archive (tar.gz, tar or zip)"
		ct := map[string]any{"type": "string", "enum": archiveTypes, "description": "the archive's type: application/gzip (tar.gz), application/x-tar or application/zip"}
		if op.Upload == "image" {
			what = "the image (PNG, JPEG, WebP or GIF, at most 256 KB; told by its content)"
			ct = map[string]any{"type": "string", "description": "the image's media type, such as image/png (optional: the server reads the type from the content)"}
		}
		if err := add(argContent, inUpload, map[string]any{"type": "string", "contentEncoding": "base64", "description": what + ", base64-encoded"}); err != nil {
			return nil, err
		}
		if err := add(argContentType, inContentType, ct); err != nil {
			return nil, err
		}
		required = append(required, argContent)
		if op.Upload == "archive" {
			required = append(required, argContentType)
		}
	default:
		return nil, fmt.Errorf("toolserver: %s: unknown upload kind %q", op.Name, op.Upload)
	}
	if len(op.Body) > 0 {
		var body struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(op.Body, &body); err != nil || body.Type != "object" {
			return nil, fmt.Errorf("toolserver: %s: the request body's schema is not an object (%v)", op.Name, err)
		}
		names := make([]string, 0, len(body.Properties))
		for name := range body.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			var s map[string]any
			if err := json.Unmarshal(body.Properties[name], &s); err != nil {
				return nil, fmt.Errorf("toolserver: %s: body field %s: %w", op.Name, name, err)
			}
			if err := add(name, inBody, s); err != nil {
				return nil, err
			}
		}
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	t.def = &mcp.Tool{
		Name:        op.Name,
		Description: describe(op),
		InputSchema: schema,
		Annotations: annotate(op),
	}
	return t, nil
}

func placeName(p place) string {
	switch p {
	case inPath:
		return "a path parameter"
	case inQuery:
		return "a query parameter"
	case inBody:
		return "a body field"
	}
	return "an argument of the tool's own"
}

// pathDoc describes a path parameter.
func pathDoc(name string) string {
	switch name {
	case "appID":
		return "the app's ID or slug"
	case "depID":
		return "the deployment's ID"
	case "rev", "a", "b":
		return "a spec revision number"
	case "key":
		return "the key (a secret's or a slot's name)"
	}
	return "the " + strings.TrimSuffix(name, "ID") + "'s ID"
}

type namedSchema struct {
	name   string
	schema map[string]any
}

// pagingArgs are the arguments of a list's paging.
func pagingArgs(paging string) []namedSchema {
	limit := namedSchema{"limit", map[string]any{"type": "integer", "minimum": 1, "description": "items per page (the server's default unless asked; a larger value than it allows is clamped)"}}
	switch paging {
	case "cursor":
		return []namedSchema{limit, {"cursor", map[string]any{"type": "string", "description": "next_cursor of the previous page, unchanged; leave out for the first page"}}}
	case "before":
		return []namedSchema{limit, {"before", map[string]any{"type": "string", "description": "next_before of the previous page (the ID of the last entry seen); leave out for the newest"}}}
	}
	return nil
}

// describe is a tool's description: what the operation does, the endpoint
// it calls and the verb it needs, and what a model needs to act on it.
func describe(op api.Operation) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(op.Summary, "."))
	b.WriteString(".\n\nCalls " + op.Method + " " + op.Path + ". ")
	switch {
	case op.Public:
		b.WriteString("Needs no credential.")
	case op.Verb == "":
		b.WriteString("Any signed-in caller may call it.")
	case strings.HasPrefix(op.Verb, "app."):
		b.WriteString("Needs the verb " + op.Verb + " on the app (an app the caller cannot see is NOT_FOUND).")
	default:
		b.WriteString("Needs the installation verb " + op.Verb + ".")
	}
	if op.Paging != "" {
		b.WriteString(" Answers one page: pass the answer's next_" + op.Paging + " as " + op.Paging + " for the next; none means the last page.")
	}
	if len(op.Body) > 0 {
		b.WriteString(" The request body's fields are arguments at the top level.")
	}
	if op.Upload != "" {
		b.WriteString(" The raw body is content_base64 (base64), sent with content_type.")
	}
	switch op.Name {
	case "deployments_create", "deployments_approve":
		b.WriteString(" A revision whose spec asks for approvals does not deploy until someone other than the requester holding app.deploy approves it (deployments_approve); the result says so when the deploy waits. Otherwise the deploy runs behind the answer: follow it with deployments_logs or deployments_get.")
	case "deployments_logs":
		b.WriteString(" The tool collects the log until the deploy ends (at most about a minute and the last 256 KiB), then says how it ended, or that it still runs.")
	case "apps_get_icon":
		b.WriteString(" Answers the image.")
	}
	b.WriteString(" A refusal is a tool error with the API's code, message and remedy.")
	return b.String()
}

// destructive are the operations besides DELETE that may destroy or
// interrupt something a call cannot simply give back: they stop or replace
// what runs (apps_stop, apps_restart, deployments_create and _rollback
// replace or interrupt the running release; deployments_reject ends a
// deploy for good; server_restart makes every app unreachable for seconds),
// overwrite a value whose old one is lost (secrets_set, policy_set,
// slots_fill, adapters_configure, groups_set_members, a password reset or
// change, which also ends sessions), or change what every sealed value or
// every app's verification of identity depends on (keyring_rotate,
// edge_keys_rotate). Everything else that writes only adds or changes in a
// way the same tools can undo.
var destructive = map[string]bool{
	"apps_stop": true, "apps_restart": true, "deployments_create": true, "deployments_rollback": true,
	"deployments_reject": true, "server_restart": true, "secrets_set": true, "policy_set": true,
	"slots_fill": true, "adapters_configure": true, "groups_set_members": true,
	"users_reset_password": true, "me_set_password": true, "keyring_rotate": true, "edge_keys_rotate": true,
}

// hints are an operation's annotations: read-only for GET, destructive for
// DELETE and the operations above, idempotent for GET, PUT, DELETE and
// those that honour Idempotency-Key.
func hints(op api.Operation) (readOnly, destroys, idempotent bool) {
	readOnly = op.Method == http.MethodGet
	destroys = op.Method == http.MethodDelete || destructive[op.Name]
	idempotent = readOnly || op.Method == http.MethodPut || op.Method == http.MethodDelete || op.Idempotent
	return readOnly, destroys, idempotent
}

func annotate(op api.Operation) *mcp.ToolAnnotations {
	readOnly, destroys, idempotent := hints(op)
	a := &mcp.ToolAnnotations{ReadOnlyHint: readOnly, IdempotentHint: idempotent}
	if !readOnly {
		a.DestructiveHint = &destroys
	}
	return a
}

// Ref describes one tool for the reference: the endpoint it calls and its
// annotations.
type Ref struct {
	Name        string
	Summary     string
	Endpoint    string // "GET /api/v1/apps"
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
}

// Refs lists the tools the operations make, in their order.
func Refs(ops []api.Operation) []Ref {
	var out []Ref
	for _, op := range ops {
		if op.NoTool != "" {
			continue
		}
		readOnly, destroys, idempotent := hints(op)
		out = append(out, Ref{Name: op.Name, Summary: op.Summary, Endpoint: op.Method + " " + op.Path,
			ReadOnly: readOnly, Destructive: destroys, Idempotent: idempotent})
	}
	return out
}
