package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
)

// Endpoint is a route of the API as its clients see it. The CLI's
// generated commands and the tool server's tools are made from these
// (cmd/svc turns them into api.Operation), so they follow the route table.
type Endpoint struct {
	Name, Method, Path, Summary, Verb string
	Public                            bool
	Paging                            string
	Idempotent                        bool
	Query                             []EndpointParam
	// Body is the JSON Schema of the JSON request body, made from the
	// same type as the OpenAPI document's; nil when there is none.
	Body json.RawMessage
	// Upload is the kind of a raw body: archive or image.
	Upload string
	// Produces is a success's answer when not JSON: text/event-stream,
	// image, websocket.
	Produces          string
	NoTool, NoCommand string
}

// EndpointParam is a query parameter an endpoint reads.
type EndpointParam struct {
	Name, Type, Doc string
	Repeat          bool
	// Default is what clients send when the caller gives neither this
	// parameter nor DefaultUnless (the API itself takes no default).
	Default, DefaultUnless string
}

// opName is the shape of a route's op: <resource>_<verb>, snake case.
var opName = regexp.MustCompile(`^[a-z]+(_[a-z]+)+$`)

// checkOp refuses an API route without an op of the right shape; an
// operational route or a page has none.
func checkOp(r route) error {
	api := strings.HasPrefix(r.path, basePath+"/") && !r.operational
	switch {
	case api && !opName.MatchString(r.op):
		return fmt.Errorf("route %s %s: op %q is not <resource>_<verb> in snake case", r.method, r.path, r.op)
	case !api && r.op != "":
		return fmt.Errorf("route %s %s: only API routes have an op", r.method, r.path)
	}
	return nil
}

// Endpoints lists the API's routes with their ops, in the table's order.
func Endpoints() []Endpoint {
	s := &Server{}
	g := &schemaGen{defs: map[string]any{}}
	var out []Endpoint
	for _, r := range s.routeTable() {
		if r.op == "" {
			continue
		}
		e := Endpoint{
			Name: r.op, Method: r.method, Path: r.path, Summary: r.summary, Verb: string(r.verb),
			Public: r.access == accessPublic, Paging: r.paging.String(), Idempotent: r.idempotent,
			NoTool: r.noTool, NoCommand: r.noCommand,
		}
		for _, q := range r.query {
			e.Query = append(e.Query, EndpointParam{Name: q.name, Type: q.typ, Doc: q.doc, Repeat: q.repeat, Default: q.clientDefault, DefaultUnless: q.unless})
		}
		if r.request != nil {
			schema := g.schemaOf(reflect.TypeOf(r.request))
			b, err := json.Marshal(schema)
			if err != nil {
				panic(fmt.Sprintf("server: schema of %s: %v", r.op, err)) // a map of JSON values
			}
			e.Body = b
		}
		e.Upload = r.upload
		e.Produces = r.produces
		if r.status == http.StatusSwitchingProtocols {
			e.Produces = "websocket"
		}
		out = append(out, e)
	}
	return out
}
