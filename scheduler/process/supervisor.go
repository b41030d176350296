package process

import (
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// restartPolicy is Nomad's restart policy in mode "fail": at most attempts
// restarts within interval; the exit after those leaves the workload dead.
// A negative attempts means no limit.
type restartPolicy struct {
	attempts int
	interval time.Duration
}

// supervisor runs one workload's process, in its own session and process
// group, and restarts it when it exits, after a backoff that doubles per
// restart in a row, until its restart policy gives up: then it is dead.
// Before it is armed (the workload not yet ready), an exit is not
// restarted: it is reported on early and the supervisor ends.
type supervisor struct {
	newCmd  func() *exec.Cmd
	backoff func(n int) time.Duration
	// stable is how long a run must last for the next restart to count
	// as the first in a row again.
	stable time.Duration
	policy restartPolicy
	// onStart, if set, is told of each start (pid and start time), from
	// the supervising goroutine and without the supervisor's lock held.
	onStart func(pid int, startTime uint64)
	// onExit, if set, is told of each exit (for the workload's log), and
	// whether it left the workload dead.
	onExit func(code int, err error, dead bool)

	mu        sync.Mutex
	running   bool
	pid       int
	startTime uint64
	restarts  int
	exitCode  *int
	armed     bool
	stopping  bool
	early     bool
	dead      bool
	// manual says the running process is being ended by restart: its
	// exit is no failure and is followed by a start without delay.
	manual bool
	// failures are the times of the restarts the policy counts.
	failures []time.Time
	// exited is closed when the current run's process has ended.
	exited chan struct{}
	// done is closed when the supervising goroutine ends (a revival
	// after death makes a new one).
	done chan struct{}

	earlyExit chan int // receives the exit code of an exit before arming
	stopCh    chan struct{}
	kick      chan struct{} // cuts a backoff short
}

func newSupervisor(newCmd func() *exec.Cmd, backoff func(int) time.Duration, stable time.Duration) *supervisor {
	return &supervisor{
		newCmd:    newCmd,
		backoff:   backoff,
		stable:    stable,
		policy:    restartPolicy{attempts: -1},
		earlyExit: make(chan int, 1),
		stopCh:    make(chan struct{}),
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
}

// backoffPolicy doubles base per restart in a row (n counts from 1), up to
// max.
func backoffPolicy(base, max time.Duration) func(int) time.Duration {
	return func(n int) time.Duration {
		d := base
		for i := 1; i < n && d < max; i++ {
			d *= 2
		}
		if d > max {
			d = max
		}
		return d
	}
}

// start begins supervising in the background.
func (s *supervisor) start() { go s.loop(s.done) }

func (s *supervisor) loop(done chan struct{}) {
	defer close(done)
	inARow := 0
	for {
		cmd := s.newCmd()
		// Its own session: its own process group (killed as one), and no
		// controlling terminal of the server's.
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Setsid = true
		cmd.WaitDelay = time.Second
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		select {
		case <-s.kick: // a restart asked between runs: this is it
		default:
		}
		began := time.Now()
		err := cmd.Start()
		exited := make(chan struct{})
		s.exited = exited
		var pid int
		var startTime uint64
		if err == nil {
			pid = cmd.Process.Pid
			startTime, _ = processStartTime(pid)
			s.running, s.pid, s.startTime = true, pid, startTime
		}
		s.mu.Unlock()
		code := 127
		if err == nil {
			if s.onStart != nil {
				s.onStart(pid, startTime)
			}
			err = cmd.Wait()
			code = exitCodeOf(cmd.ProcessState)
			// Whatever the process left behind in its group goes too, and
			// is gone before the next start (its port free again).
			killGroup(pid, 2*time.Second)
		}
		s.mu.Lock()
		close(exited)
		s.running, s.pid, s.startTime = false, 0, 0
		c := code
		s.exitCode = &c
		switch {
		case s.stopping:
			s.mu.Unlock()
			s.tell(code, err, false)
			return
		case !s.armed:
			s.early = true
			s.mu.Unlock()
			s.tell(code, err, false)
			s.earlyExit <- code
			return
		case s.manual:
			// Restarted on request: at once, and it counts as no failure.
			s.manual = false
			inARow = 0
			s.mu.Unlock()
			s.tell(code, err, false)
			continue
		}
		now := time.Now()
		if s.policy.attempts >= 0 {
			kept := s.failures[:0]
			for _, t := range s.failures {
				if now.Sub(t) < s.policy.interval {
					kept = append(kept, t)
				}
			}
			s.failures = kept
			if len(s.failures) >= s.policy.attempts {
				// Told before it is dead: once dead, a restart may start a
				// new supervising goroutine, and onExit is never called
				// from two at once.
				s.mu.Unlock()
				s.tell(code, err, true)
				s.mu.Lock()
				select {
				case <-s.kick:
					// A restart was asked meanwhile: it revives at once.
					s.failures = nil
					s.restarts++
					s.mu.Unlock()
					continue
				default:
				}
				s.dead = true
				s.mu.Unlock()
				return
			}
			s.failures = append(s.failures, now)
		}
		if now.Sub(began) >= s.stable {
			inARow = 0
		}
		inARow++
		s.restarts++
		s.mu.Unlock()
		s.tell(code, err, false)
		t := time.NewTimer(s.backoff(inARow))
		select {
		case <-t.C:
		case <-s.kick:
			t.Stop()
		case <-s.stopCh:
			t.Stop()
			return
		}
	}
}

func (s *supervisor) tell(code int, err error, dead bool) {
	if s.onExit != nil {
		s.onExit(code, err, dead)
	}
}

// arm turns restarting on; false if the process already exited unarmed.
func (s *supervisor) arm() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.early {
		return false
	}
	s.armed = true
	return true
}

// supervisorState is a reading of a supervisor.
type supervisorState struct {
	running   bool
	dead      bool
	restarts  int
	exitCode  *int
	pid       int
	startTime uint64
}

// state reports whether the process runs, its restarts and last exit code.
func (s *supervisor) state() (running bool, restarts int, exitCode *int) {
	st := s.read()
	return st.running, st.restarts, st.exitCode
}

func (s *supervisor) read() supervisorState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := supervisorState{running: s.running, dead: s.dead, restarts: s.restarts, pid: s.pid, startTime: s.startTime}
	if s.exitCode != nil {
		c := *s.exitCode
		st.exitCode = &c
	}
	return st
}

// restart ends the running process (SIGTERM to its group, SIGKILL after
// grace) and starts it again at once; a process waiting out a backoff
// starts at once; a dead workload is revived with its policy's count
// cleared. It returns once the old process has ended. False if the
// supervisor is stopping or was never armed.
func (s *supervisor) restart(grace time.Duration) bool {
	s.mu.Lock()
	if s.stopping || !s.armed {
		s.mu.Unlock()
		return false
	}
	if s.dead {
		s.dead, s.failures = false, nil
		s.restarts++
		s.done = make(chan struct{})
		go s.loop(s.done)
		s.mu.Unlock()
		return true
	}
	if !s.running {
		// Between runs: the restart already counted starts now.
		s.mu.Unlock()
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return true
	}
	s.manual = true
	s.restarts++
	pid, exited := s.pid, s.exited
	s.mu.Unlock()
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	return true
}

// stop ends supervision: SIGTERM to the process group, SIGKILL after
// grace, and waits for the supervising goroutine to end.
func (s *supervisor) stop(grace time.Duration) {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		close(s.stopCh)
	}
	pid, done := s.pid, s.done
	s.mu.Unlock()
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	s.mu.Lock()
	pid = s.pid
	s.mu.Unlock()
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	<-done
}
