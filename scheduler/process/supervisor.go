package process

import (
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// supervisor runs one workload's process, in its own process group, and
// restarts it when it exits, after a backoff that doubles per restart in a
// row. Before it is armed (the workload not yet ready), an exit is not
// restarted: it is reported on early and the supervisor ends.
type supervisor struct {
	newCmd  func() *exec.Cmd
	backoff func(n int) time.Duration
	// stable is how long a run must last for the next restart to count
	// as the first in a row again.
	stable time.Duration
	// onExit, if set, is told of each exit (for the workload's log).
	onExit func(code int, err error)

	mu       sync.Mutex
	running  bool
	pid      int
	restarts int
	exitCode *int
	armed    bool
	stopping bool
	early    bool

	earlyExit chan int // receives the exit code of an exit before arming
	stopCh    chan struct{}
	done      chan struct{}
}

func newSupervisor(newCmd func() *exec.Cmd, backoff func(int) time.Duration, stable time.Duration) *supervisor {
	return &supervisor{
		newCmd:    newCmd,
		backoff:   backoff,
		stable:    stable,
		earlyExit: make(chan int, 1),
		stopCh:    make(chan struct{}),
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
func (s *supervisor) start() { go s.loop() }

func (s *supervisor) loop() {
	defer close(s.done)
	inARow := 0
	for {
		cmd := s.newCmd()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.WaitDelay = time.Second
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		began := time.Now()
		err := cmd.Start()
		if err == nil {
			s.running, s.pid = true, cmd.Process.Pid
		}
		s.mu.Unlock()
		code := 127
		if err == nil {
			err = cmd.Wait()
			code = exitCodeOf(cmd.ProcessState)
			// Whatever the process left behind in its group goes too.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if s.onExit != nil {
			s.onExit(code, err)
		}
		s.mu.Lock()
		s.running, s.pid = false, 0
		c := code
		s.exitCode = &c
		if s.stopping {
			s.mu.Unlock()
			return
		}
		if !s.armed {
			s.early = true
			s.mu.Unlock()
			s.earlyExit <- code
			return
		}
		if time.Since(began) >= s.stable {
			inARow = 0
		}
		inARow++
		s.restarts++
		s.mu.Unlock()
		t := time.NewTimer(s.backoff(inARow))
		select {
		case <-t.C:
		case <-s.stopCh:
			t.Stop()
			return
		}
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

// state reports whether the process runs, its restarts and last exit code.
func (s *supervisor) state() (running bool, restarts int, exitCode *int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exitCode != nil {
		c := *s.exitCode
		exitCode = &c
	}
	return s.running, s.restarts, exitCode
}

// stop ends supervision: SIGTERM to the process group, SIGKILL after
// grace, and waits for the loop to end.
func (s *supervisor) stop(grace time.Duration) {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		close(s.stopCh)
	}
	pid := s.pid
	s.mu.Unlock()
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.done:
		return
	case <-t.C:
	}
	s.mu.Lock()
	pid = s.pid
	s.mu.Unlock()
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	<-s.done
}
