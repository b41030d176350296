package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Operation describes one endpoint of the API for clients that are made
// from descriptions: the CLI's `svc <resource> <verb>` commands and the
// tool server's `<resource>_<verb>` tools. The server's binary lists them
// from the table that registers its routes, so they are what it serves.
type Operation struct {
	// Name is <resource>_<verb>: apps_list.
	Name    string `json:"name"`
	Method  string `json:"method"`
	Path    string `json:"path"` // /api/v1/apps/{appID}
	Summary string `json:"summary"`
	// Verb is the verb a caller needs ("" for any signed-in caller);
	// Public operations need no credential.
	Verb   string `json:"verb,omitempty"`
	Public bool   `json:"public,omitempty"`
	// Paging of a list: "cursor" (limit, cursor; next_cursor), "before"
	// (limit, before; next_before) or "".
	Paging string `json:"paging,omitempty"`
	// Idempotent operations honour Idempotency-Key.
	Idempotent bool         `json:"idempotent,omitempty"`
	Query      []QueryParam `json:"query,omitempty"`
	// Body is the JSON Schema of the JSON request body; nil when there is
	// none.
	Body json.RawMessage `json:"body,omitempty"`
	// Upload is the kind of a raw request body: "binary" (an svc binary,
	// POST /api/v1/upgrade), "archive" (tar.gz, tar or
	// zip) or "image"; "" when the body, if any, is JSON.
	Upload string `json:"upload,omitempty"`
	// Produces is what a success answers when it is not JSON:
	// "text/event-stream", "image", "websocket".
	Produces string `json:"produces,omitempty"`
	// NoTool and NoCommand say why the operation has no tool or no CLI
	// command.
	NoTool    string `json:"no_tool,omitempty"`
	NoCommand string `json:"no_command,omitempty"`
}

// QueryParam is a query parameter an operation reads: its JSON Schema type
// (string, integer or boolean), and Repeat when it may be given more than
// once.
type QueryParam struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Doc    string `json:"doc"`
	Repeat bool   `json:"repeat,omitempty"`
	// Default is what clients (the CLI, the tool server) send when the
	// caller gives neither this parameter nor DefaultUnless; the API
	// itself takes no default. Guarantee 4: a tool or the CLI keeps a
	// final backup of an app it deletes unless told to discard it.
	Default       string `json:"default,omitempty"`
	DefaultUnless string `json:"default_unless,omitempty"`
}

// Resource and Verb split Name: deployments_create is deployments and
// create; edge_keys_list is edge_keys and list.
func (o Operation) Resource() string {
	r, _ := o.split()
	return r
}

// Verb is the verb part of Name (create, set_role).
func (o Operation) VerbName() string {
	_, v := o.split()
	return v
}

// resources are the operation names' resources of more than one word.
var resources = []string{"edge_keys", "raft_probes"}

func (o Operation) split() (string, string) {
	for _, r := range resources {
		if v, ok := strings.CutPrefix(o.Name, r+"_"); ok {
			return r, v
		}
	}
	r, v, _ := strings.Cut(o.Name, "_")
	return r, v
}

// PathParams are the names of the path's parameters, in order: appID,
// depID for /api/v1/apps/{appID}/deployments/{depID}.
func (o Operation) PathParams() []string {
	var out []string
	for _, part := range strings.Split(o.Path, "/") {
		if strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}") {
			out = append(out, part[1:len(part)-1])
		}
	}
	return out
}

// Call is one call of an operation.
type Call struct {
	// Path holds every path parameter by name.
	Path map[string]string
	// Query holds query parameters, paging's included.
	Query url.Values
	// Body is the JSON body; nil for none.
	Body json.RawMessage
	// Upload is a raw body of the operation's Upload kind, sent with
	// ContentType.
	Upload      io.Reader
	ContentType string
	// IdempotencyKey, when set, makes a retry replay the first answer.
	IdempotencyKey string
}

// Answer is an operation's answer as it came: its status, content type and
// bytes (the API's JSON unchanged; empty for 204).
type Answer struct {
	Status      int
	ContentType string
	RequestID   string
	Body        []byte
}

// Do calls op. A refusal is an *Error.
func (c *Client) Do(ctx context.Context, op Operation, call Call) (Answer, error) {
	path, err := op.expand(call.Path)
	if err != nil {
		return Answer{}, err
	}
	r := request{method: op.Method, path: path, query: call.Query, header: http.Header{}}
	if call.Body != nil {
		r.body = call.Body
	}
	if call.Upload != nil {
		r.upload = call.Upload
		r.header.Set("Content-Type", call.ContentType)
	}
	if call.IdempotencyKey != "" {
		r.header.Set("Idempotency-Key", call.IdempotencyKey)
	}
	meta, err := c.do(ctx, r, nil)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Status: meta.Status, ContentType: meta.contentType, RequestID: meta.RequestID, Body: meta.body}, nil
}

// expand puts the path parameters into op's path, each escaped.
func (o Operation) expand(params map[string]string) (string, error) {
	parts := strings.Split(o.Path, "/")
	for i, part := range parts {
		if strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}") {
			name := part[1 : len(part)-1]
			v := params[name]
			if v == "" {
				return "", fmt.Errorf("api: %s: %s is required", o.Name, name)
			}
			parts[i] = url.PathEscape(v)
		}
	}
	return strings.Join(parts, "/"), nil
}
