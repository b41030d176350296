package edge

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Listeners keeps, in port mode, one listener open on every host port the
// route table names and closes those of ports no longer in it. A port that
// cannot be bound (another process holds it) is logged and tried again;
// it never stops the others or the server.
type Listeners struct {
	cfg ListenersConfig

	mu      sync.Mutex
	open    map[int]*portServer
	closing sync.WaitGroup // servers of ports that left the table, draining
	done    chan struct{}  // closed when Run has returned and every server ended
}

// ListenersConfig configures Listeners.
type ListenersConfig struct {
	Routes RouteTable
	// Handler serves one port (Proxy.PortHandler).
	Handler func(port int) http.Handler
	// Host is the address to bind the ports on ("" for every interface,
	// as the main listener's SVC_SERVER_ADDR says).
	Host string
	// Poll is how often the table is read again when it cannot say that
	// it changed, and how often failed ports are retried (default 2s).
	Poll time.Duration
	// Drain is how long requests in flight on a closing port may take to
	// finish (default 5s); websockets and streams are cut after it.
	Drain  time.Duration
	Logger *slog.Logger
}

// changeNotifier is what a route table that can say when it changes
// implements (Table does).
type changeNotifier interface {
	Changed() <-chan struct{}
}

var _ changeNotifier = (*Table)(nil)

// portServer is one port's HTTP server.
type portServer struct {
	srv   *http.Server
	ended chan struct{} // closed when Serve returned
}

// NewListeners returns the port listeners; Run opens them.
func NewListeners(cfg ListenersConfig) *Listeners {
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listeners{cfg: cfg, open: map[int]*portServer{}, done: make(chan struct{})}
}

// Run keeps the listeners in step with the route table until ctx ends,
// then closes them all, letting requests in flight finish for up to
// Drain, and returns.
func (l *Listeners) Run(ctx context.Context) {
	defer close(l.done)
	failed := map[int]int{}
	poll := time.NewTicker(l.cfg.Poll)
	defer poll.Stop()
	for {
		var changed <-chan struct{}
		if n, ok := l.cfg.Routes.(changeNotifier); ok {
			changed = n.Changed() // before reading: a change meanwhile wakes the next wait
		}
		l.sync(ctx, failed)
		select {
		case <-ctx.Done():
			l.closeAll()
			return
		case <-changed:
		case <-poll.C:
		}
	}
}

// Wait returns once Run has returned.
func (l *Listeners) Wait() { <-l.done }

// Ports returns the ports listened on now, sorted.
func (l *Listeners) Ports() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for p := range l.open {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// sync opens the ports the table names and closes the others.
func (l *Listeners) sync(ctx context.Context, failed map[int]int) {
	want := map[int]bool{}
	for _, r := range l.cfg.Routes.All() {
		if r.Port > 0 {
			want[r.Port] = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for port, ps := range l.open {
		select {
		case <-ps.ended:
			// Serve failed on its own (the socket broke): open it again.
			delete(l.open, port)
			l.cfg.Logger.Warn("edge: app port stopped serving; opening it again", "port", port)
			continue
		default:
		}
		if !want[port] {
			delete(l.open, port)
			l.closing.Go(func() { l.shutdown(ps) })
		}
	}
	for port := range failed {
		if !want[port] {
			delete(failed, port)
		}
	}
	for port := range want {
		if _, ok := l.open[port]; ok || ctx.Err() != nil {
			continue
		}
		ps, err := l.listen(port)
		if err != nil {
			failed[port]++
			// The first failure and then every tenth are worth a warning.
			if failed[port]%10 == 1 {
				l.cfg.Logger.Warn("edge: cannot listen on an app's port; trying again", "port", port, "attempts", failed[port], "err", err)
			}
			continue
		}
		if failed[port] > 0 {
			l.cfg.Logger.Info("edge: listening on an app's port after failures", "port", port, "attempts", failed[port]+1)
		}
		delete(failed, port)
		l.open[port] = ps
	}
}

func (l *Listeners) listen(port int) (*portServer, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(l.cfg.Host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	ps := &portServer{
		srv: &http.Server{
			Handler:           l.cfg.Handler(port),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(l.cfg.Logger.Handler(), slog.LevelDebug),
		},
		ended: make(chan struct{}),
	}
	go func() {
		defer close(ps.ended)
		if err := ps.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.cfg.Logger.Warn("edge: app port failed", "port", port, "err", err)
		}
	}()
	return ps, nil
}

// shutdown stops one port's server: no new connections, requests in
// flight finish for up to Drain, then whatever is left is cut.
func (l *Listeners) shutdown(ps *portServer) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Drain)
	defer cancel()
	if err := ps.srv.Shutdown(ctx); err != nil {
		_ = ps.srv.Close()
	}
	<-ps.ended
}

func (l *Listeners) closeAll() {
	l.mu.Lock()
	servers := make([]*portServer, 0, len(l.open))
	for port, ps := range l.open {
		servers = append(servers, ps)
		delete(l.open, port)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, ps := range servers {
		wg.Go(func() { l.shutdown(ps) })
	}
	wg.Wait()
	l.closing.Wait()
}
