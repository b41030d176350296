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

// allocExec runs a command in a task over Nomad's exec websocket: JSON
// frames in (stdin data or close, tty_size) and out (stdout data, then
// exited with the exit code). Errors after the upgrade are close frames,
// as Nomad sends them.
func (s *Server) allocExec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var command []string
	if err := json.Unmarshal([]byte(q.Get("command")), &command); err != nil || len(command) == 0 {
		codedError(w, http.StatusBadRequest, "command is not a JSON list of strings")
		return
	}
	tty, _ := strconv.ParseBool(q.Get("tty"))
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	closeWith := func(code int, msg string) {
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, msg), time.Now().Add(time.Second))
	}
	s.mu.Lock()
	a := s.allocs[r.PathValue("id")]
	var rt *process.Runtime
	known := false
	if a != nil {
		rt, known = a.rt, a.tasks[q.Get("task")] != nil
	}
	s.mu.Unlock()
	switch {
	case a == nil:
		closeWith(websocket.ClosePolicyViolation, "Unknown allocation")
		return
	case !known:
		closeWith(websocket.ClosePolicyViolation, fmt.Sprintf("task %q not found", q.Get("task")))
		return
	case rt == nil:
		closeWith(websocket.CloseInternalServerErr, "task not running")
		return
	}
	sess, err := rt.Exec(r.Context(), scheduler.ExecRequest{JobID: pjob, Workload: q.Get("task"), Command: command, TTY: tty})
	if err != nil {
		closeWith(websocket.CloseInternalServerErr, err.Error())
		return
	}
	defer sess.Close()
	var wmu sync.Mutex
	send := func(v any) error {
		wmu.Lock()
		defer wmu.Unlock()
		return conn.WriteJSON(v)
	}
	go func() {
		for {
			var in api.ExecStreamingInput
			if err := conn.ReadJSON(&in); err != nil {
				_ = sess.Close()
				return
			}
			switch {
			case in.Stdin != nil && len(in.Stdin.Data) > 0:
				if _, err := sess.Write(in.Stdin.Data); err != nil {
					return
				}
			case in.TTYSize != nil:
				_ = sess.Resize(uint16(in.TTYSize.Height), uint16(in.TTYSize.Width))
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := sess.Read(buf)
		if n > 0 {
			if send(api.ExecStreamingOutput{Stdout: &api.ExecStreamingIOOperation{Data: append([]byte(nil), buf[:n]...)}}) != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	code, _ := sess.Wait()
	_ = send(api.ExecStreamingOutput{Stdout: &api.ExecStreamingIOOperation{Close: true}})
	_ = send(api.ExecStreamingOutput{Exited: true, Result: &api.ExecStreamingExitResult{ExitCode: code}})
	closeWith(websocket.CloseNormalClosure, "")
}
