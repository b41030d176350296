package toolserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/svchost/svc/api"
)

// ClientFunc gives the API client a tool call is made with: one client for
// svc mcp, the caller's own token in process for /mcp.
type ClientFunc func(ctx context.Context, req *mcp.CallToolRequest) (*api.Client, error)

// call is a tool call's arguments sorted into the parts of an API call.
type call struct {
	path        map[string]string
	query       url.Values
	body        map[string]json.RawMessage
	upload      []byte
	contentType string
	idemKey     string
}

// apiCall is the call for the API client; every attempt gets a fresh
// reader of the upload.
func (c call) apiCall(hasBody bool) api.Call {
	out := api.Call{Path: c.path, Query: c.query, ContentType: c.contentType, IdempotencyKey: c.idemKey}
	if hasBody {
		b, _ := json.Marshal(c.body) // raw JSON values by name
		out.Body = b
	}
	if c.upload != nil {
		out.Upload = bytes.NewReader(c.upload)
		if out.ContentType == "" {
			out.ContentType = "application/octet-stream"
		}
	}
	return out
}

// argsError is a call's arguments that do not fit the tool: the model's
// mistake, answered as a tool error it can correct.
type argsError struct{ msg string }

func (e *argsError) Error() string { return e.msg }

func argsErrorf(format string, a ...any) error { return &argsError{msg: fmt.Sprintf(format, a...)} }

// parse sorts a call's arguments (a JSON object) by where they go.
func (t *tool) parse(raw json.RawMessage) (call, error) {
	c := call{path: map[string]string{}, query: url.Values{}, body: map[string]json.RawMessage{}}
	args := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return c, argsErrorf("the arguments must be a JSON object: %v", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(args)) {
		v := args[name]
		p, ok := t.places[name]
		if !ok {
			return c, argsErrorf("%s takes no argument %q; it takes: %s", t.op.Name, name, strings.Join(slices.Sorted(maps.Keys(t.places)), ", "))
		}
		if p == inBody {
			c.body[name] = v
			continue
		}
		if string(v) == "null" {
			continue
		}
		switch p {
		case inQuery:
			vals, err := queryValues(v, t.repeat[name])
			if err != nil {
				return c, argsErrorf("%s: %v", name, err)
			}
			c.query[name] = vals
			continue
		case inUpload:
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return c, argsErrorf("%s must be a base64 string", name)
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return c, argsErrorf("%s is not base64: %v", name, err)
			}
			c.upload = b
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return c, argsErrorf("%s must be a string", name)
		}
		switch p {
		case inPath:
			c.path[name] = s
		case inContentType:
			c.contentType = s
		case inIdemKey:
			c.idemKey = s
		}
	}
	for _, q := range t.op.Query {
		if q.Default != "" && c.query[q.Name] == nil && (q.DefaultUnless == "" || !given(c.query[q.DefaultUnless])) {
			c.query.Set(q.Name, q.Default)
		}
	}
	for _, p := range t.op.PathParams() {
		if c.path[p] == "" {
			return c, argsErrorf("%s needs %s (%s)", t.op.Name, p, pathDoc(p))
		}
	}
	if t.op.Upload != "" && c.upload == nil {
		return c, argsErrorf("%s needs %s", t.op.Name, argContent)
	}
	if t.op.Upload == "archive" && !slices.Contains(archiveTypes, c.contentType) {
		return c, argsErrorf("%s needs %s: one of %s", t.op.Name, argContentType, strings.Join(archiveTypes, ", "))
	}
	return c, nil
}

// queryValues turns a JSON string, number or boolean (an array of them
// when the parameter repeats) into query values.
func queryValues(v json.RawMessage, repeat bool) ([]string, error) {
	if repeat && bytes.HasPrefix(bytes.TrimSpace(v), []byte("[")) {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, err
		}
		var out []string
		for _, it := range items {
			s, err := scalar(it)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := scalar(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

func scalar(v json.RawMessage) (string, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return "", err
	}
	switch x := x.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("want a string, number or boolean, not %s", v)
}

// handler is the tool's handler: it sorts the arguments, calls the API
// with the client clients gives, and shapes the answer.
func (t *tool) handler(clients ClientFunc) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, err := t.parse(req.Params.Arguments)
		if err != nil {
			return textError(err.Error(), nil), nil
		}
		client, err := clients(ctx, req)
		if err != nil {
			return textError("no API client for this call: "+err.Error(), nil), nil
		}
		if t.op.Name == "deployments_logs" {
			return t.logs(ctx, client, c), nil
		}
		ans, err := withApp(ctx, client, c, func(c call) (api.Answer, error) {
			return client.Do(ctx, t.op, c.apiCall(len(t.op.Body) > 0))
		})
		return shape(t.op, ans, withNotFoundRemedy(err)), nil
	}
}

// notFoundRemedy is what to do about a NOT_FOUND the API gave no remedy
// for: a model most often names a thing by a wrong ID or slug.
const notFoundRemedy = "check the IDs: apps_list lists the apps this token can see (ID and slug); an app's own lists (deployments_list, specs_list, …) list what it holds"

// withNotFoundRemedy gives a NOT_FOUND without a remedy the tool server's.
func withNotFoundRemedy(err error) error {
	var e *api.Error
	if !errors.As(err, &e) || e.Code != "NOT_FOUND" || e.Remedy != "" {
		return err
	}
	with := *e
	with.Remedy = notFoundRemedy
	return &with
}

// withApp makes the call with the app its appID names: a slug (slugs
// never hold an underscore, IDs always do) is looked up among the apps the
// caller may list (every page of GET /api/v1/apps) and replaced by the
// app's ID; a slug no such app has is sent as it is, for the API to answer
// NOT_FOUND.
func withApp[T any](ctx context.Context, client *api.Client, c call, fn func(call) (T, error)) (T, error) {
	if ref, ok := c.path["appID"]; ok && !strings.Contains(ref, "_") {
		id, found, err := client.AppBySlug(ctx, ref)
		if err != nil {
			var zero T
			return zero, err
		}
		if found {
			c.path = maps.Clone(c.path)
			c.path["appID"] = id
		}
	}
	return fn(c)
}

// refusalOf is the tool error of an API call that failed: the API's code,
// message and remedy (and details) as text and as structured content; a
// call that got no answer says so.
func refusalOf(err error) *mcp.CallToolResult {
	var e *api.Error
	if !errors.As(err, &e) {
		return textError("the call got no answer from the API: "+err.Error(), nil)
	}
	text := e.Code + ": " + e.Message
	if e.Remedy != "" {
		text += "\nRemedy: " + e.Remedy
	}
	structured := map[string]any{"code": e.Code, "message": e.Message, "remedy": e.Remedy, "request_id": e.RequestID}
	if len(e.Details) > 0 {
		d, _ := json.Marshal(e.Details) // decoded from JSON
		text += "\nDetails: " + string(d)
		structured["details"] = e.Details
	}
	return textError(text, structured)
}

func textError(text string, structured any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured}
}

// given says whether a query parameter was given as anything but false.
func given(vals []string) bool {
	return len(vals) > 0 && vals[0] != "false"
}
