package nomad

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// execHeartbeat is how often an idle session sends Nomad an empty frame,
// as Nomad's own client does.
const execHeartbeat = 10 * time.Second

// endScript runs a command without a TTY ($2 on) and then writes $1, the
// session's end marker, to stderr, exiting with the command's status.
const endScript = `m=$1; shift; (exec "$@"); s=$?; printf %s "$m" >&2; exit "$s"`

// newEndMarker returns a marker no command writes by chance.
func newEndMarker() ([]byte, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	return []byte("\x1esvc-exec-end-" + hex.EncodeToString(b[:])), nil
}

// Exec runs a command in the workload's running allocation over Nomad's
// exec websocket (/v1/client/allocation/<id>/exec, as Nomad's own client
// speaks it in api/allocations_exec.go): JSON frames with base64 data,
// stdin (data, then close) and terminal sizes in; stdout and stderr out
// (merged here, as a terminal merges them), each ending with a close
// frame, then the exit code. Without a command it runs /bin/sh. On a TTY
// the first frame sets the asked size (24x80 when unset). Frames are sent
// in the order of the calls: a Resize before a Write reaches the command
// first. ctx bounds the connection only.
//
// Without a TTY the command runs under /bin/sh, which reports its end:
// Nomad's executor feeds such a command's input through a pipe of its own
// and waits for that pipe as it waits for the command
// (drivers/shared/executor/exec_utils.go, runNoTTY, and os/exec's Wait),
// so Nomad sends neither the output's end nor the exit code until the
// client closes stdin, whatever the command did. A session's input stays
// open until Close, so the shell runs the command (exec'd in a subshell,
// as Nomad would run it: never a shell builtin), then writes a random
// marker to stderr; the session takes the marker out of the output,
// closes stdin, and Nomad reports the exit code (128 plus the signal for
// a command a signal killed, as Nomad reports it; the shell also writes
// its one-line report of the signal to stderr). The task needs /bin/sh,
// as a shell session does.
//
// Close closes stdin (without a TTY the command reads the end of its
// input) and the connection. Nomad notices a closed connection only when
// it next relays output (command/agent/alloc_endpoint.go,
// execStreamImpl), and then kills the process it started: the command on
// a TTY; without one the shell, which leaves the command to end by
// itself. A command that writes nothing more runs until it ends or its
// allocation stops.
//
// NOT_FOUND for a job Nomad does not run, or a workload it does not have
// or that has no allocation meant to run.
func (r *Runtime) Exec(ctx context.Context, req scheduler.ExecRequest) (scheduler.ExecSession, error) {
	job, err := r.liveJob(ctx, req.JobID)
	if err != nil {
		return nil, err
	}
	known := false
	for _, g := range groups(job.Job) {
		known = known || g == req.Workload
	}
	if !known {
		return nil, workloadNotFound(req.JobID, req.Workload)
	}
	allocs, _, err := r.client.Jobs().Allocations(*job.ID, false, r.query(ctx))
	if err != nil {
		return nil, r.translate(err, "read the allocations of job "+req.JobID, "job "+req.JobID)
	}
	stub := job.pick(allocs, req.Workload)
	if stub == nil || stub.DesiredStatus != api.AllocDesiredStatusRun {
		return nil, errcode.New(errcode.NotFound, "workload %s of job %s has no running allocation", req.Workload, req.JobID)
	}
	task := taskName(stub.TaskStates, req.Workload)
	command := req.Command
	if len(command) == 0 {
		command = []string{"/bin/sh"}
	}
	var marker []byte
	if !req.TTY {
		if marker, err = newEndMarker(); err != nil {
			return nil, err
		}
		command = append([]string{"/bin/sh", "-c", endScript, "sh", string(marker)}, command...)
	}
	cmdJSON, err := json.Marshal(command)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(r.cfg.Address)
	if err != nil {
		return nil, err
	}
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path = "/v1/client/allocation/" + url.PathEscape(stub.ID) + "/exec"
	q := url.Values{"task": {task}, "tty": {strconv.FormatBool(req.TTY)}, "command": {string(cmdJSON)}}
	if r.cfg.Namespace != "" {
		q.Set("namespace", r.cfg.Namespace)
	}
	if r.cfg.Region != "" {
		q.Set("region", r.cfg.Region)
	}
	u.RawQuery = q.Encode()
	header := http.Header{}
	if r.cfg.Token != "" {
		header.Set("X-Nomad-Token", r.cfg.Token)
	}
	dialer := websocket.Dialer{TLSClientConfig: r.tls, HandshakeTimeout: 30 * time.Second, Proxy: http.ProxyFromEnvironment}
	conn, resp, err := dialer.DialContext(ctx, u.String(), header)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			return nil, r.byStatus(resp.StatusCode, fmt.Errorf("exec: %s", body), "exec in allocation "+stub.ID, "allocation "+stub.ID)
		}
		return nil, r.translate(err, "exec in allocation "+stub.ID, "allocation "+stub.ID)
	}
	s := &execSession{conn: conn, tty: req.TTY, done: make(chan struct{}), closed: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	if marker != nil {
		s.stdout, s.stderr = &endScanner{marker: marker}, &endScanner{marker: marker}
	}
	if req.TTY {
		rows, cols := req.Rows, req.Cols
		if rows == 0 || cols == 0 {
			rows, cols = 24, 80
		}
		if err := s.Resize(rows, cols); err != nil {
			conn.Close()
			return nil, r.translate(err, "exec in allocation "+stub.ID, "allocation "+stub.ID)
		}
	}
	go s.receive()
	go s.heartbeat()
	return s, nil
}

// execSession is a command running over Nomad's exec websocket.
type execSession struct {
	conn *websocket.Conn
	tty  bool
	// stdout and stderr find the end marker in each stream (nil on a
	// TTY); only receive uses them.
	stdout, stderr *endScanner

	wmu      sync.Mutex // one frame written at a time, in call order
	inClosed bool       // stdin was closed (under wmu)

	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte // output not read yet
	eof  bool   // no more output will come
	code int
	err  error

	done      chan struct{} // closed when the command's end is known
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

var _ scheduler.ExecSession = (*execSession)(nil)

func (s *execSession) send(v *api.ExecStreamingInput) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.sendLocked(v)
}

func (s *execSession) sendLocked(v *api.ExecStreamingInput) error {
	_ = s.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return s.conn.WriteJSON(v)
}

// receive reads frames until the exit code or the connection's end.
func (s *execSession) receive() {
	finish := func(code int, err error) {
		s.output(s.stdout.flush())
		s.output(s.stderr.flush())
		s.mu.Lock()
		s.eof, s.code, s.err = true, code, err
		s.cond.Broadcast()
		s.mu.Unlock()
		close(s.done)
	}
	for {
		var f api.ExecStreamingOutput
		if err := s.conn.ReadJSON(&f); err != nil {
			var ce *websocket.CloseError
			switch {
			case errors.As(err, &ce) && ce.Code != websocket.CloseNormalClosure:
				finish(-1, fmt.Errorf("nomad ended the exec session: %d %s", ce.Code, ce.Text))
			default:
				finish(-1, errors.New("the exec session ended before the command's exit code came"))
			}
			return
		}
		switch {
		case f.Exited && f.Result != nil:
			finish(f.Result.ExitCode, nil)
			return
		case f.Stdout != nil:
			s.stream(s.stdout, f.Stdout)
		case f.Stderr != nil:
			s.stream(s.stderr, f.Stderr)
		}
		// Anything else is a heartbeat.
	}
}

// stream takes one frame of an output stream: its data is output, less
// the end marker, whose arrival closes stdin so that Nomad reports the
// exit code.
func (s *execSession) stream(sc *endScanner, op *api.ExecStreamingIOOperation) {
	out, ended := sc.scan(op.Data)
	if op.Close {
		out = append(out, sc.flush()...)
	}
	s.output(out)
	if ended {
		_ = s.closeInput()
	}
}

func (s *execSession) output(b []byte) {
	if len(b) == 0 {
		return
	}
	s.mu.Lock()
	s.buf = append(s.buf, b...)
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *execSession) heartbeat() {
	t := time.NewTicker(execHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.closed:
			return
		case <-t.C:
			_ = s.send(&api.ExecStreamingInput{})
		}
	}
}

// Read reads the command's output; io.EOF once it ended and its output
// is drained.
func (s *execSession) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.buf) == 0 && !s.eof {
		s.cond.Wait()
	}
	if len(s.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// Write sends input to the command; io.ErrClosedPipe once stdin is
// closed (the command ended, or Close).
func (s *execSession) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.inClosed {
		return 0, io.ErrClosedPipe
	}
	if err := s.sendLocked(&api.ExecStreamingInput{Stdin: &api.ExecStreamingIOOperation{Data: append([]byte(nil), p...)}}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// closeInput closes the command's stdin, once.
func (s *execSession) closeInput() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.inClosed {
		return nil
	}
	s.inClosed = true
	return s.sendLocked(&api.ExecStreamingInput{Stdin: &api.ExecStreamingIOOperation{Close: true}})
}

// Resize sends the terminal's new size; a no-op without a TTY.
func (s *execSession) Resize(rows, cols uint16) error {
	if !s.tty {
		return nil
	}
	return s.send(&api.ExecStreamingInput{TTYSize: &api.TerminalSize{Height: int(rows), Width: int(cols)}})
}

// Wait waits for the command to end and returns its exit code.
func (s *execSession) Wait() (int, error) {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code, s.err
}

// Close ends the session: it closes stdin (see Exec for what that does to
// the command) and the connection. A Read waiting for output returns
// io.EOF.
func (s *execSession) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		_ = s.closeInput()
		s.wmu.Lock()
		_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		s.wmu.Unlock()
		_ = s.conn.Close()
		s.mu.Lock()
		s.eof = true
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	return nil
}

// endScanner finds the end marker in one output stream. A nil scanner
// passes everything through.
type endScanner struct {
	marker []byte
	held   []byte // the stream's last bytes, which may begin the marker
	found  bool
}

// scan returns the bytes of b (after those held back) that are output,
// without the marker, and whether the marker came with them. It holds
// back a tail that may be the marker's first part until the next call
// or flush.
func (e *endScanner) scan(b []byte) (out []byte, ended bool) {
	if e == nil || e.found {
		return b, false
	}
	buf := append(e.held, b...)
	e.held = nil
	if i := bytes.Index(buf, e.marker); i >= 0 {
		e.found = true
		return append(buf[:i:i], buf[i+len(e.marker):]...), true
	}
	k := partialSuffix(buf, e.marker)
	e.held = append([]byte(nil), buf[len(buf)-k:]...)
	return buf[:len(buf)-k], false
}

// flush returns what scan held back: the stream ended.
func (e *endScanner) flush() []byte {
	if e == nil {
		return nil
	}
	b := e.held
	e.held = nil
	return b
}

// partialSuffix is the length of the longest tail of b that is a proper
// beginning of m.
func partialSuffix(b, m []byte) int {
	for k := min(len(b), len(m)-1); k > 0; k-- {
		if bytes.Equal(b[len(b)-k:], m[:k]) {
			return k
		}
	}
	return 0
}
