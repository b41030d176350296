package toolserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/svchost/svc/api"
)

// instructions tell the assistant how the tools fit together.
const instructions = "These tools are the svc API: each calls one endpoint (the description names it) with your token, so you can do exactly what the token may. " +
	"Name apps by ID or slug. A refusal is a tool error with the API's code, message and remedy: follow the remedy. " +
	"Lists answer one page; pass next_cursor back as cursor. A deploy runs behind its answer: follow it with deployments_logs; " +
	"a deploy that waits for approval has not run until someone else approves it."

// New returns the MCP server holding one tool per operation that has one,
// each calling the API with the client clients gives for the call.
func New(ops []api.Operation, version string, clients ClientFunc, log *slog.Logger) (*mcp.Server, error) {
	tools, err := makeTools(ops)
	if err != nil {
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "svc", Title: "svc: self-hosted application hosting", Version: version},
		&mcp.ServerOptions{Instructions: instructions, Logger: log, PageSize: 1000})
	for _, t := range tools {
		srv.AddTool(t.def, t.handler(clients))
	}
	return srv, nil
}

// ServeStdio serves the tools on in and out (the process's stdin and
// stdout), calling the API with client, until ctx ends or the assistant
// closes in. Nothing but the protocol is written to out.
func ServeStdio(ctx context.Context, ops []api.Operation, version string, client *api.Client, in io.Reader, out io.Writer, log *slog.Logger) error {
	srv, err := New(ops, version, func(context.Context, *mcp.CallToolRequest) (*api.Client, error) { return client, nil }, log)
	if err != nil {
		return err
	}
	return srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// MaxRequestBytes caps one request to the HTTP tool server (an upload's
// base64 included).
const MaxRequestBytes = 16 << 20

// Handler serves the tools over streamable HTTP. Each request must carry
// a bearer token of the API: the handler checks it with GET /api/v1/me,
// binds the MCP session to that token (a session cannot be used with
// another), and every tool call is made with that token through apiHandler
// in process (no socket), carrying the request's address, host and
// forwarding headers, so the API authorizes, limits and audits it exactly
// as a direct call.
//
// DNS rebinding protection is off: it guards servers that trust a
// loopback caller, and this one trusts nothing but the bearer token, which
// a browser never sends on its own (no cookie counts here).
func Handler(ops []api.Operation, version string, apiHandler http.Handler, log *slog.Logger) (http.Handler, error) {
	clients := func(_ context.Context, req *mcp.CallToolRequest) (*api.Client, error) {
		if req.Extra == nil || req.Extra.TokenInfo == nil {
			return nil, errors.New("the request carried no verified token")
		}
		o, ok := req.Extra.TokenInfo.Extra[originKey].(origin)
		if !ok {
			return nil, errors.New("the request carried no verified token")
		}
		return o.client(apiHandler)
	}
	srv, err := New(ops, version, clients, log)
	if err != nil {
		return nil, err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger:                     log,
		SessionTimeout:             30 * time.Minute,
		MaxRequestBodyBytes:        MaxRequestBytes,
		DisableLocalhostProtection: true,
	})
	verify := func(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
		o := originOf(req, token)
		c, err := o.client(apiHandler)
		if err != nil {
			return nil, err
		}
		me, err := c.Me(ctx)
		var e *api.Error
		switch {
		case errors.As(err, &e) && e.Status == http.StatusUnauthorized:
			return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, e.Code)
		case err != nil:
			return nil, err
		case me.Token == nil:
			return nil, fmt.Errorf("%w: not an API token", auth.ErrInvalidToken)
		}
		// The API checks expiry on every call; the session outlives no
		// token because each call carries it.
		exp := time.Now().Add(24 * time.Hour)
		if me.Token.ExpiresAt != nil {
			exp = *me.Token.ExpiresAt
		}
		return &auth.TokenInfo{UserID: me.Token.ID, Expiration: exp, Extra: map[string]any{originKey: o}}, nil
	}
	return auth.RequireBearerToken(verify, nil)(h), nil
}
