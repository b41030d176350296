package raftstore

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Every connection to a node's cluster port starts with a handshake that
// authenticates both ends with the cluster secret and names what the
// connection carries:
//
//	server -> client: magic "SVC1", 32-byte server nonce
//	client -> server: 1-byte kind, 32-byte client nonce,
//	                  HMAC-SHA256(secret, "client" | kind | server nonce | client nonce)
//	server -> client: HMAC-SHA256(secret, "server" | kind | server nonce | client nonce)
//
// Both MACs are compared in constant time. The nonces make every handshake
// distinct, so a recorded one cannot be replayed. The stream after the
// handshake is not encrypted: run the cluster port on a private network.
const (
	connRaft    byte = 1
	connForward byte = 2
	connBlob    byte = 3 // one blob fetch (blobs.go)

	nonceSize        = 32
	handshakeTimeout = 5 * time.Second
)

var handshakeMagic = [4]byte{'S', 'V', 'C', '1'}

var errHandshake = errors.New("cluster handshake refused")

func handshakeMAC(secret []byte, side string, kind byte, sn, cn []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(side))
	m.Write([]byte{kind})
	m.Write(sn)
	m.Write(cn)
	return m.Sum(nil)
}

// serverHandshake runs the server side on a fresh connection and returns the
// kind the client asked for.
func serverHandshake(c net.Conn, secret []byte) (byte, error) {
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	sn := make([]byte, nonceSize)
	if _, err := rand.Read(sn); err != nil {
		return 0, err
	}
	if _, err := c.Write(append(handshakeMagic[:], sn...)); err != nil {
		return 0, err
	}
	msg := make([]byte, clientHelloSize)
	if _, err := io.ReadFull(c, msg); err != nil {
		return 0, err
	}
	kind, err := verifyClientHello(secret, sn, msg)
	if err != nil {
		return 0, err
	}
	if _, err := c.Write(handshakeMAC(secret, "server", kind, sn, msg[1:1+nonceSize])); err != nil {
		return 0, err
	}
	return kind, nil
}

const clientHelloSize = 1 + nonceSize + sha256.Size

// verifyClientHello checks a client's answer to the server nonce sn and
// returns the connection kind it asks for.
func verifyClientHello(secret, sn, msg []byte) (byte, error) {
	if len(msg) != clientHelloSize {
		return 0, errHandshake
	}
	kind, cn, mac := msg[0], msg[1:1+nonceSize], msg[1+nonceSize:]
	if !hmac.Equal(mac, handshakeMAC(secret, "client", kind, sn, cn)) {
		return 0, errHandshake
	}
	if kind != connRaft && kind != connForward && kind != connBlob {
		return 0, fmt.Errorf("%w: unknown connection kind %d", errHandshake, kind)
	}
	return kind, nil
}

// clientHandshake runs the client side on a fresh connection.
func clientHandshake(c net.Conn, secret []byte, kind byte) error {
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	hello := make([]byte, len(handshakeMagic)+nonceSize)
	if _, err := io.ReadFull(c, hello); err != nil {
		return err
	}
	if [4]byte(hello[:4]) != handshakeMagic {
		return fmt.Errorf("%w: not an svc cluster port", errHandshake)
	}
	sn := hello[4:]
	cn := make([]byte, nonceSize)
	if _, err := rand.Read(cn); err != nil {
		return err
	}
	msg := append([]byte{kind}, cn...)
	msg = append(msg, handshakeMAC(secret, "client", kind, sn, cn)...)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	reply := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, reply); err != nil {
		return fmt.Errorf("%w: %v (is the cluster secret the same on every node?)", errHandshake, err)
	}
	if !hmac.Equal(reply, handshakeMAC(secret, "server", kind, sn, cn)) {
		return fmt.Errorf("%w: the peer does not know the cluster secret", errHandshake)
	}
	return nil
}

// mux owns a node's cluster listener: it authenticates every connection and
// hands Raft connections to Raft's transport, forwarding connections to the
// forwarding server and blob connections to the blob server.
type mux struct {
	ln      net.Listener
	secret  []byte
	log     *slog.Logger
	raftCh  chan net.Conn
	forward func(net.Conn)
	blob    func(net.Conn)

	closeOnce sync.Once
	closed    chan struct{}
}

func newMux(ln net.Listener, secret []byte, log *slog.Logger) *mux {
	return &mux{ln: ln, secret: secret, log: log, raftCh: make(chan net.Conn), closed: make(chan struct{})}
}

// serve accepts connections until the listener closes.
func (m *mux) serve() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.log.Error("cluster listener failed", "err", err)
			return
		}
		go m.handle(c)
	}
}

func (m *mux) handle(c net.Conn) {
	kind, err := serverHandshake(c, m.secret)
	if err != nil {
		m.log.Warn("refused cluster connection", "remote", c.RemoteAddr().String(), "err", err)
		_ = c.Close()
		return
	}
	switch kind {
	case connRaft:
		select {
		case m.raftCh <- c:
		case <-m.closed:
			_ = c.Close()
		}
	case connForward:
		m.forward(c)
	case connBlob:
		m.blob(c)
	}
}

func (m *mux) close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.closed)
		err = m.ln.Close()
	})
	return err
}

// dial opens an authenticated connection of the given kind.
func (m *mux) dial(addr string, kind byte, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if err := clientHandshake(c, m.secret, kind); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}

// dialContext opens an authenticated connection of the given kind; ctx bounds
// the dial and the handshake.
func (m *mux) dialContext(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	d := net.Dialer{Timeout: handshakeTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	err = clientHandshake(c, m.secret, kind)
	if !stop() {
		_ = c.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}

// raftLayer is the raft.StreamLayer over the mux.
type raftLayer struct{ m *mux }

var _ raft.StreamLayer = raftLayer{}

func (l raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.m.raftCh:
		return c, nil
	case <-l.m.closed:
		return nil, net.ErrClosed
	}
}

func (l raftLayer) Close() error   { return l.m.close() }
func (l raftLayer) Addr() net.Addr { return l.m.ln.Addr() }

func (l raftLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return l.m.dial(string(addr), connRaft, timeout)
}
