package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ReadEvents reads a text/event-stream and calls fn with each event's name
// ("message" when it names none) and data (its data lines joined with
// newlines), in order, until the stream ends, fn fails, or a line is
// longer than 1 MiB. Comments (keep-alives) and unknown fields are
// skipped; an event still being written when the stream ends is dropped,
// as the specification of server-sent events says.
func ReadEvents(r io.Reader, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	event, data, has := "", []byte(nil), false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 { // a blank line dispatches the event
			if has {
				name := event
				if name == "" {
					name = "message"
				}
				if err := fn(name, data); err != nil {
					return err
				}
			}
			event, data, has = "", nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if has {
				data = append(data, '\n')
			}
			data, has = append(data, value...), true
		}
	}
	return sc.Err()
}

// LogLine is one line of a deploy's output: stream is build, run or
// system.
type LogLine struct {
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"`
	Line   string    `json:"line"`
}

// DeployEnd is how a followed deploy ended.
type DeployEnd struct {
	State     string  `json:"state"`
	ErrorCode *string `json:"error_code"`
}

// FollowDeployment streams a deployment's output while it runs (a finished
// one replays its whole log): fn is called with each log line, decoded and
// as the API's JSON, and then with the end. It returns the end, or an
// error when the stream breaks off before it.
func (c *Client) FollowDeployment(ctx context.Context, appID, depID string, fn func(l *LogLine, end *DeployEnd, raw json.RawMessage) error) (DeployEnd, error) {
	path := deploymentsPath(appID) + "/" + url.PathEscape(depID) + "/logs"
	resp, err := c.stream(ctx, path, nil)
	if err != nil {
		return DeployEnd{}, err
	}
	defer resp.Body.Close()
	var end *DeployEnd
	err = ReadEvents(resp.Body, func(event string, data []byte) error {
		switch event {
		case "log":
			var l LogLine
			if err := json.Unmarshal(data, &l); err != nil {
				return fmt.Errorf("api: %s: log event: %w", path, err)
			}
			return fn(&l, nil, data)
		case "end":
			end = &DeployEnd{}
			if err := json.Unmarshal(data, end); err != nil {
				return fmt.Errorf("api: %s: end event: %w", path, err)
			}
			if err := fn(nil, end, data); err != nil {
				return err
			}
			return io.EOF // nothing follows the end
		}
		return nil
	})
	if end != nil {
		return *end, nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return DeployEnd{}, fmt.Errorf("api: %s: the stream ended before the deploy did: %w", path, err)
}

// stream opens a server-sent event stream: no overall timeout (it lasts
// as long as the work it follows; ctx ends it), and an error answer is an
// *Error as for any call.
func (c *Client) stream(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req)
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("api: GET %s: %w", path, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, errorOf(resp, b)
	}
	return resp, nil
}
