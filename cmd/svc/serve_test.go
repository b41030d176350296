package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/config"
)

// syncBuffer is a log writer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func defaultConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load(config.LoadArgs{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRestartRequestsCoalesce(t *testing.T) {
	logs := &syncBuffer{}
	gen, ctx := newGeneration(context.Background(), defaultConfig(t), nil, logs, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(gen.restart)
	}
	wg.Wait()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("the generation's context did not end on restart")
	}
	if !gen.restarting.Load() {
		t.Error("the generation is not marked as restarting")
	}
	if n := strings.Count(logs.String(), "restart requested"); n != 1 {
		t.Errorf("%d restarts were started for 8 concurrent requests, want 1:\n%s", n, logs)
	}
}

func TestGenerationsStartLater(t *testing.T) {
	cfg := defaultConfig(t)
	first, _ := newGeneration(context.Background(), cfg, nil, io.Discard, nil)
	if first.n != 1 || first.startedAt.IsZero() || first.startedAt.Location() != time.UTC {
		t.Errorf("first generation: n %d, started_at %v", first.n, first.startedAt)
	}
	// Even when the clock has not moved on (or went back), the next one
	// starts strictly later.
	first.startedAt = time.Now().UTC().Add(time.Hour)
	second, _ := newGeneration(context.Background(), cfg, first, io.Discard, nil)
	if second.n != 2 || !second.startedAt.After(first.startedAt) {
		t.Errorf("second generation: n %d, started_at %v, not after %v", second.n, second.startedAt, first.startedAt)
	}
}

// serveOn answers "gen" on ln with an http.Server until shut down.
func serveOn(ln net.Listener, gen string) (*http.Server, chan error) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, gen) })}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return srv, done
}

func shutdown(t *testing.T, srv *http.Server, done chan error) {
	t.Helper()
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("serve: %v", err)
	}
}

func get(t *testing.T, c net.Conn) string {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestKeptListenerOutlivesAGeneration(t *testing.T) {
	stopping := make(chan struct{})
	ln, err := listen("127.0.0.1:0", stopping)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()

	srv, done := serveOn(ln.next(), "one")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, c); !strings.HasSuffix(got, "one") {
		t.Fatalf("first generation answered %q", got)
	}
	shutdown(t, srv, done)

	// Between generations the socket stays bound: a connection waits for
	// the next generation, on the same address.
	c, err = net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial between generations: %v", err)
	}
	srv, done = serveOn(ln.next(), "two")
	if got := get(t, c); !strings.HasSuffix(got, "two") {
		t.Fatalf("the connection made between generations got %q", got)
	}

	// Once the process is stopping, shutdown closes the socket.
	close(stopping)
	shutdown(t, srv, done)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the socket still accepts connections after the last generation")
	}
}
