package nomadsd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svchost/svc/edge/blocking"
	"github.com/svchost/svc/internal/errcode"
)

// The parts of Nomad's answers this source reads.
type (
	// namespaceServices is one element of GET /v1/services.
	namespaceServices struct {
		Namespace string
		Services  []serviceStub
	}
	serviceStub struct {
		ServiceName string
		Tags        []string
	}
	// registration is one element of GET /v1/service/<name>.
	registration struct {
		ID          string
		ServiceName string
		Namespace   string
		JobID       string
		AllocID     string
		Tags        []string
		Address     string
		Port        int
	}
)

// maxAnswer bounds the size of one answer of Nomad's.
const maxAnswer = 64 << 20

// client makes Nomad's blocking queries.
type client struct {
	base      string // scheme://host[:port][/prefix], no trailing slash
	namespace string
	region    string
	token     string
	wait      time.Duration
	http      *http.Client
	vendor    *blocking.Vendor // translates failures
}

// get reads path into out, waiting for an index above index (0: answer at
// once), and returns the index of the answer (X-Nomad-Index).
func (c *client) get(ctx context.Context, what, path string, index uint64, out any) (uint64, error) {
	q := url.Values{}
	if c.namespace != "" {
		q.Set("namespace", c.namespace)
	}
	if c.region != "" {
		q.Set("region", c.region)
	}
	if index > 0 {
		q.Set("index", strconv.FormatUint(index, 10))
		q.Set("wait", c.wait.String())
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, errcode.Wrap(err, errcode.AdapterFailed, "the nomad adapter could not make a request for %s", what)
	}
	if c.token != "" {
		req.Header.Set("X-Nomad-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, c.vendor.TransportError(what, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return 0, c.vendor.StatusError(what, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return 0, errcode.Wrap(err, errcode.AdapterFailed, "nomad's answer to %s could not be read", what).
			WithRemedy("check that the adapter's address points at nomad's HTTP API")
	}
	got, err := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	if err != nil {
		return 0, errcode.Wrap(fmt.Errorf("X-Nomad-Index %q: %w", resp.Header.Get("X-Nomad-Index"), err), errcode.AdapterFailed,
			"nomad's answer to %s had no index", what).
			WithRemedy("check that the adapter's address points at nomad's HTTP API, not a proxy that drops its headers")
	}
	return got, nil
}

// leader reads /v1/status/leader.
func (c *client) leader(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/status/leader", nil)
	if err != nil {
		return "", errcode.Wrap(err, errcode.AdapterFailed, "the nomad adapter could not make a request for its leader")
	}
	if c.token != "" {
		req.Header.Set("X-Nomad-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", c.vendor.TransportError("checking nomad's leader", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", c.vendor.StatusError("checking nomad's leader", resp.StatusCode)
	}
	var leader string
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&leader); err != nil {
		return "", errcode.Wrap(err, errcode.AdapterFailed, "nomad's answer to checking its leader could not be read").
			WithRemedy("check that the adapter's address points at nomad's HTTP API")
	}
	return leader, nil
}

// servicePath is the path of one service's registrations.
func servicePath(name string) string { return "/v1/service/" + url.PathEscape(name) }

// baseURL checks an address and returns it without a trailing slash.
func baseURL(address string) (string, error) {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", errcode.Invalid("config.address", "address must be an http or https URL such as http://127.0.0.1:4646")
	}
	return strings.TrimRight(u.String(), "/"), nil
}
