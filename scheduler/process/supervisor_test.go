package process

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

func TestBackoffPolicy(t *testing.T) {
	b := backoffPolicy(100*time.Millisecond, time.Second)
	tests := []struct {
		n    int
		want time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{50, time.Second},
	}
	for _, tt := range tests {
		if got := b(tt.n); got != tt.want {
			t.Errorf("backoff(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

func needSh(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestSupervisorRestartsAndRecordsExitCode(t *testing.T) {
	needSh(t)
	var delays []int
	s := newSupervisor(func() *exec.Cmd { return exec.Command("sh", "-c", "exit 7") },
		func(n int) time.Duration {
			delays = append(delays, n) // only the loop goroutine calls it
			return time.Millisecond
		}, time.Hour)
	s.arm()
	s.start()
	var code *int
	waitUntil(t, "three restarts", func() bool {
		var restarts int
		_, restarts, code = s.state()
		return restarts >= 3
	})
	if code == nil || *code != 7 {
		t.Fatalf("exit code = %v, want 7", fmtCode(code))
	}
	s.stop(time.Second)
	_, restarts, _ := s.state()
	// Every run was short: the backoff grew by one per restart in a row.
	if len(delays) != restarts {
		t.Fatalf("backoff asked %d times for %d restarts", len(delays), restarts)
	}
	for i, n := range delays {
		if n != i+1 {
			t.Fatalf("backoff steps = %v, want 1, 2, 3, …", delays)
		}
	}
}

func TestSupervisorStableRunResetsBackoff(t *testing.T) {
	needSh(t)
	var delays []int
	s := newSupervisor(func() *exec.Cmd { return exec.Command("sh", "-c", "exit 2") },
		func(n int) time.Duration {
			delays = append(delays, n)
			return time.Millisecond
		}, 0) // every run counts as stable
	s.arm()
	s.start()
	waitUntil(t, "three restarts", func() bool {
		_, restarts, _ := s.state()
		return restarts >= 3
	})
	s.stop(time.Second)
	for _, n := range delays {
		if n != 1 {
			t.Fatalf("backoff steps = %v, want all 1 after stable runs", delays)
		}
	}
}

func TestSupervisorEarlyExitNotRestarted(t *testing.T) {
	needSh(t)
	s := newSupervisor(func() *exec.Cmd { return exec.Command("sh", "-c", "exit 5") },
		func(int) time.Duration { return time.Millisecond }, time.Hour)
	s.start()
	select {
	case code := <-s.earlyExit:
		if code != 5 {
			t.Errorf("early exit code = %d, want 5", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no early exit reported")
	}
	<-s.done
	if s.arm() {
		t.Error("arm after an early exit = true, want false")
	}
	running, restarts, code := s.state()
	if running || restarts != 0 || code == nil || *code != 5 {
		t.Errorf("state = running %v, restarts %d, code %s; want stopped, 0, 5", running, restarts, fmtCode(code))
	}
}

func TestSupervisorStopKillsGroup(t *testing.T) {
	needSh(t)
	// The shell ignores SIGTERM, so stop must fall back to SIGKILL.
	s := newSupervisor(func() *exec.Cmd { return exec.Command("sh", "-c", "trap '' TERM; sleep 30 & wait") },
		func(int) time.Duration { return time.Millisecond }, time.Hour)
	s.arm()
	s.start()
	waitUntil(t, "the process running", func() bool {
		running, _, _ := s.state()
		return running
	})
	began := time.Now()
	s.stop(200 * time.Millisecond)
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("stop took %s", took)
	}
	running, restarts, _ := s.state()
	if running || restarts != 0 {
		t.Errorf("after stop: running %v, restarts %d; want stopped without restart", running, restarts)
	}
}

func fmtCode(c *int) string {
	if c == nil {
		return "nil"
	}
	return strconv.Itoa(*c)
}

func TestSupervisorDeadAfterPolicy(t *testing.T) {
	needSh(t)
	var deadExits int
	s := newSupervisor(func() *exec.Cmd { return exec.Command("sh", "-c", "exit 9") },
		func(int) time.Duration { return time.Millisecond }, time.Hour)
	s.policy = restartPolicy{attempts: 2, interval: time.Hour}
	s.onExit = func(code int, err error, dead bool) {
		if dead {
			deadExits++ // only the loop goroutine calls it
		}
	}
	s.arm()
	s.start()
	<-s.done // a dead workload's supervision ends by itself
	st := s.read()
	if !st.dead || st.running || st.restarts != 2 || st.exitCode == nil || *st.exitCode != 9 {
		t.Fatalf("state = %+v (exit %s), want dead after 2 restarts with code 9", st, fmtCode(st.exitCode))
	}
	if deadExits != 1 {
		t.Errorf("exits reported dead = %d, want 1", deadExits)
	}
	s.stop(time.Second) // stopping a dead workload returns at once
}

func TestSupervisorPolicyWindow(t *testing.T) {
	needSh(t)
	// Restarts older than the interval no longer count: with a tiny
	// interval the workload never dies.
	s := newSupervisor(func() *exec.Cmd { return exec.Command("sh", "-c", "exit 1") },
		func(int) time.Duration { return 5 * time.Millisecond }, time.Hour)
	s.policy = restartPolicy{attempts: 1, interval: time.Nanosecond}
	s.arm()
	s.start()
	waitUntil(t, "five restarts", func() bool {
		_, restarts, _ := s.state()
		return restarts >= 5
	})
	if st := s.read(); st.dead {
		t.Fatalf("dead with restarts spread beyond the interval: %+v", st)
	}
	s.stop(time.Second)
}

func TestSupervisorRestartInPlace(t *testing.T) {
	needSh(t)
	s := newSupervisor(func() *exec.Cmd { return exec.Command("sleep", "1000") },
		func(int) time.Duration { return time.Hour }, time.Hour) // no automatic restart would come in time
	s.policy = restartPolicy{attempts: 0, interval: time.Hour} // any failure is fatal; a restart is none
	s.arm()
	s.start()
	waitUntil(t, "the process running", func() bool { return s.read().pid > 0 })
	first := s.read().pid
	for i := 1; i <= 3; i++ {
		if !s.restart(2 * time.Second) {
			t.Fatal("restart refused")
		}
		waitUntil(t, "a new process running", func() bool {
			st := s.read()
			return st.running && st.pid != first
		})
		if st := s.read(); st.restarts != i || st.dead {
			t.Fatalf("after restart %d: %+v, want %d restarts, alive", i, st, i)
		}
		first = s.read().pid
	}
	s.stop(time.Second)
	if s.restart(time.Second) {
		t.Error("restart after stop = true, want false")
	}
}

func TestSupervisorReviveDead(t *testing.T) {
	needSh(t)
	dir := t.TempDir()
	flag := dir + "/ok"
	// Crashes until the flag file exists.
	s := newSupervisor(func() *exec.Cmd {
		return exec.Command("sh", "-c", `[ -e "$0" ] && exec sleep 1000; exit 3`, flag)
	}, func(int) time.Duration { return time.Millisecond }, time.Hour)
	s.policy = restartPolicy{attempts: 1, interval: time.Hour}
	s.arm()
	s.start()
	waitUntil(t, "dead", func() bool { return s.read().dead })
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !s.restart(time.Second) {
		t.Fatal("restart of a dead workload refused")
	}
	waitUntil(t, "revived and running", func() bool {
		st := s.read()
		return st.running && !st.dead
	})
	s.stop(time.Second)
}
