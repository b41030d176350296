package raftstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testBlobs is a BlobSource whose behaviour a test sets, and which records
// the names it was asked for.
type testBlobs struct {
	mu    sync.Mutex
	open  func(ctx context.Context, name string) (io.ReadCloser, int64, error)
	asked []string
}

var _ BlobSource = (*testBlobs)(nil)

func (b *testBlobs) OpenBlob(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	b.mu.Lock()
	open := b.open
	b.asked = append(b.asked, name)
	b.mu.Unlock()
	if open == nil {
		return nil, 0, ErrBlobNotFound
	}
	return open(ctx, name)
}

// set replaces the source's behaviour (nil: it has no blobs) and forgets
// what it was asked.
func (b *testBlobs) set(open func(ctx context.Context, name string) (io.ReadCloser, int64, error)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open, b.asked = open, nil
}

func (b *testBlobs) calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.asked...)
}

// holding serves the given blobs from memory.
func holding(blobs map[string][]byte) func(context.Context, string) (io.ReadCloser, int64, error) {
	return func(_ context.Context, name string) (io.ReadCloser, int64, error) {
		b, ok := blobs[name]
		if !ok {
			return nil, 0, ErrBlobNotFound
		}
		return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
	}
}

// declaring serves data under any name but declares size for it.
func declaring(data []byte, size int64) func(context.Context, string) (io.ReadCloser, int64, error) {
	return func(context.Context, string) (io.ReadCloser, int64, error) {
		return io.NopCloser(bytes.NewReader(data)), size, nil
	}
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidBlobName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"artifact-0123abcd.tar.gz", true},
		{"a", true},
		{"A_b-c.d", true},
		{"9", true},
		{strings.Repeat("x", maxBlobName), true},
		{"", false},
		{strings.Repeat("x", maxBlobName+1), false},
		{".", false},
		{"..", false},
		{"...", false},
		{".hidden", false},
		{"-rf", false},
		{"_x", false},
		{"a/b", false},
		{"../etc/passwd", false},
		{`a\b`, false},
		{"a b", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\x7f", false},
		{"é", false},
		{"a:b", false},
		{"a%2fb", false},
	}
	for _, tt := range tests {
		err := ValidBlobName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidBlobName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, errBlobName) {
			t.Errorf("ValidBlobName(%q) = %v, want errBlobName", tt.name, err)
		}
	}
}

// answer builds a server's answer: status OK, the declared size, body and,
// unless trailer is nil, the trailer.
func answer(size uint64, body, trailer []byte) []byte {
	b := []byte{blobOK}
	b = binary.BigEndian.AppendUint64(b, size)
	b = append(b, body...)
	return append(b, trailer...)
}

func checksum(b []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, castagnoli))
}

func TestReceiveBlob(t *testing.T) {
	body := []byte("the blob's bytes")
	tests := []struct {
		name    string
		in      []byte
		want    string // written to w on success
		wantErr error  // errors.Is target; nil with errText means any error
		errText string
	}{
		{name: "whole", in: answer(uint64(len(body)), body, checksum(body)), want: string(body)},
		{name: "empty", in: answer(0, nil, checksum(nil)), want: ""},
		{name: "not found", in: []byte{blobNotFound}, wantErr: ErrBlobNotFound},
		{name: "bad name", in: []byte{blobBadName}, wantErr: errBlobName},
		{name: "failed", in: append([]byte{blobFailed, 0, 12}, "disk on fire"...), errText: "disk on fire"},
		{name: "failure message too long", in: []byte{blobFailed, 0xff, 0xff}, errText: "exceeds"},
		{name: "truncated body", in: answer(uint64(len(body))+5, body, nil), wantErr: io.ErrUnexpectedEOF},
		{name: "no checksum", in: answer(uint64(len(body)), body, nil), wantErr: io.ErrUnexpectedEOF},
		{name: "half a checksum", in: answer(uint64(len(body)), body, checksum(body)[:2]), wantErr: io.ErrUnexpectedEOF},
		{name: "wrong checksum", in: answer(uint64(len(body)), body, checksum([]byte("other"))), errText: "checksum"},
		{name: "size beyond the cap", in: answer(maxBlobSize+1, nil, nil), errText: "exceeds"},
		{name: "size cut short", in: []byte{blobOK, 0, 0}, wantErr: io.ErrUnexpectedEOF},
		{name: "no answer", in: nil, wantErr: io.EOF},
		{name: "unknown answer", in: []byte{42}, errText: "unknown answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w bytes.Buffer
			n, err := receiveBlob(bytes.NewReader(tt.in), &w, make([]byte, 4))
			if n != int64(w.Len()) {
				t.Errorf("returned %d bytes, wrote %d", n, w.Len())
			}
			if tt.wantErr == nil && tt.errText == "" {
				if err != nil || w.String() != tt.want {
					t.Fatalf("got %q, %v; want %q", w.String(), err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %q and no error, want an error", w.String())
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.errText) {
				t.Errorf("got %v, want it to say %q", err, tt.errText)
			}
			if tt.wantErr != ErrBlobNotFound && errors.Is(err, ErrBlobNotFound) {
				t.Errorf("got %v, which claims the blob was not found", err)
			}
		})
	}
}

// FuzzReceiveBlob: arbitrary answers never panic the reader, and a success
// always wrote exactly the declared size of bytes that match the checksum.
func FuzzReceiveBlob(f *testing.F) {
	f.Add(answer(3, []byte("abc"), checksum([]byte("abc"))))
	f.Add(answer(3, []byte("abc"), nil))
	f.Add([]byte{blobFailed, 0, 1, 'x'})
	f.Add([]byte{blobNotFound})
	f.Fuzz(func(t *testing.T, in []byte) {
		var w bytes.Buffer
		n, err := receiveBlob(bytes.NewReader(in), &w, make([]byte, 7))
		if n != int64(w.Len()) {
			t.Fatalf("returned %d bytes, wrote %d", n, w.Len())
		}
		if err != nil {
			return
		}
		size := binary.BigEndian.Uint64(in[1:9])
		if uint64(n) != size || !bytes.Equal(checksum(w.Bytes()), in[9+n:13+n]) {
			t.Fatalf("accepted %d bytes of a declared %d from %x", n, size, in)
		}
	})
}

// TestSendBlob checks the server side: what reaches the wire for each kind of
// source, read back as the fetching node reads it.
func TestSendBlob(t *testing.T) {
	data := []byte("0123456789")
	tests := []struct {
		name    string
		open    func(context.Context, string) (io.ReadCloser, int64, error)
		wantErr bool // send reports a failure
		recvErr error
		recv    string
	}{
		{name: "whole", open: declaring(data, 10), recv: string(data)},
		{name: "not found", open: holding(nil), recvErr: ErrBlobNotFound},
		{name: "file not found", open: func(context.Context, string) (io.ReadCloser, int64, error) {
			return nil, 0, &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
		}, recvErr: ErrBlobNotFound},
		{name: "shorter than declared", open: declaring(data, 11), wantErr: true, recvErr: io.ErrUnexpectedEOF},
		{name: "longer than declared", open: declaring(data, 9), wantErr: true, recvErr: io.ErrUnexpectedEOF},
		{name: "negative size", open: declaring(data, -1), wantErr: true},
		{name: "open fails", open: func(context.Context, string) (io.ReadCloser, int64, error) {
			return nil, 0, errors.New("disk on fire")
		}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wire bytes.Buffer
			p := newBlobPeer(&testBlobs{open: tt.open})
			err := p.send(context.Background(), &wire, "b")
			if (err != nil) != tt.wantErr {
				t.Errorf("send = %v, want failure %v", err, tt.wantErr)
			}
			var got bytes.Buffer
			_, rerr := receiveBlob(&wire, &got, make([]byte, 3))
			switch {
			case tt.recv != "" && (rerr != nil || got.String() != tt.recv):
				t.Errorf("received %q, %v; want %q", got.String(), rerr, tt.recv)
			case tt.recv == "" && rerr == nil:
				t.Errorf("received %q without an error", got.String())
			case tt.recvErr != nil && !errors.Is(rerr, tt.recvErr):
				t.Errorf("received error %v, want %v", rerr, tt.recvErr)
			}
		})
	}
}

func TestFetchBlobOnASingleNode(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	var w bytes.Buffer
	if _, err := s.FetchBlob(context.Background(), "anything", &w); !errors.Is(err, ErrBlobNotFound) {
		t.Fatalf("FetchBlob on a single node = %v, want ErrBlobNotFound", err)
	}
}

// dialBlob opens a blob connection to node i as a node with the cluster's
// secret would, for tests that speak the protocol by hand.
func (c *cluster) dialBlob(t *testing.T, i int) net.Conn {
	t.Helper()
	conn, err := newMux(nil, c.secret, testLogger(t)).dial(c.peers[i].Addr, connBlob, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", c.peers[i].ID, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestFetchBlob(t *testing.T) {
	srcs := []*testBlobs{{}, {}, {}}
	c := newCluster(t, 3, srcs[0], srcs[1], srcs[2])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lead := -1
	waitFor(t, ctx, "every node knows the same leader", func() bool {
		lead = c.leader(ctx)
		for _, s := range c.nodes {
			if id, _ := s.Leader(); id != c.peers[lead].ID {
				return false
			}
		}
		return true
	})
	f1 := c.follower(lead)
	f2 := 3 - lead - f1
	reset := func() {
		for _, s := range srcs {
			s.set(nil)
		}
	}
	fetch := func(t *testing.T, via int, name string, want []byte) {
		t.Helper()
		var w bytes.Buffer
		n, err := c.nodes[via].FetchBlob(ctx, name, &w)
		if err != nil {
			t.Fatalf("fetch %s through %s: %v", name, c.peers[via].ID, err)
		}
		if n != int64(len(want)) || !bytes.Equal(w.Bytes(), want) {
			t.Fatalf("fetched %d bytes (%d written) through %s, want the %d bytes of %s", n, w.Len(), c.peers[via].ID, len(want), name)
		}
	}
	data := randomBytes(t, 3<<20+17)

	t.Run("a blob on the leader, fetched through a follower", func(t *testing.T) {
		reset()
		srcs[lead].set(holding(map[string][]byte{"artifact-1.tar.gz": data}))
		fetch(t, f1, "artifact-1.tar.gz", data)
	})
	t.Run("a blob on a follower, fetched through the leader and the other follower", func(t *testing.T) {
		reset()
		srcs[f1].set(holding(map[string][]byte{"artifact-2": data}))
		fetch(t, lead, "artifact-2", data)
		fetch(t, f2, "artifact-2", data)
		if got := srcs[lead].calls(); len(got) > 1 {
			t.Errorf("the leader was asked %v, want at most once (by %s, never by itself)", got, c.peers[f2].ID)
		}
	})
	t.Run("the leader is asked first", func(t *testing.T) {
		reset()
		srcs[lead].set(holding(map[string][]byte{"both": []byte("the leader's copy")}))
		srcs[f1].set(holding(map[string][]byte{"both": []byte("a follower's copy")}))
		// The asking node must know the leader (it asks the others in any
		// order when it knows none): a loaded machine can leave it without
		// one for a moment.
		for deadline := time.Now().Add(10 * time.Second); ; {
			if id, _ := c.nodes[f2].Leader(); id == c.peers[lead].ID {
				break
			}
			if time.Now().After(deadline) {
				t.Skip("the asking node did not learn the leader within 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		var w bytes.Buffer
		_, err := c.nodes[f2].FetchBlob(ctx, "both", &w)
		if id, _ := c.nodes[f2].Leader(); id != c.peers[lead].ID {
			t.Skipf("leadership moved to %q during the fetch", id)
		}
		if err != nil || w.String() != "the leader's copy" {
			t.Errorf("fetched %q, %v; want the leader's copy", w.String(), err)
		}
		if got := srcs[f1].calls(); len(got) != 0 {
			t.Errorf("the follower was asked %v although the leader had the blob", got)
		}
	})
	t.Run("an empty blob", func(t *testing.T) {
		reset()
		srcs[f2].set(holding(map[string][]byte{"empty": {}}))
		fetch(t, f1, "empty", []byte{})
	})
	t.Run("not found anywhere", func(t *testing.T) {
		reset()
		var w bytes.Buffer
		n, err := c.nodes[f1].FetchBlob(ctx, "missing", &w)
		if !errors.Is(err, ErrBlobNotFound) || n != 0 || w.Len() != 0 {
			t.Fatalf("fetch of a missing blob = %d, %v (%d bytes written), want ErrBlobNotFound", n, err, w.Len())
		}
		for i, s := range srcs {
			want := 1
			if i == f1 {
				want = 0
			}
			if got := s.calls(); len(got) != want {
				t.Errorf("%s was asked %v, want %d times", c.peers[i].ID, got, want)
			}
		}
	})
	t.Run("a node does not fetch from itself", func(t *testing.T) {
		reset()
		srcs[f1].set(holding(map[string][]byte{"mine": data}))
		if _, err := c.nodes[f1].FetchBlob(ctx, "mine", io.Discard); !errors.Is(err, ErrBlobNotFound) {
			t.Errorf("fetch of a blob only this node has = %v, want ErrBlobNotFound", err)
		}
		if got := srcs[f1].calls(); len(got) != 0 {
			t.Errorf("the node asked its own source %v", got)
		}
	})
	t.Run("an invalid name is refused before asking anyone", func(t *testing.T) {
		reset()
		for _, name := range []string{"", "..", ".", "../../etc/passwd", "a/b", "a\x00b", strings.Repeat("a", 300)} {
			_, err := c.nodes[f1].FetchBlob(ctx, name, io.Discard)
			if !errors.Is(err, errBlobName) || errors.Is(err, ErrBlobNotFound) {
				t.Errorf("fetch %q = %v, want an invalid name", name, err)
			}
		}
		for i, s := range srcs {
			if got := s.calls(); len(got) != 0 {
				t.Errorf("%s was asked %q", c.peers[i].ID, got)
			}
		}
	})
	t.Run("a hostile name on the wire gets a refusal and reaches no source", func(t *testing.T) {
		reset()
		for _, name := range []string{"", "..", ".", "../../etc/passwd", "/etc/passwd", "a/b", `a\b`, "a\x00b", "a\nb", "é", strings.Repeat("a", 200)} {
			conn := c.dialBlob(t, lead)
			if err := writeBlobRequest(conn, name); err != nil {
				t.Fatal(err)
			}
			if _, err := receiveBlob(conn, io.Discard, make([]byte, 64)); !errors.Is(err, errBlobName) {
				t.Errorf("request for %q answered %v, want a refused name", name, err)
			}
		}
		// An unknown request gets the connection closed, and no answer.
		conn := c.dialBlob(t, lead)
		if _, err := conn.Write([]byte{9, 1, 'a'}); err != nil {
			t.Fatal(err)
		}
		if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("an unknown request was answered: %d bytes, %v", n, err)
		}
		if got := srcs[lead].calls(); len(got) != 0 {
			t.Errorf("the source was asked %q", got)
		}
	})
	t.Run("a peer without the secret is refused", func(t *testing.T) {
		reset()
		srcs[lead].set(holding(map[string][]byte{"secret-blob": data}))
		wrong := newMux(nil, []byte("not-the-cluster-secret"), testLogger(t))
		if conn, err := wrong.dial(c.peers[lead].Addr, connBlob, 5*time.Second); !errors.Is(err, errHandshake) {
			if conn != nil {
				conn.Close()
			}
			t.Fatalf("dial with the wrong secret = %v, want a refused handshake", err)
		}
		// By hand: a forged hello followed at once by a request.
		conn, err := net.Dial("tcp", c.peers[lead].Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.ReadFull(conn, make([]byte, len(handshakeMagic)+nonceSize)); err != nil {
			t.Fatal(err)
		}
		forged := append([]byte{connBlob}, randomBytes(t, nonceSize+32)...)
		var req bytes.Buffer
		_ = writeBlobRequest(&req, "secret-blob")
		if _, err := conn.Write(append(forged, req.Bytes()...)); err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(conn); len(got) != 0 {
			t.Errorf("a peer without the secret read %d bytes (%v)", len(got), err)
		}
		if got := srcs[lead].calls(); len(got) != 0 {
			t.Errorf("the source was asked %q", got)
		}
	})
	t.Run("a truncated transfer is an error, not a short blob", func(t *testing.T) {
		reset()
		srcs[lead].set(declaring(data[:600], 1000))
		var w bytes.Buffer
		n, err := c.nodes[f1].FetchBlob(ctx, "short", &w)
		if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrBlobNotFound) {
			t.Fatalf("fetch of a truncated blob = %d, %v; want io.ErrUnexpectedEOF", n, err)
		}
		if n != int64(w.Len()) || n > 600 {
			t.Errorf("returned %d, wrote %d bytes, of 600 sent", n, w.Len())
		}
	})
	t.Run("a source longer than it declared fails the transfer", func(t *testing.T) {
		reset()
		srcs[lead].set(declaring(data[:1000], 600))
		if _, err := c.nodes[f1].FetchBlob(ctx, "long", io.Discard); err == nil || errors.Is(err, ErrBlobNotFound) {
			t.Fatalf("fetch of a blob longer than declared = %v, want a failure", err)
		}
	})
	t.Run("a failing source is reported, and another server is asked", func(t *testing.T) {
		reset()
		srcs[lead].set(func(context.Context, string) (io.ReadCloser, int64, error) {
			return nil, 0, errors.New("disk on fire")
		})
		srcs[f1].set(holding(map[string][]byte{"b": data}))
		fetch(t, f2, "b", data)
		srcs[f1].set(nil)
		_, err := c.nodes[f2].FetchBlob(ctx, "b", io.Discard)
		if err == nil || errors.Is(err, ErrBlobNotFound) || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("fetch when one server fails and the other has no copy = %v, want the failure and not ErrBlobNotFound", err)
		}
	})
	t.Run("a failing writer ends the fetch", func(t *testing.T) {
		reset()
		srcs[lead].set(holding(map[string][]byte{"b": data}))
		srcs[f2].set(holding(map[string][]byte{"b": data}))
		errFull := errors.New("disk full")
		_, err := c.nodes[f1].FetchBlob(ctx, "b", failingWriter{errFull})
		if !errors.Is(err, errFull) {
			t.Fatalf("fetch into a failing writer = %v, want %v", err, errFull)
		}
		if a, b := len(srcs[lead].calls()), len(srcs[f2].calls()); a+b != 1 {
			t.Errorf("asked %d servers after the writer failed, want 1", a+b)
		}
	})
	t.Run("an unreachable server makes a miss undecided", func(t *testing.T) {
		reset()
		srcs[lead].set(holding(map[string][]byte{"b": data}))
		c.stop(f2)
		_, err := c.nodes[f1].FetchBlob(ctx, "missing", io.Discard)
		if err == nil || errors.Is(err, ErrBlobNotFound) {
			t.Errorf("fetch of a blob no reachable server has = %v, want a failure other than ErrBlobNotFound", err)
		}
		fetch(t, f1, "b", data)
	})
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// gatedBlob serves data, but every reader stops after hold bytes until the
// gate opens. It counts the readers open at once.
type gatedBlob struct {
	data    []byte
	hold    int
	gate    chan struct{}
	gateMu  sync.Once
	open    atomic.Int64
	maxOpen atomic.Int64
	closed  atomic.Int64
}

func newGatedBlob(data []byte, hold int) *gatedBlob {
	return &gatedBlob{data: data, hold: hold, gate: make(chan struct{})}
}

func (g *gatedBlob) release() { g.gateMu.Do(func() { close(g.gate) }) }

func (g *gatedBlob) openBlob(context.Context, string) (io.ReadCloser, int64, error) {
	n := g.open.Add(1)
	for m := g.maxOpen.Load(); n > m && !g.maxOpen.CompareAndSwap(m, n); m = g.maxOpen.Load() {
	}
	return &gatedReader{g: g}, int64(len(g.data)), nil
}

type gatedReader struct {
	g   *gatedBlob
	off int
}

func (r *gatedReader) Read(p []byte) (int, error) {
	end := len(r.g.data)
	if r.off < r.g.hold {
		end = r.g.hold
	} else if r.off == r.g.hold {
		<-r.g.gate
	}
	if r.off == len(r.g.data) {
		return 0, io.EOF
	}
	n := copy(p, r.g.data[r.off:end])
	r.off += n
	return n, nil
}

func (r *gatedReader) Close() error {
	r.g.open.Add(-1)
	r.g.closed.Add(1)
	return nil
}

// signalWriter closes reached once at least at bytes were written to it.
type signalWriter struct {
	at      int
	n       int
	reached chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	before := w.n
	w.n += len(p)
	if before < w.at && w.n >= w.at {
		close(w.reached)
	}
	return len(p), nil
}

// TestFetchBlobBoundsAndContext holds transfers mid-way to check that a
// node serves and fetches at most blobTransfers at once, and that a fetch
// ends with its context, mid-stream or while waiting its turn on either end.
func TestFetchBlobBoundsAndContext(t *testing.T) {
	srcs := []*testBlobs{{}, {}}
	c := newCluster(t, 2, srcs[0], srcs[1])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	server, client := c.nodes[0], c.nodes[1]
	data := randomBytes(t, 1<<20)
	const hold = 100 << 10
	g := newGatedBlob(data, hold)
	defer g.release()
	srcs[0].set(g.openBlob)

	t.Run("a context that already ended asks no one", func(t *testing.T) {
		done, stop := context.WithCancel(ctx)
		stop()
		if _, err := client.FetchBlob(done, "slow", io.Discard); !errors.Is(err, context.Canceled) {
			t.Errorf("fetch with an ended context = %v, want context.Canceled", err)
		}
		if got := srcs[0].calls(); len(got) != 0 {
			t.Errorf("the source was asked %q", got)
		}
	})

	t.Run("mid-stream", func(t *testing.T) {
		fctx, fcancel := context.WithCancel(ctx)
		defer fcancel()
		w := &signalWriter{at: hold, reached: make(chan struct{})}
		type result struct {
			n   int64
			err error
		}
		res := make(chan result, 1)
		go func() {
			n, err := client.FetchBlob(fctx, "slow", w)
			res <- result{n, err}
		}()
		select {
		case <-w.reached:
		case r := <-res:
			t.Fatalf("fetch ended before the gate: %d, %v", r.n, r.err)
		}
		fcancel()
		r := <-res
		if !errors.Is(r.err, context.Canceled) || r.n != hold {
			t.Fatalf("fetch cancelled mid-stream = %d, %v; want %d bytes and context.Canceled", r.n, r.err, hold)
		}
		// The serving node lets go of the source once it notices.
		g.release()
		waitFor(t, ctx, "the server closes the source", func() bool { return g.closed.Load() == 1 })
	})

	// Four transfers held at the gate fill the client's fetch slots and the
	// server's serving slots.
	g = newGatedBlob(data, hold)
	defer g.release()
	srcs[0].set(g.openBlob)
	var wg sync.WaitGroup
	held := make([]error, blobTransfers)
	for i := range blobTransfers {
		wg.Go(func() {
			var w bytes.Buffer
			_, err := client.FetchBlob(ctx, "slow", &w)
			if err == nil && !bytes.Equal(w.Bytes(), data) {
				err = errors.New("fetched bytes differ")
			}
			held[i] = err
		})
	}
	waitFor(t, ctx, "the server holds four transfers", func() bool { return g.open.Load() == blobTransfers })

	t.Run("waiting for a fetch slot", func(t *testing.T) {
		fctx, fcancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() {
			_, err := client.FetchBlob(fctx, "slow", io.Discard)
			res <- err
		}()
		waitFor(t, ctx, "a fetch waits its turn, or reaches the server", func() bool {
			return client.blobs.fetchQueued.Load() == 1 || server.blobs.serveQueued.Load() > 0 || g.open.Load() > blobTransfers
		})
		if n, q := g.open.Load(), server.blobs.serveQueued.Load(); n != blobTransfers || q != 0 {
			t.Errorf("%d transfers open and %d waiting at the server, want %d and none", n, q, blobTransfers)
		}
		fcancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Errorf("fetch cancelled while waiting = %v, want context.Canceled", err)
		}
		if n := client.blobs.fetchQueued.Load(); n != 0 {
			t.Errorf("%d fetches still wait", n)
		}
	})

	t.Run("waiting for a serving slot", func(t *testing.T) {
		// Another node (the test, with the secret) asks while all slots
		// are taken, and hangs up.
		conn := c.dialBlob(t, 0)
		if err := writeBlobRequest(conn, "slow"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "a request waits its turn, or is served", func() bool {
			return server.blobs.serveQueued.Load() == 1 || g.open.Load() > blobTransfers
		})
		if n := g.open.Load(); n != blobTransfers {
			t.Fatalf("%d transfers open at the server, want %d", n, blobTransfers)
		}
		conn.Close()
		waitFor(t, ctx, "the server notices the hang-up", func() bool { return server.blobs.serveQueued.Load() == 0 })
		// One more waits and is served once the held ones finish.
		conn = c.dialBlob(t, 0)
		if err := writeBlobRequest(conn, "slow"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "a request waits its turn", func() bool { return server.blobs.serveQueued.Load() == 1 })
		if n := g.open.Load(); n != blobTransfers {
			t.Errorf("%d transfers open at the server, want %d", n, blobTransfers)
		}
		g.release()
		var w bytes.Buffer
		if _, err := receiveBlob(conn, &w, make([]byte, 4096)); err != nil || !bytes.Equal(w.Bytes(), data) {
			t.Errorf("the waiting request got %d bytes, %v", w.Len(), err)
		}
	})

	g.release()
	wg.Wait()
	for i, err := range held {
		if err != nil {
			t.Errorf("held fetch %d: %v", i, err)
		}
	}
	if n := g.maxOpen.Load(); n != blobTransfers {
		t.Errorf("at most %d transfers were open at once, want %d", n, blobTransfers)
	}
	if n := len(srcs[0].calls()); n != blobTransfers+1 {
		t.Errorf("the source was opened %d times, want %d (the hung-up request never)", n, blobTransfers+1)
	}
}

// BenchmarkFetchBlob fetches a 64 MiB blob from one node of a two-node
// cluster to the other over loopback TCP, checksummed, into io.Discard.
func BenchmarkFetchBlob(b *testing.B) {
	const size = 64 << 20
	data := randomBytes(b, size)
	src := &testBlobs{open: holding(map[string][]byte{"bench": data})}
	c := newCluster(b, 2, src, &testBlobs{})
	ctx := context.Background()
	b.SetBytes(size)
	for b.Loop() {
		n, err := c.nodes[1].FetchBlob(ctx, "bench", io.Discard)
		if err != nil || n != size {
			b.Fatalf("fetch = %d, %v", n, err)
		}
	}
}
