package fakenomad

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/scheduler"
)

// batch says whether an allocation is of a batch job.
func (a *alloc) batch() bool { return a.job.Type != nil && *a.job.Type == "batch" }

// runBatch runs a batch allocation's tasks once each, to their end, as a
// Nomad client runs a batch job whose restart policy allows no attempts:
// a task that exits 0 is dead and complete, one that exits otherwise dead
// and failed (and the allocation failed); the group's max_run_duration,
// or the allocation being stopped, kills the tasks. raw_exec semantics:
// a task inherits the client's environment under its own, and its stdout
// and stderr go to alloc/logs/<task>.stdout.0 and .stderr.0, which the
// logs endpoint serves.
func (a *alloc) runBatch(ctx context.Context, dir string, tasks map[string]scheduler.Task) {
	if d := a.tg.MaxRunDuration; d != nil && *d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *d)
		defer cancel()
	}
	logs := filepath.Join(dir, "alloc", "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		a.fail(fmt.Errorf("driver: %w", err))
		return
	}
	a.s.mu.Lock()
	a.logDir = logs
	a.s.mu.Unlock()
	var wg sync.WaitGroup
	failed := make(chan struct{}, len(tasks))
	for name, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !a.runOnce(ctx, logs, name, t) {
				failed <- struct{}{}
			}
		}()
	}
	wg.Wait()
	a.update(func() {
		switch {
		case len(failed) > 0:
			a.client, a.clientDesc = api.AllocClientStatusFailed, "Failed tasks"
		default:
			a.client, a.clientDesc = api.AllocClientStatusComplete, "All tasks have completed"
		}
	})
}

// runOnce runs one batch task and records its end; it says whether the
// task succeeded.
func (a *alloc) runOnce(ctx context.Context, logs, name string, t scheduler.Task) bool {
	stdout, err := os.Create(filepath.Join(logs, name+".stdout.0"))
	if err != nil {
		a.fail(&taskError{task: name, event: api.TaskDriverFailure, err: err})
		return false
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(logs, name+".stderr.0"))
	if err != nil {
		a.fail(&taskError{task: name, event: api.TaskDriverFailure, err: err})
		return false
	}
	defer stderr.Close()
	cmd := exec.Command(t.Command[0], t.Command[1:]...)
	cmd.Dir = t.Artifact.Dir
	cmd.Env = os.Environ()
	for k, v := range t.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		a.update(func() {
			ts := a.tasks[name]
			ts.State, ts.Failed, ts.FinishedAt = "dead", true, time.Now()
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskDriverFailure, FailsTask: true, DisplayMessage: err.Error()})
		})
		return false
	}
	a.update(func() {
		a.client = api.AllocClientStatusRunning
		ts := a.tasks[name]
		ts.State, ts.StartedAt = "running", time.Now()
		a.eventLocked(name, &api.TaskEvent{Type: api.TaskStarted, DisplayMessage: "Task started by client"})
	})
	exited := make(chan struct{})
	var killedFlag atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
			killedFlag.Store(true)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-exited:
		}
	}()
	err = cmd.Wait()
	close(exited)
	// The task's children die with it, as in Nomad's executor.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	ok, killed := err == nil, killedFlag.Load()
	a.update(func() {
		ts := a.tasks[name]
		if killed {
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskKilling, DisplayMessage: "Sent interrupt"})
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskKilled, DisplayMessage: "Task successfully killed"})
		} else {
			a.eventLocked(name, &api.TaskEvent{Type: api.TaskTerminated, ExitCode: code, DisplayMessage: fmt.Sprintf("Exit Code: %d", code)})
		}
		ts.State, ts.FinishedAt = "dead", time.Now()
		if !ok {
			ts.Failed = true
			if !killed {
				a.eventLocked(name, &api.TaskEvent{Type: api.TaskNotRestarting, FailsTask: true,
					DisplayMessage: "Error was unrecoverable"})
			}
		}
	})
	return ok && !killed
}

// batchLogs serves the logs of a batch allocation's task from its files
// (stdout and stderr apart, as Nomad keeps them); it says whether the
// allocation was one.
func (s *Server) batchLogs(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	a := s.allocs[r.PathValue("id")]
	logDir := ""
	known := false
	if a != nil {
		logDir = a.logDir
		_, known = a.tasks[r.URL.Query().Get("task")]
	}
	s.mu.Unlock()
	if logDir == "" {
		return false
	}
	q := r.URL.Query()
	task := q.Get("task")
	if !known {
		codedError(w, http.StatusBadRequest, fmt.Sprintf("unknown task name %q", task))
		return true
	}
	typ := q.Get("type")
	if typ != "stdout" && typ != "stderr" {
		codedError(w, http.StatusBadRequest, "must provide log type (stdout/stderr)")
		return true
	}
	file := filepath.Join(logDir, task+"."+typ+".0")
	if q.Get("follow") == "true" {
		s.followBatchLog(w, r, a, file, task+"."+typ+".0")
		return true
	}
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		codedError(w, http.StatusInternalServerError, err.Error())
		return true
	}
	serveLogBytes(w, q.Get("origin"), q.Get("offset"), q.Get("plain") == "true", task+"."+typ+".0", data)
	return true
}

// followBatchLog streams a log file as StreamFrames from its start until
// the allocation has ended and the file is read to its end, or the
// client goes: Nomad's follow=true. The fake's client looks at the file
// every 50ms (the adapter under test does not poll: it reads the stream).
func (s *Server) followBatchLog(w http.ResponseWriter, r *http.Request, a *alloc, path, name string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	enc := json.NewEncoder(w)
	var offset int64
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		ended := a.client == api.AllocClientStatusComplete || a.client == api.AllocClientStatusFailed
		s.mu.Unlock()
		data, _ := os.ReadFile(path)
		if int64(len(data)) > offset {
			if enc.Encode(api.StreamFrame{Offset: offset, Data: data[offset:], File: "alloc/logs/" + name}) != nil {
				return
			}
			offset = int64(len(data))
			flush()
		} else if ended {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// serveLogBytes answers a logs request from a file's bytes: origin and
// offset pick them, plain answers them raw, else as one StreamFrame.
func serveLogBytes(w http.ResponseWriter, origin, offsetParam string, plain bool, file string, data []byte) {
	offset, _ := strconv.ParseInt(offsetParam, 10, 64)
	offset = max(offset, 0)
	switch origin {
	case "", "start":
		data = data[min(int(offset), len(data)):]
	case "end":
		data = data[len(data)-min(int(offset), len(data)):]
	default:
		codedError(w, http.StatusBadRequest, "origin must be start or end")
		return
	}
	if plain {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(data)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if len(data) > 0 {
		_ = json.NewEncoder(w).Encode(api.StreamFrame{Data: data, File: "alloc/logs/" + file})
	}
}
