package raftstore

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"net"
	"testing"
	"time"
)

func TestHandshake(t *testing.T) {
	secret := []byte("0123456789abcdef-secret")
	tests := []struct {
		name         string
		clientSecret []byte
		kind         byte
		wantOK       bool
	}{
		{"raft connection", secret, connRaft, true},
		{"forward connection", secret, connForward, true},
		{"blob connection", secret, connBlob, true},
		{"wrong secret", []byte("another-secret-of-16+"), connRaft, false},
		{"unknown kind", secret, 9, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			type result struct {
				kind byte
				err  error
			}
			srv := make(chan result, 1)
			go func() {
				k, err := serverHandshake(a, secret)
				if err != nil {
					a.Close()
				}
				srv <- result{k, err}
			}()
			cerr := clientHandshake(b, tt.clientSecret, tt.kind)
			s := <-srv
			if (s.err == nil) != tt.wantOK || (cerr == nil) != tt.wantOK {
				t.Fatalf("server err %v, client err %v, want ok %v", s.err, cerr, tt.wantOK)
			}
			if tt.wantOK && s.kind != tt.kind {
				t.Errorf("server saw kind %d, want %d", s.kind, tt.kind)
			}
		})
	}
}

func TestHandshakeRefusesAnImpostorServer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		if _, err := serverHandshake(a, []byte("impostor-secret-xxxx")); err != nil {
			a.Close() // as mux.handle does
		}
	}()
	if err := clientHandshake(b, []byte("the-real-cluster-secret"), connForward); !errors.Is(err, errHandshake) {
		t.Fatalf("client accepted a server that does not know the secret: %v", err)
	}
}

func TestHandshakeTimesOutASilentClient(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the handshake timeout")
	}
	a, b := net.Pipe()
	defer b.Close()
	go func() { _, _ = b.Read(make([]byte, 36)) }() // read the hello, then say nothing
	start := time.Now()
	if _, err := serverHandshake(a, []byte("0123456789abcdef")); err == nil {
		t.Fatal("a silent client passed the handshake")
	}
	if d := time.Since(start); d > handshakeTimeout+2*time.Second {
		t.Errorf("handshake waited %v for a silent client", d)
	}
}

// FuzzVerifyClientHello feeds arbitrary client answers to the server's check:
// it must never panic and never admit an answer without the right MAC.
func FuzzVerifyClientHello(f *testing.F) {
	secret := []byte("0123456789abcdef")
	sn := bytes.Repeat([]byte{7}, nonceSize)
	f.Add([]byte{connRaft})
	f.Add(bytes.Repeat([]byte{1}, clientHelloSize))
	good := append([]byte{connForward}, make([]byte, nonceSize)...)
	f.Add(append(good, handshakeMAC(secret, "client", connForward, sn, make([]byte, nonceSize))...))
	f.Fuzz(func(t *testing.T, msg []byte) {
		kind, err := verifyClientHello(secret, sn, msg)
		if err != nil {
			return
		}
		want := handshakeMAC(secret, "client", kind, sn, msg[1:1+nonceSize])
		if !hmac.Equal(msg[1+nonceSize:], want) || (kind != connRaft && kind != connForward && kind != connBlob) {
			t.Fatalf("admitted %x", msg)
		}
	})
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	if err := writeFrame(&buf, fwdApply, []byte("payload")); err != nil {
		t.Fatal(err)
	}
	op, p, err := readFrame(&buf)
	if err != nil || op != fwdApply || string(p) != "payload" {
		t.Fatalf("readFrame = %d %q %v", op, p, err)
	}
	huge := []byte{fwdApply, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := readFrame(bytes.NewReader(huge)); err == nil {
		t.Error("a frame larger than the limit was accepted")
	}
	buf.Reset()
	te := &TxnError{Reason: ReasonConflict, Table: "t", ID: "x", Index: "name"}
	te.Err = refuse(ReasonConflict, 0, "t", "x", "STATE_INVALID", "taken").Err
	if err := writeResponse(&buf, fwdResponse{Index: 7, Refused: te}); err != nil {
		t.Fatal(err)
	}
	resp, err := readResponse(&buf)
	if err != nil || resp.Index != 7 || resp.Refused == nil || resp.Refused.Index != "name" || resp.Refused.Err.Message != "taken" {
		t.Errorf("response round trip = %+v, %v", resp, err)
	}
}

// FuzzReadFrame: arbitrary bytes from the network never panic the reader
// and never make it allocate beyond the frame limit.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{fwdApply, 0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add([]byte{fwdReadIndex, 0, 0, 0, 0})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		_, p, err := readFrame(bytes.NewReader(in))
		if err == nil && len(p) > maxFrame {
			t.Fatalf("frame of %d bytes accepted", len(p))
		}
		_, _ = readResponse(bytes.NewReader(in))
	})
}

func TestHandshakeMACsDifferBySide(t *testing.T) {
	s, c := make([]byte, nonceSize), make([]byte, nonceSize)
	if hmac.Equal(handshakeMAC([]byte("k"), "client", 1, s, c), handshakeMAC([]byte("k"), "server", 1, s, c)) {
		t.Fatal("client and server MACs are equal: a server could reflect the client's MAC")
	}
}
