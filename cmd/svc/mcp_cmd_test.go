package main

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/svchost/svc/api"
	"github.com/svchost/svc/toolserver"
)

// TestToolsOfTheRouteTable: the route table's operations make the tool
// server's tools without a collision of argument names: every operation
// without a no-tool reason is a tool of exactly its name (and no other
// tool exists), listed through the SDK's own client, each input schema a
// valid JSON Schema object requiring the path's parameters; the
// reference's tools are the same, with the endpoint each calls.
func TestToolsOfTheRouteTable(t *testing.T) {
	ops := operations()
	c, err := api.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := toolserver.New(ops, "test", func(context.Context, *mcp.CallToolRequest) (*api.Client, error) { return c, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools := map[string]*mcp.Tool{}
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tl.Name] = tl
	}
	refs := map[string]string{}
	for _, r := range toolRefs() {
		refs[r.Name] = r.Endpoint
	}
	want := 0
	for _, op := range ops {
		tl, ok := tools[op.Name]
		if op.NoTool != "" {
			if ok {
				t.Errorf("%s has a tool though %q", op.Name, op.NoTool)
			}
			continue
		}
		want++
		if !ok {
			t.Errorf("%s: no tool", op.Name)
			continue
		}
		if refs[op.Name] != op.Method+" "+op.Path {
			t.Errorf("%s: the reference says it calls %q", op.Name, refs[op.Name])
		}
		b, _ := json.Marshal(tl.InputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Errorf("%s: input schema: %v", op.Name, err)
			continue
		}
		if _, err := s.Resolve(nil); err != nil || s.Type != "object" {
			t.Errorf("%s: input schema is no valid object schema (%v): %s", op.Name, err, b)
		}
		for _, p := range op.PathParams() {
			if _, ok := s.Properties[p]; !ok || !slices.Contains(s.Required, p) {
				t.Errorf("%s: path parameter %s is not a required argument", op.Name, p)
			}
		}
		if tl.Annotations == nil || tl.Annotations.ReadOnlyHint != (op.Method == "GET") || (op.Method != "GET" && tl.Annotations.DestructiveHint == nil) {
			t.Errorf("%s: annotations %+v", op.Name, tl.Annotations)
		}
	}
	if len(tools) != want || len(refs) != want {
		t.Errorf("%d tools and %d in the reference; want one per operation with a tool (%d)", len(tools), len(refs), want)
	}
}
