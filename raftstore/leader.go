package raftstore

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// leaderLoops runs the registered leader-only loops while the node leads.
type leaderLoops struct {
	log *slog.Logger

	mu      sync.Mutex
	loops   []leaderLoop
	running *loopRun // nil while not leading
}

type leaderLoop struct {
	name string
	fn   func(ctx context.Context) error
}

type loopRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// loopRestartPause is how long a loop that returned an error waits before it
// runs again.
const loopRestartPause = time.Second

func newLeaderLoops(log *slog.Logger) *leaderLoops { return &leaderLoops{log: log} }

func (l *leaderLoops) add(name string, fn func(ctx context.Context) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lp := leaderLoop{name: name, fn: fn}
	l.loops = append(l.loops, lp)
	if l.running != nil {
		l.launch(l.running, lp)
	}
}

// start launches every loop; it does nothing if they already run.
func (l *leaderLoops) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &loopRun{ctx: ctx, cancel: cancel}
	for _, lp := range l.loops {
		l.launch(run, lp)
	}
	l.running = run
}

func (l *leaderLoops) launch(run *loopRun, lp leaderLoop) {
	run.wg.Add(1)
	go func() {
		defer run.wg.Done()
		for run.ctx.Err() == nil {
			err := lp.fn(run.ctx)
			if run.ctx.Err() != nil {
				return
			}
			l.log.Error("leader loop stopped; restarting", "loop", lp.name, "err", err)
			select {
			case <-time.After(loopRestartPause):
			case <-run.ctx.Done():
			}
		}
	}()
}

// stop cancels the loops and waits until every one has returned.
func (l *leaderLoops) stop() {
	l.mu.Lock()
	run := l.running
	l.running = nil
	l.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	run.wg.Wait()
}

// Every returns a leader loop that runs fn every interval until its context
// ends; an error from fn ends the loop (RunWhileLeader restarts it after a
// pause).
func Every(interval time.Duration, fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if err := fn(ctx); err != nil && ctx.Err() == nil {
					return err
				}
			}
		}
	}
}
