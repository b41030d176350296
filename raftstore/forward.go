package raftstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// The forwarding protocol carries a follower's writes and read-index requests
// to the leader over an authenticated cluster connection. A connection carries
// one request at a time:
//
//	request:  1-byte op, 4-byte big-endian length, payload
//	response: 4-byte big-endian length, JSON fwdResponse
const (
	fwdApply     byte = 1 // payload: a command; answer: its index and refusal
	fwdReadIndex byte = 2 // no payload; answer: the leader's applied index (readIndex)

	maxFrame       = 64 << 20
	fwdIdleTimeout = 5 * time.Minute
	fwdPoolSize    = 16
	// fwdPoolIdle is how long a pooled connection may sit unused; it is well
	// below the server's fwdIdleTimeout so that a request is never written
	// to a connection the leader is about to close.
	fwdPoolIdle = time.Minute
)

type fwdResponse struct {
	Index uint64 `json:"index,omitempty"`
	// Retry says the leader did not accept the request (it is not, or no
	// longer, the leader); sending it again, to the new leader, is safe.
	Retry bool `json:"retry,omitempty"`
	// Refused is the FSM's refusal of an applied command.
	Refused *TxnError `json:"refused,omitempty"`
	// Fail is any other failure, for example an invalid command or a write
	// whose outcome the leader could not learn.
	Fail *errcode.Error `json:"fail,omitempty"`
}

func writeFrame(w io.Writer, op byte, payload []byte) error {
	hdr := make([]byte, 5)
	hdr[0] = op
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(append(hdr, payload...)); err != nil {
		return err
	}
	return nil
}

func readFrame(r io.Reader) (byte, []byte, error) {
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes exceeds %d", n, maxFrame)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0], payload, nil
}

func writeResponse(w io.Writer, resp fwdResponse) error {
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	hdr := make([]byte, 4)
	binary.BigEndian.PutUint32(hdr, uint32(len(b)))
	_, err = w.Write(append(hdr, b...))
	return err
}

func readResponse(r io.Reader) (fwdResponse, error) {
	var resp fwdResponse
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return resp, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if n > maxFrame {
		return resp, fmt.Errorf("response of %d bytes exceeds %d", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return resp, err
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return resp, fmt.Errorf("decode response: %w", err)
	}
	return resp, nil
}

// serveForward answers forwarded requests on one connection until it closes.
func (s *Store) serveForward(c net.Conn) {
	defer c.Close()
	select {
	case <-s.raftUp:
	case <-s.closed:
		return
	}
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(fwdIdleTimeout))
		op, payload, err := readFrame(br)
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		var resp fwdResponse
		switch op {
		case fwdApply:
			resp = s.answerApply(payload)
		case fwdReadIndex:
			resp = s.answerReadIndex()
		default:
			s.log.Warn("unknown forwarding request; closing connection", "op", op, "remote", c.RemoteAddr().String())
			return
		}
		if err := writeResponse(c, resp); err != nil {
			return
		}
	}
}

func (s *Store) answerApply(cmd []byte) fwdResponse {
	if err := validateCommand(cmd, s.fsm.tables); err != nil {
		return fwdResponse{Fail: errcode.New(errcode.ValidInvalid, "forwarded command refused: %v", err)}
	}
	if !s.IsLeader() {
		return fwdResponse{Retry: true}
	}
	if refusal := s.gate(cmd); refusal != nil {
		return fwdResponse{Fail: refusal}
	}
	index, refused, err := s.applyLocal(cmd)
	switch {
	case err == nil:
		return fwdResponse{Index: index, Refused: refused}
	case notAccepted(err):
		return fwdResponse{Retry: true}
	default:
		return fwdResponse{Fail: unknownOutcome(err)}
	}
}

func (s *Store) answerReadIndex() fwdResponse {
	if !s.IsLeader() {
		return fwdResponse{Retry: true}
	}
	index, ok := s.readIndex()
	if !ok {
		return fwdResponse{Retry: true}
	}
	return fwdResponse{Index: index}
}

// forwarder sends requests to the leader over pooled connections.
type forwarder struct {
	m *mux

	mu   sync.Mutex
	idle map[string][]pooledConn
}

type pooledConn struct {
	net.Conn
	since time.Time
}

// errNotSent marks a failure that happened before the request was written in
// full: the leader cannot have acted on it, so it may be sent again.
var errNotSent = errors.New("request not sent")

// call sends one request to addr and returns the response. An error wrapping
// errNotSent means the request never reached the leader.
func (f *forwarder) call(ctx context.Context, addr string, op byte, payload []byte) (fwdResponse, error) {
	c, err := f.get(ctx, addr)
	if err != nil {
		return fwdResponse{}, fmt.Errorf("%w: %v", errNotSent, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if err := writeFrame(c, op, payload); err != nil {
		_ = c.Close()
		return fwdResponse{}, fmt.Errorf("%w: %v", errNotSent, err)
	}
	resp, err := readResponse(c)
	if err != nil {
		_ = c.Close()
		return fwdResponse{}, err
	}
	_ = c.SetDeadline(time.Time{})
	f.put(addr, c)
	return resp, nil
}

func (f *forwarder) get(ctx context.Context, addr string) (net.Conn, error) {
	f.mu.Lock()
	for conns := f.idle[addr]; len(conns) > 0; conns = f.idle[addr] {
		c := conns[len(conns)-1]
		f.idle[addr] = conns[:len(conns)-1]
		if time.Since(c.since) < fwdPoolIdle {
			f.mu.Unlock()
			return c.Conn, nil
		}
		_ = c.Close()
	}
	f.mu.Unlock()
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	return f.m.dial(addr, connForward, timeout)
}

func (f *forwarder) put(addr string, c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.idle[addr]) >= fwdPoolSize {
		_ = c.Close()
		return
	}
	if f.idle == nil {
		f.idle = map[string][]pooledConn{}
	}
	f.idle[addr] = append(f.idle[addr], pooledConn{Conn: c, since: time.Now()})
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, conns := range f.idle {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	f.idle = nil
}
