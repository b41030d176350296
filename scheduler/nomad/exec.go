package nomad

import (
	"context"
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

// Exec runs a command in the workload's running allocation over Nomad's
// exec websocket (/v1/client/allocation/<id>/exec): JSON frames with
// base64 data, stdin and terminal sizes in, stdout and stderr out (merged
// here, as a terminal merges them), then the exit code. Without a command
// it runs /bin/sh. On a TTY the first frame sets the asked size (24x80
// when unset). Frames are sent in the order of the calls: a Resize before
// a Write reaches the command first. ctx bounds the connection only;
// Close ends the session (Nomad kills the command).
//
// NOT_FOUND for a job Nomad does not run, or a workload it does not have
// or that has no allocation meant to run.
func (r *Runtime) Exec(ctx context.Context, req scheduler.ExecRequest) (scheduler.ExecSession, error) {
	job, err := r.liveJob(ctx, req.JobID)
	if err != nil {
		return nil, err
	}
	known := false
	for _, g := range groups(job) {
		known = known || g == req.Workload
	}
	if !known {
		return nil, workloadNotFound(req.JobID, req.Workload)
	}
	allocs, _, err := r.client.Jobs().Allocations(*job.ID, false, r.query(ctx))
	if err != nil {
		return nil, r.translate(err, "read the allocations of job "+req.JobID, "job "+req.JobID)
	}
	stub := newest(allocs, req.Workload)
	if stub == nil || stub.DesiredStatus != api.AllocDesiredStatusRun {
		return nil, errcode.New(errcode.NotFound, "workload %s of job %s has no running allocation", req.Workload, req.JobID)
	}
	task := taskName(stub.TaskStates, req.Workload)
	command := req.Command
	if len(command) == 0 {
		command = []string{"/bin/sh"}
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

	wmu sync.Mutex // one frame written at a time, in call order

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
	_ = s.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return s.conn.WriteJSON(v)
}

// receive reads frames until the exit code or the connection's end.
func (s *execSession) receive() {
	finish := func(code int, err error) {
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
		case f.Stdout != nil && len(f.Stdout.Data) > 0:
			s.output(f.Stdout.Data)
		case f.Stderr != nil && len(f.Stderr.Data) > 0:
			s.output(f.Stderr.Data)
		}
	}
}

func (s *execSession) output(b []byte) {
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

// Write sends input to the command.
func (s *execSession) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := s.send(&api.ExecStreamingInput{Stdin: &api.ExecStreamingIOOperation{Data: append([]byte(nil), p...)}}); err != nil {
		return 0, err
	}
	return len(p), nil
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

// Close ends the session: the connection closes and Nomad kills the
// command. A Read waiting for output returns io.EOF.
func (s *execSession) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
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
