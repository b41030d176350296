// Package toolserver owns the tool server for AI assistants (MCP): one set
// of tools made from the API's operations (api.Operation, which the
// server's route table lists), one tool per operation named exactly as the
// operation (<resource>_<verb>), with its input schema (path parameters,
// query parameters, paging, the request body's fields), a description a
// model can act on and its annotations (read-only, destructive,
// idempotent); how a call's arguments become an API call and how its
// answer becomes a tool result (the API's JSON unchanged; a refusal as a
// tool error carrying code, message and remedy; a deploy held for approval
// said plainly); and the two ways they are served: over stdio (svc mcp) and
// over streamable HTTP (the server's /mcp, each call made in process with
// the caller's own token).
//
// Every tool calls the API through the public client (package api), so an
// assistant can do nothing a caller of the API could not, and every
// authorization rule, policy floor and audit entry applies. It imports api
// and the MCP SDK only (never server or internal packages); it is the only
// package that imports the SDK (internal/archtest).
package toolserver
