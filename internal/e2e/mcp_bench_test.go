package e2e

import (
	"context"
	"net/http"
	"testing"
)

// BenchmarkToolCall is what the tool server adds to an API call: the same
// read (the apps list, ten apps) as an MCP tool call over streamable HTTP
// at /mcp (JSON-RPC, the tool's argument checks, the in-process API call
// and the result's shaping) and as a plain GET /api/v1/apps, both from a
// client on loopback to the real server.
func BenchmarkToolCall(b *testing.B) {
	srv := startAppServer(b, "mcp-bench")
	for i := range 10 {
		srv.createApp(b, "bench "+string(rune('a'+i)))
	}
	token := mintToken(b, srv, "bench", true)
	ctx := context.Background()
	b.Run("mcp apps_list", func(b *testing.B) {
		cs := httpSession(b, ctx, srv.p.Base(), token)
		for b.Loop() {
			if res := callTool(b, ctx, cs, "apps_list", map[string]any{}); res.IsError {
				b.Fatalf("apps_list: %s", texts(res))
			}
		}
	})
	b.Run("api GET apps", func(b *testing.B) {
		hc := &http.Client{Transport: bearer{token}}
		for b.Loop() {
			resp, err := hc.Get(srv.p.Base() + "/api/v1/apps")
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("GET /api/v1/apps: %v %v", err, resp)
			}
			resp.Body.Close()
		}
	})
}
