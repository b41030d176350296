package process

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The server may die by SIGKILL; its workloads, each in its own process
// group, live on. So the runtime records each running job's processes in
// WorkDir/jobs/<jobID>.json (rewritten atomically on every start, removed
// by Stop), and New kills what those records name before it does anything
// else: the reconciler starts the jobs again afterwards. A record names a
// process by its pid and start time, within one boot of the machine, so a
// pid used again by another process is never killed.

// jobRecord is a job's file.
type jobRecord struct {
	ID        string                   `json:"id"`
	AppID     string                   `json:"app_id,omitempty"`
	BootID    string                   `json:"boot_id"`
	Workloads map[string]processRecord `json:"workloads"`
}

// processRecord names a workload's process group by its leader.
type processRecord struct {
	PID int `json:"pid"`
	// StartTime is field 22 of /proc/<pid>/stat: clock ticks since boot.
	StartTime uint64 `json:"start_time"`
}

func (r *Runtime) jobsDir() string { return filepath.Join(r.cfg.WorkDir, "jobs") }

func (r *Runtime) jobRecordPath(jobID string) string {
	return filepath.Join(r.jobsDir(), jobID+".json")
}

// record writes the job's file from its workloads' current processes. It
// does nothing once the job has been stopped.
func (j *job) record() {
	j.recMu.Lock()
	defer j.recMu.Unlock()
	if j.unrecorded {
		return
	}
	rec := jobRecord{ID: j.id, AppID: j.appID, BootID: j.rt.bootID, Workloads: map[string]processRecord{}}
	if j.pod != nil {
		for name, pid := range j.pod.pids() {
			if st, ok := processStartTime(pid); ok {
				rec.Workloads[name] = processRecord{PID: pid, StartTime: st}
			}
		}
	}
	for name, w := range j.snapshot() {
		if w.sup == nil {
			continue
		}
		if st := w.sup.read(); st.pid > 0 {
			rec.Workloads[name] = processRecord{PID: st.pid, StartTime: st.startTime}
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	_ = writeFileAtomic(j.rt.jobRecordPath(j.id), b, 0o600)
}

// recordBuild writes a running build's file (named build-<id>.json, so it
// never collides with a job's), so that a server started after this one
// died kills a build left running (its pod's processes too); it returns
// the function that removes the file once the build has ended.
func (r *Runtime) recordBuild(id string, pids map[string]int) func() {
	rec := jobRecord{ID: "build-" + id, BootID: r.bootID, Workloads: map[string]processRecord{}}
	for name, pid := range pids {
		if st, ok := processStartTime(pid); ok {
			rec.Workloads[name] = processRecord{PID: pid, StartTime: st}
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return func() {}
	}
	path := r.jobRecordPath(rec.ID)
	_ = writeFileAtomic(path, b, 0o600)
	return func() { _ = os.Remove(path) }
}

// unrecord removes the job's file for good (after its processes ended).
func (j *job) unrecord() {
	j.recMu.Lock()
	defer j.recMu.Unlock()
	j.unrecorded = true
	_ = os.Remove(j.rt.jobRecordPath(j.id))
}

// reapOrphans kills the process groups the job files name, where they
// still run, and removes the files. It returns what it killed, by job.
func (r *Runtime) reapOrphans() (map[string][]int, error) {
	ents, err := os.ReadDir(r.jobsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	killed := map[string][]int{}
	for _, e := range ents {
		path := filepath.Join(r.jobsDir(), e.Name())
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			_ = os.Remove(path) // a temporary file a crash left
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var rec jobRecord
		if json.Unmarshal(b, &rec) == nil && rec.BootID != "" && rec.BootID == r.bootID {
			for _, p := range rec.Workloads {
				if p.PID > 0 && orphanAlive(p) {
					killGroup(p.PID, 5*time.Second)
					killed[rec.ID] = append(killed[rec.ID], p.PID)
				}
			}
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	return killed, nil
}

// orphanAlive reports whether the recorded process group still runs: its
// leader with the recorded start time, or, the leader gone, members of
// its group (a process group's ID is not given to a new process while the
// group has members, so they are the recorded group's).
func orphanAlive(p processRecord) bool {
	if st, err := readProcStat(p.PID); err == nil && st.state != 'Z' && st.state != 'X' {
		return st.startTime == p.StartTime
	}
	return groupAlive(p.PID)
}
