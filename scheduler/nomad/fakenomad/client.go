package fakenomad

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// clientAlloc finds a running allocation's runtime for the client
// endpoints: 404 "Unknown allocation" as Nomad's client answers.
func (s *Server) clientAlloc(w http.ResponseWriter, id string) (*alloc, *process.Runtime, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		codedError(w, http.StatusNotFound, fmt.Sprintf("Unknown allocation %q", id))
		return nil, nil, false
	}
	if a.rt == nil {
		codedError(w, http.StatusInternalServerError, "allocation is not running yet")
		return nil, nil, false
	}
	return a, a.rt, true
}

func (s *Server) allocRestart(w http.ResponseWriter, r *http.Request) {
	var req api.AllocationRestartRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			codedError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	a, rt, ok := s.clientAlloc(w, r.PathValue("id"))
	if !ok {
		return
	}
	s.mu.Lock()
	if req.TaskName != "" && a.tasks[req.TaskName] == nil {
		s.mu.Unlock()
		codedError(w, http.StatusBadRequest, fmt.Sprintf("Unknown task %q", req.TaskName))
		return
	}
	if a.desired != "run" {
		s.mu.Unlock()
		codedError(w, http.StatusBadRequest, "Allocation is not running")
		return
	}
	for name := range a.tasks {
		if req.TaskName == "" || req.TaskName == name {
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskRestartSignal, DisplayMessage: "User requested task to restart"})
		}
	}
	a.modifyIndex = s.bumpLocked("allocs")
	s.mu.Unlock()
	// Nomad's client signals the restart and answers; the task runner
	// restarts the task in the background.
	go func() { _ = rt.Restart(context.Background(), pjob) }()
	s.writeJSON(w, s.currentIndex(), struct{}{})
}

func (s *Server) allocStats(w http.ResponseWriter, r *http.Request) {
	_, rt, ok := s.clientAlloc(w, r.PathValue("id"))
	if !ok {
		return
	}
	u, err := rt.Usage(r.Context(), pjob)
	if err != nil {
		codedError(w, http.StatusInternalServerError, err.Error())
		return
	}
	now := time.Now().UnixNano()
	out := api.AllocResourceUsage{ResourceUsage: &api.ResourceUsage{MemoryStats: &api.MemoryStats{}, CpuStats: &api.CpuStats{}},
		Tasks: map[string]*api.TaskResourceUsage{}, Timestamp: now}
	for name, wu := range u.Workloads {
		ru := &api.ResourceUsage{
			MemoryStats: &api.MemoryStats{RSS: uint64(wu.MemoryBytes), Usage: uint64(wu.MemoryBytes), Measured: []string{"RSS", "Usage"}},
			CpuStats: &api.CpuStats{Percent: float64(wu.CPUMillis) / 10, TotalTicks: float64(wu.CPUMillis),
				Measured: []string{"Percent", "Total Ticks"}},
		}
		out.Tasks[name] = &api.TaskResourceUsage{ResourceUsage: ru, Timestamp: now}
		out.ResourceUsage.MemoryStats.RSS += ru.MemoryStats.RSS
		out.ResourceUsage.MemoryStats.Usage += ru.MemoryStats.Usage
		out.ResourceUsage.CpuStats.Percent += ru.CpuStats.Percent
		out.ResourceUsage.CpuStats.TotalTicks += ru.CpuStats.TotalTicks
	}
	s.writeJSON(w, s.currentIndex(), out)
}

// allocChecks answers the allocation's Nomad service checks: one per
// check of the group's services whose provider is Nomad (Consul's checks
// are Consul's), its status from the task's health.
func (s *Server) allocChecks(w http.ResponseWriter, r *http.Request) {
	a, _, ok := s.clientAlloc(w, r.PathValue("id"))
	if !ok {
		return
	}
	s.mu.Lock()
	out := api.AllocCheckStatuses{}
	task := a.tg.Tasks[0].Name
	services := append([]*api.Service(nil), a.tg.Services...)
	for _, t := range a.tg.Tasks {
		services = append(services, t.Services...)
	}
	for _, svc := range services {
		if svc.Provider != "nomad" {
			continue
		}
		for i, c := range svc.Checks {
			status := a.checks[task]
			if status == "" {
				status = "pending"
			}
			id := fmt.Sprintf("%s-%s-%d", a.id[:8], svc.Name, i)
			out[id] = api.AllocCheckStatus{ID: id, Check: c.Name, Group: a.group, Mode: "healthiness", Service: svc.Name,
				Task: svc.TaskName, Status: status, Timestamp: time.Now().Unix()}
		}
	}
	s.mu.Unlock()
	s.writeJSON(w, s.currentIndex(), out)
}

// allocLogs serves a task's kept log: type=stdout is the task's whole
// output (the process runtime keeps one stream), type=stderr is empty.
// origin=start|end with offset picks the bytes; plain=true answers them
// raw, else as one StreamFrame.
func (s *Server) allocLogs(w http.ResponseWriter, r *http.Request) {
	if s.batchLogs(w, r) {
		return
	}
	q := r.URL.Query()
	a, rt, ok := s.clientAlloc(w, r.PathValue("id"))
	if !ok {
		return
	}
	task := q.Get("task")
	s.mu.Lock()
	known := a.tasks[task] != nil
	s.mu.Unlock()
	if !known {
		codedError(w, http.StatusBadRequest, fmt.Sprintf("unknown task name %q", task))
		return
	}
	if q.Get("follow") == "true" {
		codedError(w, http.StatusBadRequest, "the fake does not follow logs")
		return
	}
	var data []byte
	switch q.Get("type") {
	case "stdout":
		lines, err := rt.Logs(r.Context(), pjob, task)
		if err != nil {
			codedError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if len(lines) > 0 {
			data = []byte(strings.Join(lines, "\n") + "\n")
		}
	case "stderr":
	default:
		codedError(w, http.StatusBadRequest, "must provide log type (stdout/stderr)")
		return
	}
	serveLogBytes(w, q.Get("origin"), q.Get("offset"), q.Get("plain") == "true", task+"."+q.Get("type")+".0", data)
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// allocExec runs a command in a task over Nomad's exec websocket, as
// Nomad v2's agent and executor do (command/agent/alloc_endpoint.go,
// client/alloc_endpoint.go, drivers/shared/executor/exec_utils.go).
//
// Before the upgrade a command that is not a JSON list, or a tty that is
// not a boolean, answers 500. After it, refusals are close frames: 1008
// with Nomad's text for an unknown allocation, no task, an empty command,
// an unknown task or one not running; 1011 for a command that cannot
// start.
//
// Frames in: stdin data, stdin close, tty_size, and anything else as a
// heartbeat. Frames out: output data, a close frame per stream, then
// exited with the exit code (left out when 0, as Nomad's JSON codec
// leaves it out); then the connection closes with no close frame.
// Without a TTY the executor waits for the command's input as it waits
// for the command, so the end of the output and the exit code are sent
// only once stdin is closed, or written after the command ended. A
// tty_size without a TTY stops the executor reading input ("failed to
// resize tty"), as does data after stdin closed, so such a session never
// reports its end. A frame that is not JSON ends the session with 1011
// when the next output comes. A closed connection is noticed only when
// the command next writes output, which kills it; the allocation
// stopping kills it too.
//
// Known differences: stdout and stderr come as one stream (the process
// runtime merges them), sent as stdout; stdin close cannot end the
// command's input (the process runtime's session has no half-close), it
// only lets the end be reported.
func (s *Server) allocExec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var command []string
	if err := json.Unmarshal([]byte(q.Get("command")), &command); err != nil {
		codedError(w, http.StatusInternalServerError, "failed to marshal command into json: "+err.Error())
		return
	}
	tty := false
	if v := q.Get("tty"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			codedError(w, http.StatusInternalServerError, "tty value is not a boolean: "+err.Error())
			return
		}
		tty = b
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	// refuse sends Nomad's close frame for an error of the HTTP status.
	refuse := func(status int, msg string) {
		code := websocket.ClosePolicyViolation
		if status == http.StatusInternalServerError {
			code = websocket.CloseInternalServerErr
		}
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, msg), time.Now().Add(time.Second))
	}
	id, task := r.PathValue("id"), q.Get("task")
	s.mu.Lock()
	a := s.allocs[id]
	var rt *process.Runtime
	var stop chan struct{}
	known := false
	if a != nil {
		rt, known, stop = a.rt, a.tasks[task] != nil, a.stopCh
	}
	s.mu.Unlock()
	switch {
	case a == nil:
		refuse(http.StatusNotFound, fmt.Sprintf("Unknown allocation %q", id))
		return
	case task == "":
		refuse(http.StatusBadRequest, "must provide task name")
		return
	case len(command) == 0:
		refuse(http.StatusBadRequest, "command is not present")
		return
	case !known:
		refuse(http.StatusBadRequest, fmt.Sprintf("unknown task name %q", task))
		return
	case rt == nil:
		refuse(http.StatusNotFound, fmt.Sprintf("task %q is not running.", task))
		return
	}
	sess, err := rt.Exec(context.Background(), scheduler.ExecRequest{JobID: pjob, Workload: task, Command: command, TTY: tty})
	if err != nil {
		refuse(http.StatusInternalServerError, "failed to start command: "+err.Error())
		return
	}
	defer sess.Close()
	finished := make(chan struct{})
	defer close(finished)
	stopped := make(chan struct{})
	go func() {
		select {
		case <-stop:
			close(stopped)
			_ = sess.Close()
		case <-finished:
		}
	}()

	inputEnded := make(chan struct{}) // Nomad's executor saw the input end
	var endOnce sync.Once
	endInput := func() { endOnce.Do(func() { close(inputEnded) }) }
	var inMu sync.Mutex
	var inErr error // a frame that was not JSON
	go func() {
		stdinClosed := false
		for {
			var in api.ExecStreamingInput
			if err := conn.ReadJSON(&in); err != nil {
				var syntax *json.SyntaxError
				var typ *json.UnmarshalTypeError
				if errors.As(err, &syntax) || errors.As(err, &typ) {
					inMu.Lock()
					inErr = err
					inMu.Unlock()
				}
				return
			}
			switch {
			case in.Stdin != nil:
				if len(in.Stdin.Data) > 0 {
					if stdinClosed {
						return // the executor's write fails: it reads no more input
					}
					if _, err := sess.Write(in.Stdin.Data); err != nil {
						// The command ended: the executor's copy of its
						// input fails, and its wait returns.
						endInput()
					}
				}
				if in.Stdin.Close {
					stdinClosed = true
					endInput()
				}
			case in.TTYSize != nil:
				if !tty {
					return // "failed to resize tty: attempted to resize a non-tty session"
				}
				_ = sess.Resize(uint16(in.TTYSize.Height), uint16(in.TTYSize.Width))
			}
		}
	}()

	send := func(v any) bool {
		inMu.Lock()
		bad := inErr
		inMu.Unlock()
		if bad != nil {
			refuse(http.StatusInternalServerError, bad.Error())
			return false
		}
		return conn.WriteJSON(v) == nil
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := sess.Read(buf)
		if n > 0 && !send(api.ExecStreamingOutput{Stdout: &api.ExecStreamingIOOperation{Data: append([]byte(nil), buf[:n]...)}}) {
			return
		}
		if err != nil {
			break
		}
	}
	code, _ := sess.Wait()
	if !tty {
		select {
		case <-inputEnded:
		case <-stopped:
		}
	}
	select {
	case <-stopped:
		refuse(http.StatusInternalServerError, "the allocation stopped")
		return
	default:
	}
	if !tty && !send(api.ExecStreamingOutput{Stderr: &api.ExecStreamingIOOperation{Close: true}}) {
		return
	}
	if !send(api.ExecStreamingOutput{Stdout: &api.ExecStreamingIOOperation{Close: true}}) {
		return
	}
	exited := execExited{Exited: true}
	exited.Result.ExitCode = code
	_ = send(exited)
}

// execExited is the exited frame as Nomad's agent writes it: the driver's
// protobuf message through Nomad's JSON codec, whose exit_code is left
// out when 0.
type execExited struct {
	Exited bool `json:"exited"`
	Result struct {
		ExitCode int `json:"exit_code,omitempty"`
	} `json:"result"`
}
