package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
)

// AppLogLine is one line of a followed app log.
type AppLogLine struct {
	Line string `json:"line"`
}

// AppLogsEnd is why a followed app log ended: "stopped" (the workload's
// job stopped: a redeploy replaced it, the app was stopped) or "lagged"
// (the reader fell behind the output; follow again to go on).
type AppLogsEnd struct {
	Reason string `json:"reason"`
}

// FollowLogs streams a workload's output ("": the primary workload): the
// last tail lines (0: the server's default), then each line as it is
// written (GET …/logs?follow=true). fn is called with each line, decoded
// and as the API's JSON, until the output ends (FollowLogs returns why),
// ctx ends or fn fails (their error). A refusal (an app never deployed, a
// runtime that cannot follow) is an *Error.
func (c *Client) FollowLogs(ctx context.Context, appID, workload string, tail int, fn func(l AppLogLine, raw json.RawMessage) error) (AppLogsEnd, error) {
	q := url.Values{"follow": {"true"}}
	if workload != "" {
		q.Set("workload", workload)
	}
	if tail > 0 {
		q.Set("tail", strconv.Itoa(tail))
	}
	path := appPath(appID) + "/logs"
	resp, err := c.stream(ctx, path, q)
	if err != nil {
		return AppLogsEnd{}, err
	}
	defer resp.Body.Close()
	var end *AppLogsEnd
	var fnErr error
	err = ReadEvents(resp.Body, func(event string, data []byte) error {
		switch event {
		case "log":
			var l AppLogLine
			if err := json.Unmarshal(data, &l); err != nil {
				return fmt.Errorf("api: %s: log event: %w", path, err)
			}
			fnErr = fn(l, data)
			return fnErr
		case "end":
			end = &AppLogsEnd{}
			if err := json.Unmarshal(data, end); err != nil {
				return fmt.Errorf("api: %s: end event: %w", path, err)
			}
			return io.EOF // nothing follows the end
		}
		return nil
	})
	if end != nil {
		return *end, nil
	}
	if fnErr != nil {
		return AppLogsEnd{}, fnErr
	}
	if ctx.Err() != nil {
		return AppLogsEnd{}, ctx.Err()
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return AppLogsEnd{}, fmt.Errorf("api: %s: the stream ended before the output did: %w", path, err)
}
