package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
)

type endpointRef struct {
	// Op names the endpoint's CLI command (svc apps list) and tool
	// (apps_list).
	Op           string `json:"op,omitempty"`
	Method       string `json:"method"`
	Path         string `json:"path"`
	Access       string `json:"access"`
	Verb         string `json:"verb,omitempty"`
	Summary      string `json:"summary"`
	Idempotent   bool   `json:"idempotent,omitempty"`
	MaxBodyBytes int64  `json:"max_body_bytes,omitempty"`
	// AuditAction is the audit action a successful request writes.
	AuditAction string `json:"audit_action,omitempty"`
	// Paging of a list: "cursor" (limit, cursor; next_cursor) or "before"
	// (the audit log: limit, before).
	Paging string `json:"paging,omitempty"`
}

// ToolRef describes one tool of the tool server, for the reference: the
// endpoint it calls ("GET /api/v1/apps") and its annotations.
type ToolRef struct {
	Name        string `json:"name"`
	Summary     string `json:"summary"`
	Endpoint    string `json:"endpoint"`
	ReadOnly    bool   `json:"read_only"`
	Destructive bool   `json:"destructive"`
	Idempotent  bool   `json:"idempotent"`
}

type referenceDTO struct {
	Version   string          `json:"version"`
	BasePath  string          `json:"base_path"`
	Endpoints []endpointRef   `json:"endpoints"`
	Errors    []errcode.Entry `json:"errors"`
	Events    []events.Kind   `json:"events"`
	CLI       []CommandRef    `json:"cli"`
	Tools     []ToolRef       `json:"tools"`
	// Security states what the verbs do not say (docs/security.md).
	Security []string `json:"security"`
}

// securityNotes are the reference's statements of what holding a verb
// effectively allows, beyond what the verb's name says.
var securityNotes = []string{
	"Whoever may change an app's spec and deploy it (app.spec.edit and app.deploy) can read every secret and slot credential the app receives, through the code they deploy; app.secrets.read guards reading values through the API only.",
	"Every build and workload of the process runtime runs in a sandbox (its own namespaces, an unprivileged user, a network reached only through the edge, host policy's egress_allowlist enforced) unless the operator set runtime.isolation: none, which GET /api/v1/config shows.",
	"An app's pages run in the browsers of those who open it: apps are served apart from the console (another host or port, or a sandboxed origin in path mode) so that they never act with the console's authority; the session cookie is the API's alone.",
	"app.create lets a person run code of their choosing on the installation's hosts, inside the sandbox; CPU, memory and disk use is measured, not limited, on the process runtime.",
}

// reference describes the running binary: every route of the table that
// registered them, every error code, every event, every CLI command.
func (s *Server) reference() referenceDTO {
	ref := referenceDTO{
		Version:  s.d.Version,
		BasePath: basePath,
		Errors:   errcode.Catalogue(),
		Events:   events.Catalogue(),
		CLI:      append([]CommandRef{}, s.d.Commands...),
		Tools:    append([]ToolRef{}, s.d.Tools...),
		Security: securityNotes,
	}
	for _, r := range s.routes {
		e := endpointRef{Op: r.op, Method: r.method, Path: r.path, Access: r.access.String(), Verb: string(r.verb), Summary: r.summary, Idempotent: r.idempotent, Paging: r.paging.String(), AuditAction: r.action}
		if r.method != http.MethodGet && r.method != http.MethodDelete {
			e.MaxBodyBytes = r.bodyLimit
			if e.MaxBodyBytes == 0 {
				e.MaxBodyBytes = defaultBodyLimit
			}
		}
		ref.Endpoints = append(ref.Endpoints, e)
	}
	return ref
}

func (s *Server) getReference(c echo.Context) error {
	return c.JSON(http.StatusOK, s.reference())
}

func (s *Server) getOpenAPI(c echo.Context) error {
	return c.JSON(http.StatusOK, s.openAPI())
}

// openAPI builds an OpenAPI 3.1 document of the route table.
func (s *Server) openAPI() map[string]any {
	g := &schemaGen{defs: map[string]any{}}
	g.defs["Error"] = g.schemaOf(reflect.TypeOf(envelope{}))
	paths := map[string]any{}
	for _, r := range s.routes {
		item, _ := paths[r.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[r.path] = item
		}
		item[strings.ToLower(r.method)] = s.operation(g, r)
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "svc API",
			"version":     s.d.Version,
			"description": "The HTTP API of svc. Every answer carries X-Request-Id; every error is the Error object. Generated from the running binary's route table.",
		},
		"servers": []any{map[string]any{"url": "/"}},
		"paths":   paths,
		"components": map[string]any{
			"schemas": g.defs,
			"securitySchemes": map[string]any{
				"bearerToken":   map[string]any{"type": "http", "scheme": "bearer"},
				"sessionCookie": map[string]any{"type": "apiKey", "in": "cookie", "name": "svc_session"},
			},
		},
	}
}

func (s *Server) operation(g *schemaGen, r route) map[string]any {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	ok := map[string]any{"description": http.StatusText(status)}
	if r.response != nil {
		ct := r.produces
		if ct == "" {
			ct = "application/json"
		}
		ok["content"] = map[string]any{ct: map[string]any{"schema": g.schemaOf(reflect.TypeOf(r.response))}}
	}
	errResp := map[string]any{
		"description": "An error; the code says which (see the reference's error catalogue).",
		"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
	}
	op := map[string]any{
		"operationId": operationID(r),
		"summary":     r.summary,
		"responses":   map[string]any{strconv.Itoa(status): ok, "default": errResp},
	}
	if r.verb != "" {
		op["x-svc-verb"] = string(r.verb)
	}
	if r.access == accessPublic {
		op["security"] = []any{}
	} else {
		op["security"] = []any{map[string]any{"bearerToken": []any{}}, map[string]any{"sessionCookie": []any{}}}
	}
	var params []any
	for _, part := range strings.Split(r.path, "/") {
		if strings.HasPrefix(part, "{") {
			params = append(params, map[string]any{
				"name": strings.TrimSuffix(strings.Trim(part, "{}"), "..."), "in": "path", "required": true, "schema": map[string]any{"type": "string"},
			})
		}
	}
	for _, q := range r.query {
		schema := map[string]any{"type": q.typ}
		if q.repeat {
			schema = map[string]any{"type": "array", "items": schema}
		}
		params = append(params, map[string]any{"name": q.name, "in": "query", "required": false, "description": q.doc, "schema": schema})
	}
	params = append(params, pagingParams(r.paging)...)
	if r.idempotent {
		params = append(params, map[string]any{
			"name": headerIdemKey, "in": "header", "required": false,
			"description": "A retry with the same key replays the first answer (kept 24 hours).",
			"schema":      map[string]any{"type": "string", "maxLength": 255},
		})
	}
	if params != nil {
		op["parameters"] = params
	}
	if r.request != nil {
		op["requestBody"] = map[string]any{
			"required": false,
			"content":  map[string]any{"application/json": map[string]any{"schema": g.schemaOf(reflect.TypeOf(r.request))}},
		}
	}
	return op
}

// pagingParams are the query parameters of a list's paging.
func pagingParams(p paging) []any {
	if p == unpaged {
		return nil
	}
	limit := map[string]any{"name": "limit", "in": "query", "required": false,
		"description": fmt.Sprintf("Items per page: %d unless asked, at most %d (a larger value is clamped).", defaultPageLimit, maxPageLimit),
		"schema":      map[string]any{"type": "integer", "minimum": 1}}
	from := map[string]any{"name": "cursor", "in": "query", "required": false,
		"description": "next_cursor of the previous page, unchanged; absent for the first page.",
		"schema":      map[string]any{"type": "string", "maxLength": maxCursorLength}}
	if p == pagedBefore {
		from = map[string]any{"name": "before", "in": "query", "required": false,
			"description": "The ID of the last entry seen (next_before of the previous page); absent for the newest.",
			"schema":      map[string]any{"type": "string"}}
	}
	return []any{limit, from}
}

func operationID(r route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.method))
	for _, part := range strings.Split(strings.TrimPrefix(r.path, basePath), "/") {
		part = strings.Trim(part, "{}.")
		for _, w := range strings.FieldsFunc(part, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	if r.produces == "text/html" {
		b.WriteString("Page") // GET /setup, the page, beside GET /api/v1/setup
	}
	return b.String()
}

// schemaGen derives JSON Schemas from Go types through their json tags.
type schemaGen struct {
	defs map[string]any
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

func (g *schemaGen) schemaOf(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		inner := g.schemaOf(t.Elem())
		if typ, ok := inner["type"].(string); ok {
			inner["type"] = []any{typ, "null"}
			return inner
		}
		return map[string]any{"oneOf": []any{inner, map[string]any{"type": "null"}}}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": g.schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schemaOf(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		return g.object(t)
	}
	return map[string]any{}
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if name == "" {
				name = f.Name
			}
			prop := g.schemaOf(f.Type)
			if d := f.Tag.Get("doc"); d != "" {
				prop["description"] = d
			}
			props[name] = prop
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
				required = append(required, name)
			}
		}
	}
	walk(t)
	sort.Strings(required)
	obj := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		obj["required"] = required
	}
	return obj
}
