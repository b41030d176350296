package toolserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/svchost/svc/api"
)

// shape turns an operation's answer into the tool's result: a refusal is
// a tool error; no content says what was done; an image is image content;
// JSON is the API's bytes unchanged as text, and the structured content
// when it is an object; a deploy's answer first says plainly whether it
// runs or waits for approval.
func shape(op api.Operation, ans api.Answer, err error) *mcp.CallToolResult {
	if err != nil {
		return refusalOf(err)
	}
	if len(ans.Body) == 0 {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
			Text: fmt.Sprintf("Done: %s (%s %s answered %d %s).", strings.TrimSuffix(op.Summary, "."), op.Method, op.Path, ans.Status, http.StatusText(ans.Status)),
		}}}
	}
	mediaType, _, _ := mime.ParseMediaType(ans.ContentType)
	if strings.HasPrefix(mediaType, "image/") {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: ans.Body, MIMEType: mediaType}}}
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(ans.Body)}}}
	if bytes.HasPrefix(bytes.TrimSpace(ans.Body), []byte("{")) && json.Valid(ans.Body) {
		res.StructuredContent = json.RawMessage(ans.Body)
	}
	if note := deployNote(op.Name, ans.Body); note != "" {
		res.Content = append([]mcp.Content{&mcp.TextContent{Text: note}}, res.Content...)
	}
	return res
}

// waitingApproval is the state of a deploy held for approval (the
// scheduler's DepWaitingApproval).
const waitingApproval = "waiting_approval"

// deployNote says in words what a deploy's answer means for the
// operations that ask for one, approve one or roll back: that it waits
// for approval and has NOT run (why, and who must approve it with which
// tool), or that it is queued and runs behind the answer. "" for any other
// operation or answer.
func deployNote(opName string, body []byte) string {
	switch opName {
	case "deployments_create", "deployments_approve", "deployments_rollback":
	default:
		return ""
	}
	var v struct {
		Deployment struct {
			api.Deployment
			Approvals []json.RawMessage `json:"approvals"`
		} `json:"deployment"`
	}
	if json.Unmarshal(body, &v) != nil || v.Deployment.ID == "" {
		return ""
	}
	d := v.Deployment
	where := fmt.Sprintf("appID %s, depID %s", d.AppID, d.ID)
	switch d.State {
	case waitingApproval:
		why := strings.Join(d.ApprovalReasons, "; ")
		if why == "" {
			why = "its revision asks for approvals"
		}
		lead := fmt.Sprintf("NOT DEPLOYED: deployment %s (revision %d) is waiting for approval and has NOT run.", d.ID, d.Revision)
		if opName == "deployments_approve" {
			lead = fmt.Sprintf("Approval recorded, but deployment %s (revision %d) still waits for approval and has NOT run.", d.ID, d.Revision)
		}
		return fmt.Sprintf("%s Why: %s. It has %d of the %d approval(s) it needs. Someone other than the person who asked for it, holding app.deploy on the app, must approve it with deployments_approve (%s); deployments_reject ends it. Nothing is built or started until then.",
			lead, why, len(d.Approvals), d.ApprovalsRequired, where)
	case "queued", "building", "starting":
		return fmt.Sprintf("Deployment %s (revision %d) is %s: it builds and starts behind this answer. Follow it with deployments_logs or deployments_get (%s).", d.ID, d.Revision, d.State, where)
	}
	return ""
}

// Bounds of collecting a deploy's log for deployments_logs.
const (
	logWait     = 50 * time.Second
	logMaxBytes = 256 << 10
)

// logs collects a deployment's log until its end event, for at most
// logWait, keeping the last logMaxBytes of it, and says how the deploy
// ended or that it still runs.
func (t *tool) logs(ctx context.Context, client *api.Client, c call) *mcp.CallToolResult {
	ctx, cancel := context.WithTimeout(ctx, logWait)
	defer cancel()
	var log tailBuffer
	end, err := withApp(ctx, client, c, func(c call) (api.DeployEnd, error) {
		log = tailBuffer{max: logMaxBytes}
		return client.FollowDeployment(ctx, c.path["appID"], c.path["depID"], func(l *api.LogLine, _ *api.DeployEnd, _ json.RawMessage) error {
			if l != nil {
				log.add(fmt.Sprintf("%-6s | %s", l.Stream, l.Line))
			}
			return nil
		})
	})
	var apiErr *api.Error
	switch {
	case errors.As(err, &apiErr):
		return refusalOf(err)
	case err != nil && ctx.Err() != nil:
		text := log.String() + fmt.Sprintf("\nThe deploy still runs after %s: this is its log so far. Call deployments_logs again (it replays the whole log) or deployments_get to see how it ends.", logWait)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: map[string]any{"state": "running", "lines_left_out": log.dropped}}
	case err != nil:
		return refusalOf(err)
	}
	outcome := "Ended: " + end.State
	code := ""
	if end.ErrorCode != nil {
		code = *end.ErrorCode
		outcome += " (" + code + ")"
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: log.String() + outcome}},
		StructuredContent: map[string]any{"state": end.State, "error_code": code, "lines_left_out": log.dropped},
	}
}

// tailBuffer keeps the last lines of a log within max bytes, counting
// those it left out.
type tailBuffer struct {
	max     int
	lines   []string
	size    int
	dropped int
}

func (b *tailBuffer) add(line string) {
	b.lines = append(b.lines, line)
	b.size += len(line) + 1
	for b.size > b.max && len(b.lines) > 1 {
		b.size -= len(b.lines[0]) + 1
		b.lines = b.lines[1:]
		b.dropped++
	}
}

func (b *tailBuffer) String() string {
	var s strings.Builder
	if b.dropped > 0 {
		fmt.Fprintf(&s, "(%d earlier lines left out)\n", b.dropped)
	}
	for _, l := range b.lines {
		s.WriteString(l + "\n")
	}
	return s.String()
}
