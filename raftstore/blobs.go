package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync/atomic"
	"time"
)

// BlobSource holds the named blobs a node serves to the other nodes of its
// cluster, which fetch them with FetchBlob: files too big for the Raft log
// that live on one node's disk, such as build artifacts. The composition
// root gives it to Open in Config.Blobs.
type BlobSource interface {
	// OpenBlob opens the named blob and returns it with its size in bytes;
	// the reader must yield exactly that many bytes, or the transfer fails.
	// A blob the node does not have is ErrBlobNotFound, or an error wrapping
	// fs.ErrNotExist. name has passed ValidBlobName; ctx ends when the store
	// closes. It is called by a few transfers at once at most.
	OpenBlob(ctx context.Context, name string) (io.ReadCloser, int64, error)
}

// ErrBlobNotFound is FetchBlob's answer when every other server said it does
// not have the blob, and a BlobSource's answer for a blob it does not have.
var ErrBlobNotFound = errors.New("blob not found")

var (
	errBlobName = errors.New("invalid blob name")
	// errPeerGone marks a transfer that the fetching node abandoned.
	errPeerGone = errors.New("peer went away")
	// errStoreClosed ends the transfers of a store that closes.
	errStoreClosed = errors.New("store closed")
)

// The blob protocol runs on a cluster connection of kind connBlob, so behind
// the same handshake as Raft and forwarding. A connection carries one fetch:
//
//	request:  1-byte op (blobGet), 1-byte name length, name
//	answer:   1-byte status, then for
//	  blobOK:       8-byte big-endian size, size bytes of blob,
//	                4-byte big-endian CRC-32C (Castagnoli) of those bytes
//	  blobFailed:   2-byte big-endian length, message (at most 1 KiB)
//	  blobNotFound, blobBadName: nothing
//
// after which the server closes the connection. A server whose source yields
// fewer or more bytes than it declared closes the connection without the
// checksum, so the fetching node never takes a short blob for a whole one.
const (
	blobGet byte = 1

	blobOK       byte = 0
	blobNotFound byte = 1
	blobBadName  byte = 2
	blobFailed   byte = 3

	maxBlobName    = 128
	maxBlobSize    = 1 << 40
	maxBlobMessage = 1 << 10
	// blobTransfers is how many blobs a node serves at once, and how many it
	// fetches at once; further requests wait their turn.
	blobTransfers = 4
	// blobIdleTimeout fails a transfer whose peer neither reads nor writes
	// for that long, however long the whole transfer takes.
	blobIdleTimeout = 30 * time.Second
	blobBufSize     = 256 << 10
)

// A name's length travels in one byte.
const _ = uint8(maxBlobName)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ValidBlobName checks that name can name a blob: 1 to 128 of A-Z a-z 0-9
// . _ -, starting with a letter or a digit. Such a name is one plain path
// element on any file system (no separator, no "." or "..", no control or
// space character), so a BlobSource may map it to a file as it is.
func ValidBlobName(name string) error {
	if len(name) == 0 || len(name) > maxBlobName {
		return fmt.Errorf("%w: %d bytes long, want 1 to %d", errBlobName, len(name), maxBlobName)
	}
	for i := range len(name) {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("%w: %q: want A-Z a-z 0-9 . _ -, starting with a letter or digit", errBlobName, name)
		}
	}
	return nil
}

// blobPeer is a node's side of blob transfers: its source and the slots that
// bound how many transfers it serves and fetches at once.
type blobPeer struct {
	src      BlobSource
	serving  chan struct{}
	fetching chan struct{}
	// serveQueued and fetchQueued count the transfers waiting for a slot.
	serveQueued atomic.Int64
	fetchQueued atomic.Int64
}

func newBlobPeer(src BlobSource) *blobPeer {
	return &blobPeer{
		src:      src,
		serving:  make(chan struct{}, blobTransfers),
		fetching: make(chan struct{}, blobTransfers),
	}
}

// FetchBlob copies the named blob from another server of the current Raft
// configuration into w and returns the number of bytes written. It asks the
// leader first and then the others, never this node's own source, until one
// has the blob.
//
// The error wraps ErrBlobNotFound only when every other server answered that
// it does not have the blob (so on a single node always). When none had it
// but some could not answer (down, refused, failing), the error does not
// wrap ErrBlobNotFound: the blob may be on one of those, and a later attempt
// may find it. An invalid name is refused without asking anyone.
//
// Bytes reach w as they arrive. A failure after the first byte is returned at
// once, since w then holds part of a blob; the caller writes to a temporary
// file and keeps it only when the error is nil. A transfer that ends before
// its declared size, or whose checksum does not match, is an error wrapping
// io.ErrUnexpectedEOF or saying so, never a success. FetchBlob returns when
// ctx ends, with its error, and waits while this node already fetches a few
// blobs.
func (s *Store) FetchBlob(ctx context.Context, name string, w io.Writer) (int64, error) {
	if err := ValidBlobName(name); err != nil {
		return 0, fmt.Errorf("fetch blob: %w", err)
	}
	ctx, cancel := s.closingContext(ctx)
	defer cancel()
	if ctx.Err() != nil {
		return 0, fmt.Errorf("fetch blob %s: %w", name, context.Cause(ctx))
	}
	peers, err := s.blobPeers()
	if err != nil {
		return 0, fmt.Errorf("fetch blob %s: %w", name, err)
	}
	if len(peers) == 0 || s.mux == nil {
		return 0, fmt.Errorf("fetch blob %s: %w (no other server to ask)", name, ErrBlobNotFound)
	}
	if err := s.blobs.acquireFetch(ctx); err != nil {
		return 0, fmt.Errorf("fetch blob %s: %w", name, context.Cause(ctx))
	}
	defer func() { <-s.blobs.fetching }()

	dst := &blobSink{w: w}
	buf := make([]byte, blobBufSize)
	var failed peerErrors
	for _, p := range peers {
		err := s.fetchBlobFrom(ctx, p.Addr, name, dst, buf)
		switch {
		case err == nil:
			return dst.n, nil
		case ctx.Err() != nil:
			return dst.n, fmt.Errorf("fetch blob %s from %s: %w", name, p.ID, context.Cause(ctx))
		case dst.n > 0 || dst.err != nil:
			return dst.n, fmt.Errorf("fetch blob %s from %s: %w", name, p.ID, err)
		case errors.Is(err, ErrBlobNotFound):
		default:
			failed = append(failed, fmt.Errorf("%s: %w", p.ID, err))
		}
	}
	if len(failed) > 0 {
		return 0, fmt.Errorf("fetch blob %s: %d of %d servers did not have it and the others could not answer: %w",
			name, len(peers)-len(failed), len(peers), failed)
	}
	return 0, fmt.Errorf("fetch blob %s: %w on any of %d servers", name, ErrBlobNotFound, len(peers))
}

// blobPeers lists the servers of the current configuration but this one, the
// leader first.
func (s *Store) blobPeers() ([]Peer, error) {
	r := s.started.Load()
	if r == nil {
		// Raft is starting (restoring a snapshot): the configured peers.
		var peers []Peer
		for _, p := range s.cfg.Peers {
			if p.ID != s.cfg.NodeID {
				peers = append(peers, p)
			}
		}
		return peers, nil
	}
	fut := r.GetConfiguration()
	if err := fut.Error(); err != nil {
		return nil, fmt.Errorf("read raft configuration: %w", err)
	}
	_, leader := r.LeaderWithID()
	var peers []Peer
	for _, srv := range fut.Configuration().Servers {
		if string(srv.ID) == s.cfg.NodeID {
			continue
		}
		p := Peer{ID: string(srv.ID), Addr: string(srv.Address)}
		if srv.ID == leader {
			peers = append([]Peer{p}, peers...)
		} else {
			peers = append(peers, p)
		}
	}
	return peers, nil
}

// fetchBlobFrom asks one server for the blob and streams it into dst.
func (s *Store) fetchBlobFrom(ctx context.Context, addr, name string, dst io.Writer, buf []byte) error {
	c, err := s.mux.dialContext(ctx, addr, connBlob)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	ic := idleConn{c: c, idle: blobIdleTimeout}
	if err := writeBlobRequest(ic, name); err != nil {
		return fmt.Errorf("send request: %w", err)
	}
	_, err = receiveBlob(ic, dst, buf)
	return err
}

func (b *blobPeer) acquireFetch(ctx context.Context) error {
	select {
	case b.fetching <- struct{}{}:
		return nil
	default:
	}
	b.fetchQueued.Add(1)
	defer b.fetchQueued.Add(-1)
	select {
	case b.fetching <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveBlob answers one blob request on an authenticated connection.
func (s *Store) serveBlob(c net.Conn) {
	defer c.Close()
	remote := c.RemoteAddr().String()
	_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	name, err := readBlobRequest(c)
	if err != nil {
		s.log.Warn("bad blob request; closing connection", "remote", remote, "err", err)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	ic := idleConn{c: c, idle: blobIdleTimeout}
	if err := ValidBlobName(name); err != nil {
		s.log.Warn("refused blob request", "remote", remote, "err", err)
		_ = writeBlobStatus(ic, blobBadName)
		return
	}
	if s.blobs.src == nil {
		_ = writeBlobStatus(ic, blobNotFound)
		return
	}
	if !s.blobs.acquireServe(c, s.closed) {
		return
	}
	defer func() { <-s.blobs.serving }()
	ctx, cancel := s.closingContext(context.Background())
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	switch err := s.blobs.send(ctx, ic, name); {
	case err == nil:
	case errors.Is(err, errPeerGone):
		s.log.Debug("blob transfer abandoned by the fetching node", "blob", name, "remote", remote, "err", err)
	default:
		s.log.Warn("blob transfer failed", "blob", name, "remote", remote, "err", err)
	}
}

// acquireServe waits for a serving slot. It gives up when the fetching node
// hangs up (its context ended) or the store closes; while it waits, it reads
// the connection, on which the fetching node sends nothing more, to notice.
func (b *blobPeer) acquireServe(c net.Conn, closed <-chan struct{}) bool {
	select {
	case b.serving <- struct{}{}:
		return true
	default:
	}
	b.serveQueued.Add(1)
	defer b.serveQueued.Add(-1)
	gone := make(chan struct{})
	go func() {
		_, _ = c.Read(make([]byte, 1))
		close(gone)
	}()
	defer func() {
		_ = c.SetReadDeadline(time.Now()) // ends the read above
		<-gone
		_ = c.SetReadDeadline(time.Time{})
	}()
	select {
	case b.serving <- struct{}{}:
		return true
	case <-gone:
		return false
	case <-closed:
		return false
	}
}

// send answers a request for the named blob on w.
func (b *blobPeer) send(ctx context.Context, w io.Writer, name string) error {
	rc, size, err := b.src.OpenBlob(ctx, name)
	if rc != nil {
		defer rc.Close()
	}
	switch {
	case errors.Is(err, ErrBlobNotFound) || errors.Is(err, fs.ErrNotExist):
		return peerWrite(writeBlobStatus(w, blobNotFound))
	case err != nil:
		_ = writeBlobFailure(w, err.Error())
		return fmt.Errorf("open: %w", err)
	case rc == nil || size < 0 || size > maxBlobSize:
		_ = writeBlobFailure(w, fmt.Sprintf("the source gave a blob of size %d", size))
		return fmt.Errorf("the source gave a blob of size %d (reader %v)", size, rc != nil)
	}
	hdr := make([]byte, 9)
	hdr[0] = blobOK
	binary.BigEndian.PutUint64(hdr[1:], uint64(size))
	if _, err := w.Write(hdr); err != nil {
		return peerWrite(err)
	}
	sum := crc32.New(castagnoli)
	buf := make([]byte, blobBufSize)
	for n := int64(0); n < size; {
		k, err := rc.Read(buf[:min(int64(len(buf)), size-n)])
		if k > 0 {
			_, _ = sum.Write(buf[:k])
			if _, werr := w.Write(buf[:k]); werr != nil {
				return peerWrite(werr)
			}
			n += int64(k)
		}
		switch {
		case err == nil || err == io.EOF && n == size:
		case err == io.EOF:
			return fmt.Errorf("the source ended after %d of its declared %d bytes", n, size)
		default:
			return fmt.Errorf("read source after %d of %d bytes: %w", n, size, err)
		}
	}
	switch k, err := io.ReadFull(rc, buf[:1]); {
	case k > 0:
		return fmt.Errorf("the source has more than its declared %d bytes", size)
	case err != io.EOF:
		return fmt.Errorf("read source at its end: %w", err)
	}
	return peerWrite(binary.Write(w, binary.BigEndian, sum.Sum32()))
}

// peerWrite marks a failed write to the fetching node.
func peerWrite(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errPeerGone, err)
}

func writeBlobRequest(w io.Writer, name string) error {
	_, err := w.Write(append([]byte{blobGet, byte(len(name))}, name...))
	return err
}

func readBlobRequest(r io.Reader) (string, error) {
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return "", err
	}
	if hdr[0] != blobGet {
		return "", fmt.Errorf("unknown blob request %d", hdr[0])
	}
	name := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, name); err != nil {
		return "", err
	}
	return string(name), nil
}

func writeBlobStatus(w io.Writer, status byte) error {
	_, err := w.Write([]byte{status})
	return err
}

func writeBlobFailure(w io.Writer, msg string) error {
	if len(msg) > maxBlobMessage {
		msg = msg[:maxBlobMessage]
	}
	b := []byte{blobFailed, 0, 0}
	binary.BigEndian.PutUint16(b[1:], uint16(len(msg)))
	_, err := w.Write(append(b, msg...))
	return err
}

// receiveBlob reads a server's answer from r and copies the blob into w,
// using buf; it returns the number of bytes written.
func receiveBlob(r io.Reader, w io.Writer, buf []byte) (int64, error) {
	status := make([]byte, 1)
	if _, err := io.ReadFull(r, status); err != nil {
		return 0, fmt.Errorf("read answer: %w", err)
	}
	switch status[0] {
	case blobOK:
	case blobNotFound:
		return 0, ErrBlobNotFound
	case blobBadName:
		return 0, fmt.Errorf("%w: the server refused the name", errBlobName)
	case blobFailed:
		hdr := make([]byte, 2)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return 0, fmt.Errorf("read failure: %w", err)
		}
		n := binary.BigEndian.Uint16(hdr)
		if n > maxBlobMessage {
			return 0, fmt.Errorf("failure message of %d bytes exceeds %d", n, maxBlobMessage)
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(r, msg); err != nil {
			return 0, fmt.Errorf("read failure: %w", err)
		}
		return 0, fmt.Errorf("the server failed: %s", msg)
	default:
		return 0, fmt.Errorf("unknown answer %d", status[0])
	}
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return 0, fmt.Errorf("read size: %w", err)
	}
	size := binary.BigEndian.Uint64(hdr)
	if size > maxBlobSize {
		return 0, fmt.Errorf("declared size %d exceeds %d", size, uint64(maxBlobSize))
	}
	sum := crc32.New(castagnoli)
	var n int64
	for n < int64(size) {
		k, err := r.Read(buf[:min(int64(len(buf)), int64(size)-n)])
		if k > 0 {
			_, _ = sum.Write(buf[:k])
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, fmt.Errorf("write blob: %w", werr)
			}
			n += int64(k)
		}
		switch {
		case err == nil || err == io.EOF && n == int64(size):
		case err == io.EOF:
			return n, fmt.Errorf("blob truncated after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
		default:
			return n, fmt.Errorf("read blob after %d of %d bytes: %w", n, size, err)
		}
	}
	trailer := make([]byte, 4)
	if _, err := io.ReadFull(r, trailer); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return n, fmt.Errorf("blob of %d bytes ended before its checksum: %w", n, err)
	}
	if got, want := sum.Sum32(), binary.BigEndian.Uint32(trailer); got != want {
		return n, fmt.Errorf("blob checksum %08x, the server's %08x", got, want)
	}
	return n, nil
}

// blobSink counts what reaches w and keeps w's error, which ends a fetch
// rather than moving on to the next server.
type blobSink struct {
	w   io.Writer
	n   int64
	err error
}

func (s *blobSink) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		s.err = err
	}
	return n, err
}

// idleConn refreshes the connection's deadline before every read and write,
// so that a transfer fails when its peer stalls, however long it takes.
type idleConn struct {
	c    net.Conn
	idle time.Duration
}

func (c idleConn) Read(p []byte) (int, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(c.idle))
	return c.c.Read(p)
}

func (c idleConn) Write(p []byte) (int, error) {
	_ = c.c.SetWriteDeadline(time.Now().Add(c.idle))
	return c.c.Write(p)
}

// closingContext returns a context that also ends, with errStoreClosed as
// its cause, when the store closes.
func (s *Store) closingContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-s.closed:
			cancel(errStoreClosed)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// peerErrors are the failures of several servers, in the order asked.
type peerErrors []error

func (e peerErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e peerErrors) Unwrap() []error { return e }
