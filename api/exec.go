package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ExecOptions is what a terminal in a workload runs: in Workload ("": the
// app's primary workload), Command with its arguments (none: a shell), at
// Rows by Cols (0: the server's default, 24 by 80).
type ExecOptions struct {
	Workload   string
	Command    []string
	Rows, Cols int
}

// execHandshakeTimeout bounds opening the websocket (the HTTP upgrade);
// the terminal itself lasts as long as its command.
const execHandshakeTimeout = 30 * time.Second

// maxExecMessage caps a message from the server (its output comes in
// pieces of 32 KiB).
const maxExecMessage = 1 << 20

// ExecSession is a terminal in a workload over the API's websocket (GET
// /api/v1/apps/{appID}/exec): Read is the terminal's output, Write types
// into it, Resize changes its size, Wait returns the command's exit code.
// Read and Write may be called from different goroutines.
type ExecSession struct {
	conn   *websocket.Conn
	ctx    context.Context // ends when the session is closed
	cancel context.CancelFunc
	out    *io.PipeReader
	done   chan struct{} // closed when the server's messages end
	code   int
	err    error // why they ended without an exit message
	once   sync.Once
}

// Exec opens a terminal in one of the app's running workloads. A refusal
// before the upgrade (a policy that turns exec off, a missing verb, an app
// not running) is an *Error with the API's code. The handshake carries
// the client's bearer token and no Origin: the server refuses a browser's
// upgrade from another origin, and this is no browser.
func (c *Client) Exec(ctx context.Context, appID string, o ExecOptions) (*ExecSession, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + appPath(appID) + "/exec"
	u.RawQuery = execQuery(o).Encode()
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.Timeout = 0 // the connection outlives the handshake
	hctx, cancel := context.WithTimeout(ctx, execHandshakeTimeout)
	defer cancel()
	conn, resp, err := websocket.Dial(hctx, u.String(), &websocket.DialOptions{HTTPClient: &hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			b, _ := io.ReadAll(resp.Body) // Dial kept the first KiB of it
			return nil, errorOf(resp, b)
		}
		return nil, fmt.Errorf("api: exec in app %s: %w", appID, err)
	}
	conn.SetReadLimit(maxExecMessage)
	sctx, scancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &ExecSession{conn: conn, ctx: sctx, cancel: scancel, out: pr, done: make(chan struct{})}
	go s.receive(pw)
	return s, nil
}

// execQuery is the exec route's query for o.
func execQuery(o ExecOptions) url.Values {
	q := url.Values{}
	if o.Workload != "" {
		q.Set("workload", o.Workload)
	}
	for _, a := range o.Command {
		q.Add("command", a)
	}
	if o.Rows > 0 && o.Cols > 0 {
		q.Set("rows", strconv.Itoa(o.Rows))
		q.Set("cols", strconv.Itoa(o.Cols))
	}
	return q
}

// execMessage is a control message of the exec websocket: the server's
// exit, the client's resize.
type execMessage struct {
	Type string `json:"type"`
	Code int    `json:"code,omitempty"`
	Rows int    `json:"rows,omitempty"`
	Cols int    `json:"cols,omitempty"`
}

// receive hands the terminal's output to Read until the server's exit
// message and normal close, or the connection breaks.
func (s *ExecSession) receive(pw *io.PipeWriter) {
	defer close(s.done)
	exited := false
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			switch {
			case exited && websocket.CloseStatus(err) == websocket.StatusNormalClosure:
				err = nil
			case exited:
				err = nil // the exit message is the outcome; a broken close after it changes nothing
			case s.ctx.Err() != nil:
				err = errors.New("api: exec: the session was closed before the command ended")
			default:
				err = fmt.Errorf("api: exec: the connection ended before the command did: %w", err)
			}
			s.err = err
			pw.CloseWithError(cmpErr(err, io.EOF))
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := pw.Write(data); err != nil {
				s.cancel() // the reader is gone: end the session
			}
			continue
		}
		var m execMessage
		if json.Unmarshal(data, &m) == nil && m.Type == "exit" {
			s.code, exited = m.Code, true
			pw.Close() // Read sees the end of the output now
		}
	}
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// Read reads the terminal's output; io.EOF once the command ended.
func (s *ExecSession) Read(p []byte) (int, error) { return s.out.Read(p) }

// Write types p into the terminal.
func (s *ExecSession) Write(p []byte) (int, error) {
	if err := s.conn.Write(s.ctx, websocket.MessageBinary, p); err != nil {
		return 0, fmt.Errorf("api: exec: write: %w", err)
	}
	return len(p), nil
}

// Resize changes the terminal's size (1 to 1000 rows and columns).
func (s *ExecSession) Resize(ctx context.Context, rows, cols int) error {
	b, _ := json.Marshal(execMessage{Type: "resize", Rows: rows, Cols: cols})
	if err := s.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("api: exec: resize: %w", err)
	}
	return nil
}

// Wait waits for the command to end and returns its exit code; an error
// when the connection ended (or the session was closed) without the
// server's exit message.
func (s *ExecSession) Wait() (int, error) {
	<-s.done
	return s.code, s.err
}

// Close ends the session: a command still running is ended by the
// server.
func (s *ExecSession) Close() error {
	s.once.Do(func() {
		select {
		case <-s.done:
		default:
			_ = s.conn.Close(websocket.StatusNormalClosure, "")
		}
		s.cancel()
		_ = s.conn.CloseNow()
		_ = s.out.Close()
	})
	return nil
}
