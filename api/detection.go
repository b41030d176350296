package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// Detection is what detection made of an app's source: its status
// (running, done or failed), the winning bid with its proposal, the
// questions it could not answer itself, and the answers given.
type Detection struct {
	Status    string            `json:"status"`
	Commit    string            `json:"commit"`
	Winner    *Bid              `json:"winner"`
	RunnersUp []Bid             `json:"runners_up"`
	Questions []Question        `json:"questions"`
	Answers   map[string]string `json:"answers"`
	Error     string            `json:"error,omitempty"`
}

// Bid is one detector's proposal and the evidence for it.
type Bid struct {
	Detector string     `json:"detector"`
	Score    int        `json:"score"`
	Evidence []Evidence `json:"evidence"`
	Proposal Proposal   `json:"proposal"`
}

// Evidence is one file and what it told a detector.
type Evidence struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Proposal is the part of a proposed spec a client shows: its workloads.
// The API's JSON (the raw answer) holds the whole document.
type Proposal struct {
	Workloads map[string]ProposedWorkload `json:"workloads"`
}

// ProposedWorkload is how a workload is built and run.
type ProposedWorkload struct {
	Build *struct {
		Command    string `json:"command,omitempty"`
		Dockerfile string `json:"dockerfile,omitempty"`
		Image      string `json:"image,omitempty"`
	} `json:"build,omitempty"`
	Run struct {
		Command []string `json:"command,omitempty"`
		Port    int      `json:"port,omitempty"`
	} `json:"run"`
}

// Question is a fact detection could not find: answer it (POST
// …/detection/answers), or give a secret's value at accept.
type Question struct {
	Key     string `json:"key"`
	Prompt  string `json:"prompt"`
	Kind    string `json:"kind"`
	Default string `json:"default,omitempty"`
}

// Value is a value set at accept: an environment variable, a secret (sent
// to the secrets adapter), for one workload or all.
type Value struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Secret   bool   `json:"secret,omitempty"`
	Workload string `json:"workload,omitempty"`
}

// SourceAnswer is the API's answer to an upload: the app's new source
// and the checkout holding it.
type SourceAnswer struct {
	Source     AppSource `json:"source"`
	CheckoutID string    `json:"checkout_id"`
}

// UploadSource uploads an archive as the app's source; contentType is
// application/gzip (tar.gz), application/x-tar or application/zip.
// Detection runs behind the answer.
func (c *Client) UploadSource(ctx context.Context, appID, contentType string, archive io.Reader) (SourceAnswer, json.RawMessage, error) {
	return answer[SourceAnswer](ctx, c, request{method: http.MethodPost, path: appPath(appID) + "/source",
		upload: archive, header: http.Header{"Content-Type": {contentType}}})
}

// Detection returns what detection made of the app's source.
func (c *Client) Detection(ctx context.Context, appID string) (Detection, json.RawMessage, error) {
	return answer[Detection](ctx, c, request{method: http.MethodGet, path: appPath(appID) + "/detection"})
}

// AnswerDetection answers detection's questions (never with a secret)
// and runs it again.
func (c *Client) AnswerDetection(ctx context.Context, appID string, answers map[string]string) (Detection, json.RawMessage, error) {
	return answer[Detection](ctx, c, request{method: http.MethodPost, path: appPath(appID) + "/detection/answers",
		body: map[string]any{"answers": answers}})
}

// SpecAnswer is the API's answer naming one spec revision.
type SpecAnswer struct {
	Spec struct {
		ID       string `json:"id"`
		Revision uint64 `json:"revision"`
	} `json:"spec"`
}

// AcceptDetection writes the proposal, with values set, as a pinned
// revision; over an app already configured it needs confirm.
func (c *Client) AcceptDetection(ctx context.Context, appID string, values []Value, confirm bool) (SpecAnswer, json.RawMessage, error) {
	return answer[SpecAnswer](ctx, c, request{method: http.MethodPost, path: appPath(appID) + "/detection/accept",
		body: map[string]any{"values": values, "confirm": confirm}})
}

// AppLogs is an app's runtime output: the workload's last lines.
type AppLogs struct {
	Workload string   `json:"workload"`
	Lines    []string `json:"lines"`
}

// Logs returns the last tail lines (0: the server's default) of a
// workload's output ("": the primary workload).
func (c *Client) Logs(ctx context.Context, appID, workload string, tail int) (AppLogs, json.RawMessage, error) {
	q := url.Values{}
	if workload != "" {
		q.Set("workload", workload)
	}
	if tail > 0 {
		q.Set("tail", strconv.Itoa(tail))
	}
	return answer[AppLogs](ctx, c, request{method: http.MethodGet, path: appPath(appID) + "/logs", query: q})
}
