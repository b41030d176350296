package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Adapter is an adapter as GET /adapters shows it: a configured one or an
// embedded default, never a credential's value.
type Adapter struct {
	AdapterID      string         `json:"adapter_id"`
	Category       string         `json:"category"`
	Kind           string         `json:"kind"`
	Config         map[string]any `json:"config"`
	CredentialsSet []string       `json:"credentials_set"`
	Capabilities   map[string]any `json:"capabilities"`
	Primary        bool           `json:"primary"`
	Builtin        bool           `json:"builtin"`
	// Origin is api, default, config_file or environment (declared at
	// startup: fixed until the declaration changes and the server
	// restarts); CredentialSources say where a declared adapter's
	// credentials are read from ("file /path", "env NAME").
	Origin            string            `json:"origin"`
	CredentialSources map[string]string `json:"credential_sources,omitempty"`
	Loaded            bool              `json:"loaded"`
	Error             *string           `json:"error"`
	PendingRestart    bool              `json:"pending_restart"`
	Deleted           bool              `json:"deleted"`
	Revision          int64             `json:"revision"`
}

// AdapterPage is one page of GET /adapters.
type AdapterPage struct {
	Items         []Adapter `json:"items"`
	NextCursor    string    `json:"next_cursor,omitempty"`
	RestartNeeded bool      `json:"restart_needed"`
	StartedAt     time.Time `json:"started_at"`
}

// Adapters returns one page of the adapters (cursor "" for the first;
// limit 0 for the server's default), and the raw JSON of the answer.
func (c *Client) Adapters(ctx context.Context, cursor string, limit int) (AdapterPage, json.RawMessage, error) {
	return answer[AdapterPage](ctx, c, request{method: http.MethodGet, path: "/api/v1/adapters", query: pageQuery(cursor, limit)})
}

// DeleteAdapter deletes a configured adapter nothing depends on; a refusal
// (STATE_INVALID) names the dependents in Details["dependents"]. The
// adapter stays loaded until the server's next restart.
func (c *Client) DeleteAdapter(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/adapters/" + url.PathEscape(id)}, nil)
	return err
}
