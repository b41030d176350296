// Package api is the public Go client of the svc HTTP API. The CLI, the tool
// server for AI assistants and the tests use it; it is the only way they
// reach the service.
//
// It must not import the server or any internal package of svc: its types
// are the wire format, declared here, so that programs outside this module
// can use it.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls the API of one svc server.
type Client struct {
	base    *url.URL
	http    *http.Client
	token   string
	session string // the session cookie after SignIn: "<name>=<value>"
}

// Session cookie names: __Host-svc_session when the server is served over
// TLS, svc_session otherwise.
const (
	sessionCookie     = "svc_session"
	hostSessionCookie = "__Host-svc_session"
)

// Option configures a Client.
type Option func(*Client)

// WithToken authenticates every request with a bearer token.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc for requests (its timeouts, transport, cookie jar).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client of the server at baseURL (for example
// http://localhost:8080).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api: base URL %q: want http(s)://host[:port]", baseURL)
	}
	c := &Client{base: u, http: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Error is an error answer of the API. Branch on Code; Message is for people.
type Error struct {
	Status    int            `json:"-"`
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Remedy    string         `json:"remedy,omitempty"`
	Details   map[string]any `json:"details"`
	RequestID string         `json:"request_id"`
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
	if e.Remedy != "" {
		s += "; " + e.Remedy
	}
	return s
}

// IsCode reports whether err is an API error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// request is one call.
type request struct {
	method, path string
	query        url.Values
	body         any
	header       http.Header
	// upload, when set, is the body as it is (an archive), sent with
	// the Content-Type in header; body is then unused.
	upload io.Reader
}

// Response headers a caller may need.
type Response struct {
	Status      int
	RequestID   string
	Replayed    bool // Idempotent-Replayed: the answer of an earlier request
	session     string
	contentType string
	body        []byte // the answer's bytes as they came
}

func (c *Client) do(ctx context.Context, r request, out any) (Response, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + r.path
	u.RawQuery = r.query.Encode()
	var body io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return Response{}, fmt.Errorf("api: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	if r.upload != nil {
		body = r.upload
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return Response{}, fmt.Errorf("api: %w", err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if r.body != nil && r.upload == nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("api: %s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	meta := Response{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id"), Replayed: resp.Header.Get("Idempotent-Replayed") == "true",
		contentType: resp.Header.Get("Content-Type")}
	for _, ck := range resp.Cookies() {
		if (ck.Name == sessionCookie || ck.Name == hostSessionCookie) && ck.Value != "" {
			meta.session = ck.Name + "=" + ck.Value
		}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return meta, fmt.Errorf("api: %s %s: read answer: %w", r.method, r.path, err)
	}
	meta.body = b
	if resp.StatusCode >= 400 {
		return meta, errorOf(resp, b)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return meta, fmt.Errorf("api: %s %s: decode answer: %w", r.method, r.path, err)
		}
	}
	return meta, nil
}

// answer sends r and returns the API's JSON answer unchanged (for a
// client's --output json) beside its decoding into T. An answer without a
// body (204) leaves both empty.
func answer[T any](ctx context.Context, c *Client, r request) (T, json.RawMessage, error) {
	var v T
	meta, err := c.do(ctx, r, nil)
	if err != nil {
		return v, nil, err
	}
	raw := json.RawMessage(meta.body)
	if len(raw) == 0 {
		return v, nil, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, raw, fmt.Errorf("api: %s %s: decode answer: %w", r.method, r.path, err)
	}
	return v, raw, nil
}

// pageQuery is the query of a paged list: cursor "" for the first page,
// limit 0 for the server's default.
func pageQuery(cursor string, limit int) url.Values {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// authorize adds the client's credential to req: its bearer token, and
// the session cookie after SignIn.
func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if name, value, ok := strings.Cut(c.session, "="); ok {
		req.AddCookie(&http.Cookie{Name: name, Value: value})
	}
}

// errorOf is the *Error an error answer carries; an answer that is not an
// error envelope is an INTERNAL one holding the body as its message.
func errorOf(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(body, e) != nil || e.Code == "" {
		return &Error{Status: resp.StatusCode, Code: "INTERNAL", Message: strings.TrimSpace(string(body)), RequestID: resp.Header.Get("X-Request-Id")}
	}
	return e
}

func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q}, out)
	return err
}

// SetupStatus says whether the installation waits for its first
// administrator.
type SetupStatus struct {
	SetupRequired bool `json:"setup_required"`
}

// Setup reports whether the installation waits for its first administrator.
func (c *Client) Setup(ctx context.Context) (SetupStatus, error) {
	var s SetupStatus
	return s, c.get(ctx, "/api/v1/setup", nil, &s)
}

// Setting is one startup setting with its value and origin.
type Setting struct {
	Name   string `json:"name"`
	Env    string `json:"env"`
	Value  string `json:"value,omitempty"`
	Origin string `json:"origin"`
	Secret bool   `json:"secret,omitempty"`
}

// FixedPolicy is a host policy setting fixed at startup.
type FixedPolicy struct {
	Name   string `json:"name"`
	Value  any    `json:"value"`
	Origin string `json:"origin"`
}

// DeclaredAdapter is an adapter declared at startup in the config file or
// SVC_ADAPTERS; its credentials name where they are read from, never a
// value.
type DeclaredAdapter struct {
	ID          string            `json:"id"`
	Category    string            `json:"category"`
	Kind        string            `json:"kind"`
	Settings    map[string]string `json:"settings"`
	Credentials []struct {
		Name   string `json:"name"`
		From   string `json:"from"`   // file or env
		Source string `json:"source"` // the file's path or the variable's name
	} `json:"credentials"`
	Primary *bool  `json:"primary,omitempty"`
	Origin  string `json:"origin"` // config_file or environment
}

// Config is the server's startup configuration.
type Config struct {
	Settings    []Setting         `json:"settings"`
	PolicyFixed []FixedPolicy     `json:"policy_fixed"`
	Adapters    []DeclaredAdapter `json:"adapters"`
}

// Config returns the server's startup configuration.
func (c *Client) Config(ctx context.Context) (Config, error) {
	var v Config
	return v, c.get(ctx, "/api/v1/config", nil, &v)
}

// Endpoint is one route of the reference.
type Endpoint struct {
	Method       string `json:"method"`
	Path         string `json:"path"`
	Access       string `json:"access"`
	Verb         string `json:"verb,omitempty"`
	Summary      string `json:"summary"`
	Idempotent   bool   `json:"idempotent,omitempty"`
	MaxBodyBytes int64  `json:"max_body_bytes,omitempty"`
}

// ErrorCode is one code of the error catalogue.
type ErrorCode struct {
	Code       string `json:"code"`
	HTTPStatus int    `json:"http_status"`
	Condition  string `json:"condition"`
}

// Reference describes the running server.
type Reference struct {
	Version   string      `json:"version"`
	BasePath  string      `json:"base_path"`
	Endpoints []Endpoint  `json:"endpoints"`
	Errors    []ErrorCode `json:"errors"`
	Events    []struct {
		Name  string   `json:"name"`
		Scope string   `json:"scope"`
		Data  []string `json:"data"`
	} `json:"events"`
	CLI []struct {
		Command string `json:"command"`
		Summary string `json:"summary"`
		Usage   string `json:"usage"`
	} `json:"cli"`
	Tools []struct {
		Name    string `json:"name"`
		Summary string `json:"summary"`
	} `json:"tools"`
}

// Reference returns the generated reference of the running server.
func (c *Client) Reference(ctx context.Context) (Reference, error) {
	var v Reference
	return v, c.get(ctx, "/api/v1/reference", nil, &v)
}

// Server is a member of the Raft configuration.
type Server struct {
	ID       string `json:"id"`
	Addr     string `json:"addr"`
	Suffrage string `json:"suffrage"`
}

// RaftStatus is the replicated store as one node sees it.
type RaftStatus struct {
	NodeID       string   `json:"node_id"`
	State        string   `json:"state"`
	LeaderID     string   `json:"leader_id"`
	LeaderAddr   string   `json:"leader_addr"`
	Term         uint64   `json:"term"`
	LastIndex    uint64   `json:"last_index"`
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	Servers      []Server `json:"servers"`
	Tables       []string `json:"tables"`
	Digest       string   `json:"digest,omitempty"`
}

// RaftStatus returns the store as this server sees it; withDigest adds a
// hash of the whole state.
func (c *Client) RaftStatus(ctx context.Context, withDigest bool) (RaftStatus, error) {
	var v RaftStatus
	q := url.Values{}
	if withDigest {
		q.Set("digest", "true")
	}
	return v, c.get(ctx, "/api/v1/operator/raft", q, &v)
}

// ProbeResult is the outcome of a write probe.
type ProbeResult struct {
	ID         string  `json:"id"`
	Index      uint64  `json:"index"`
	Node       string  `json:"node"`
	Leader     string  `json:"leader"`
	DurationMS float64 `json:"duration_ms"`
}

// WriteProbe writes a probe through the replicated write path.
func (c *Client) WriteProbe(ctx context.Context, payloadBytes int) (ProbeResult, error) {
	var v struct {
		Probe ProbeResult `json:"probe"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/operator/raft/probes", body: map[string]int{"payload_bytes": payloadBytes}}, &v)
	return v.Probe, err
}

// Probe is a write probe as a node holds it.
type Probe struct {
	ID        string    `json:"id"`
	Node      string    `json:"node"`
	WrittenAt time.Time `json:"written_at"`
}

// Probe returns a probe as this server's state holds it.
func (c *Client) Probe(ctx context.Context, id string) (Probe, error) {
	var v struct {
		Probe Probe `json:"probe"`
	}
	return v.Probe, c.get(ctx, "/api/v1/operator/raft/probes/"+url.PathEscape(id), nil, &v)
}

// Page is one page of a list.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Probes returns one page of the probes this server holds.
func (c *Client) Probes(ctx context.Context, cursor string, limit int) (Page[Probe], error) {
	var v Page[Probe]
	return v, c.get(ctx, "/api/v1/operator/raft/probes", pageQuery(cursor, limit), &v)
}

// AllProbes walks every page of the probes this server holds.
func (c *Client) AllProbes(ctx context.Context) ([]Probe, error) {
	var all []Probe
	cursor := ""
	for {
		p, err := c.Probes(ctx, cursor, 500)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			return all, nil
		}
		cursor = p.NextCursor
	}
}

// Ready reports whether the server knows a leader of its store.
func (c *Client) Ready(ctx context.Context) (bool, error) {
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/readyz"}, nil)
	if err == nil {
		return true, nil
	}
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable {
		return false, nil
	}
	return false, err
}
