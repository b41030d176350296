package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/websec"
	"github.com/svchost/svc/scheduler"
)

// The exec terminal: GET /api/v1/apps/{appID}/exec upgrades to a websocket
// that carries a terminal (a pseudo-terminal) in one of the app's running
// workloads.
//
// Query: workload (default the primary workload), command (repeatable: the
// program and its arguments; default a shell), rows and cols (the
// terminal's size, 1 to maxTermSize; default 24 by 80).
//
// Framing:
//   - binary messages carry the terminal's bytes, both ways: what the client
//     sends is typed into the terminal, what the server sends is its output;
//   - text messages from the client are JSON control messages; the one there
//     is: {"type":"resize","rows":R,"cols":C}. A malformed one closes the
//     connection with status 1007 (invalid payload);
//   - when the command ends, the server sends the text message
//     {"type":"exit","code":N} and closes normally (1000). A client that
//     closes ends the command.
//
// Opening a terminal is audited (app.exec) and emits app.shell_opened, with
// the command, never what is typed. Host policy's disabled_verbs turning
// app.exec off refuses everyone, the owner included, with
// POLICY_EXEC_DISABLED (the route's disabledCode). A browser's upgrade from
// another origin is refused (PERM_DENIED): a GET is not covered by the
// cross-origin check of state-changing requests, and the session cookie
// would otherwise let any site open a terminal. Clients with a bearer token
// (the CLI) send no Origin.
const execFraming = "binary messages carry terminal bytes both ways; text messages from the client are JSON control messages " +
	`{"type":"resize","rows":R,"cols":C}; when the command ends the server sends the text message {"type":"exit","code":N} and closes normally (1000)`

const (
	defaultRows, defaultCols = 24, 80
	// maxTermSize caps a terminal's rows and columns.
	maxTermSize = 1000
	// maxExecMessage caps a message from the client.
	maxExecMessage = 64 << 10
	// exitWriteTimeout bounds sending the exit message to a client that
	// stopped reading.
	exitWriteTimeout = 10 * time.Second
)

// execQuery is what GET /exec takes in its query.
type execQuery struct {
	workload   string
	command    []string
	rows, cols uint16
}

func parseExecQuery(c echo.Context) (execQuery, error) {
	q := execQuery{workload: c.QueryParam("workload"), command: c.QueryParams()["command"]}
	if len(q.command) > 0 && q.command[0] == "" {
		return q, errcode.Invalid("command", "command names a program first; omit it for a shell")
	}
	rows, err := queryInt(c, "rows", defaultRows, 1, maxTermSize)
	if err != nil {
		return q, err
	}
	cols, err := queryInt(c, "cols", defaultCols, 1, maxTermSize)
	if err != nil {
		return q, err
	}
	q.rows, q.cols = uint16(rows), uint16(cols)
	return q, nil
}

// getExec opens a terminal in a workload over a websocket (see execFraming).
func (s *Server) getExec(c echo.Context) error {
	q, err := parseExecQuery(c)
	if err != nil {
		return err
	}
	if err := s.checkUpgrade(c.Request()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	go func() {
		// A shutdown (a restart, the process stopping) ends the terminal.
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	sess, err := s.d.Workloads.Exec(ctx, c.Param("appID"), q.workload, q.command, q.rows, q.cols)
	if err != nil {
		return err
	}
	term := &terminal{sess: sess}
	defer term.close()
	conn, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{OriginPatterns: s.trustedOriginHosts()})
	if err != nil {
		return err // Accept answered
	}
	if err := term.serve(ctx, cancel, conn); err != nil {
		s.reqLog(c).Warn("exec session", "err", err)
	}
	return nil
}

// checkUpgrade refuses, before anything is opened or audited, a request
// that is not a websocket handshake, and a browser's handshake from an
// origin other than this server's own (or the external URL's).
func (s *Server) checkUpgrade(r *http.Request) error {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket") {
		return errcode.New(errcode.ValidInvalid, "this endpoint is a websocket: send an upgrade request").
			WithStatus(http.StatusUpgradeRequired).WithRemedy("connect with a websocket client (Connection: Upgrade, Upgrade: websocket)")
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" || len(r.Header.Values("Sec-WebSocket-Key")) != 1 {
		return errcode.New(errcode.ValidInvalid, "a websocket handshake needs Sec-WebSocket-Version: 13 and one Sec-WebSocket-Key")
	}
	// Browsers send Origin on every websocket handshake, and fetch
	// metadata (Sec-Fetch-Site) where they support it; the rule is the one
	// cookie credentials follow: same-origin, or a client that sends
	// neither (not a browser). A page of an app (another origin; in path
	// mode an opaque one, Origin: null) is refused.
	if d := websec.CookieAllowed(r, s.trustedOrigins()...); !d.Allowed {
		return errcode.New(errcode.PermDenied, "cross-site websocket refused: %s", d.Reason).
			WithRemedy("open the terminal from the console's own origin, or connect with a bearer token")
	}
	return nil
}

// trustedOriginHosts is the external URL's host, if one is configured: the
// origin browsers use when another component terminates TLS.
func (s *Server) trustedOriginHosts() []string {
	u, err := url.Parse(s.d.Config.Server.ExternalURL)
	if err != nil || u.Host == "" {
		return nil
	}
	// Matched by coder/websocket with path.Match: escape its metacharacters.
	return []string{strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(u.Host)}
}

// headerHasToken reports whether a comma-separated header holds a token
// (case-insensitively).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// terminal joins an exec session to a websocket.
type terminal struct {
	sess scheduler.ExecSession
	once sync.Once
}

// close ends the session (the command) once.
func (t *terminal) close() { t.once.Do(func() { _ = t.sess.Close() }) }

type execExit struct {
	Type string `json:"type"` // "exit"
	Code int    `json:"code"`
}

// serve copies the terminal's output to the websocket and the client's
// input to the terminal until the command ends (then it sends the exit
// message and closes normally) or the client goes (then it ends the
// command).
func (t *terminal) serve(ctx context.Context, cancel context.CancelFunc, conn *websocket.Conn) error {
	conn.SetReadLimit(maxExecMessage)
	input := make(chan struct{})
	go func() {
		defer close(input)
		defer cancel()
		defer t.close() // the client went: end the command
		t.input(ctx, conn)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := t.sess.Read(buf)
		if n > 0 {
			if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				t.close()
				break
			}
		}
		if err != nil {
			break
		}
	}
	code, werr := t.sess.Wait()
	if ctx.Err() == nil {
		msg, _ := json.Marshal(execExit{Type: "exit", Code: code})
		wctx, wcancel := context.WithTimeout(ctx, exitWriteTimeout)
		if err := conn.Write(wctx, websocket.MessageText, msg); err == nil {
			_ = conn.Close(websocket.StatusNormalClosure, "")
		}
		wcancel()
	}
	cancel()
	_ = conn.CloseNow()
	<-input
	if werr != nil && ctx.Err() == nil {
		return fmt.Errorf("wait for the command: %w", werr)
	}
	return nil
}

// input types what the client sends into the terminal and applies its
// control messages, until the connection ends.
func (t *terminal) input(ctx context.Context, conn *websocket.Conn) {
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := t.sess.Write(data); err != nil {
				return
			}
			continue
		}
		ctl, err := parseExecControl(data)
		if err != nil {
			_ = conn.Close(websocket.StatusInvalidFramePayloadData, closeReason(err.Error()))
			return
		}
		_ = t.sess.Resize(ctl.Rows, ctl.Cols)
	}
}

// closeReason fits a close reason in a control frame (123 bytes).
func closeReason(s string) string {
	if len(s) <= 120 {
		return s
	}
	return strings.ToValidUTF8(s[:120], "")
}

// execControl is a control message of the exec websocket.
type execControl struct {
	Type string `json:"type"`
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// parseExecControl reads one control message strictly: one JSON object,
// no unknown fields, of a known type with its fields in range.
func parseExecControl(b []byte) (execControl, error) {
	var raw struct {
		Type string `json:"type"`
		Rows *int   `json:"rows"`
		Cols *int   `json:"cols"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return execControl{}, fmt.Errorf("control message: not a JSON object of type, rows and cols: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return execControl{}, errors.New("control message: data after the JSON object")
	}
	if raw.Type != "resize" {
		return execControl{}, fmt.Errorf("control message: unknown type %q (known: resize)", raw.Type)
	}
	if raw.Rows == nil || raw.Cols == nil || *raw.Rows < 1 || *raw.Rows > maxTermSize || *raw.Cols < 1 || *raw.Cols > maxTermSize {
		return execControl{}, fmt.Errorf("control message: resize needs rows and cols from 1 to %d", maxTermSize)
	}
	return execControl{Type: raw.Type, Rows: uint16(*raw.Rows), Cols: uint16(*raw.Cols)}, nil
}
