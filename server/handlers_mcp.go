package server

import (
	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
)

// mcpBodyLimit caps a request to the tool server: a tool call's
// arguments, an upload's base64 included.
const mcpBodyLimit = 16 << 20

// serveMCP hands a request to /mcp to the tool server (Deps.MCP). It takes
// a bearer token only: the route's access rule has refused a request
// without a valid credential (401, WWW-Authenticate: Bearer), and a
// browser's session cookie does not count here, so nothing reaches the
// tool server that does not carry the token its tools will call with.
func (s *Server) serveMCP(c echo.Context) error {
	if bearer, _ := bearerToken(c.Request()); bearer == "" {
		return errcode.New(errcode.AuthRequired, "the tool server takes a bearer token, not a session cookie").
			WithRemedy("send Authorization: Bearer <token>; mint an agent token with POST /api/v1/tokens {\"name\": \"assistant\", \"agent\": true} (svc tokens create --agent)")
	}
	if s.mcp == nil {
		return errcode.New(errcode.NotFound, "this server has no tool server")
	}
	s.mcp.ServeHTTP(c.Response(), c.Request())
	return nil
}
