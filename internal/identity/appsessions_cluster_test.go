package identity

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/raftstore"
)

// openNodes starts a real three-node store over loopback and an identity
// service on each node.
func openNodes(t *testing.T) []*Service {
	t.Helper()
	const n = 3
	lns := make([]net.Listener, n)
	var peers []raftstore.Peer
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		peers = append(peers, raftstore.Peer{ID: fmt.Sprintf("node-%d", i+1), Addr: ln.Addr().String()})
	}
	tables := append(Tables(), audit.Entries, events.Events)
	now := func() time.Time { return time.Now().UTC() }
	svcs := make([]*Service, n)
	for i := range n {
		s, err := raftstore.Open(raftstore.Config{
			NodeID: peers[i].ID, Dir: t.TempDir(), RaftAddr: peers[i].Addr, Listener: lns[i], Peers: peers,
			Secret: []byte("a-test-cluster-secret"), Tables: tables,
			Timing: raftstore.Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 200 * time.Millisecond, CommitTimeout: 5 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		svcs[i] = New(Deps{Store: s, Hasher: cheapHasher, Policy: &fixedPolicy{p: policy.Default()},
			AccountLimit: throttle.New(100, time.Minute, now, 100), ClientLimit: throttle.New(100, time.Minute, now, 100),
			AccountAnyLimit: throttle.New(100, time.Minute, now, 100), KnownClients: throttle.NewRecent(time.Hour, now, 100), Now: now})
		t.Cleanup(func() { waitBackground(t, svcs[i]) })
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	for _, s := range svcs {
		if err := s.d.Store.(*raftstore.Store).WaitForLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return svcs
}

// TestHandoffAcrossNodes: in a cluster, a code minted on one node is
// redeemed on another at once (a node that has not applied the row yet
// reads consistently), its cookie works on every node, and concurrent
// redemptions on all three nodes give one cookie.
func TestHandoffAcrossNodes(t *testing.T) {
	nodes := openNodes(t)
	if _, err := nodes[0].FirstRun(bg, testPW); err != nil {
		t.Fatal(err)
	}
	// Node 2 signs in once it has the account (reads are local).
	var in SignedIn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if in, err = nodes[1].SignIn(bg, "admin", testPW, Client{IP: "192.0.2.1"}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	must(t, "sign in", err)
	app := "app_01M80000000000000000000000"
	// The console authenticates the session before it asks for a code:
	// every node has it once it does.
	for i, n := range nodes {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := n.Authenticate(bg, "", in.Cookie); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("node %d does not know the session: %v", i+1, err)
			}
		}
	}
	for round := range 5 {
		from, to := round%3, (round+1)%3
		h := handoff{state: NewHandoffState()}
		h.code, err = nodes[from].BeginAppSession(bg, NewAppSession{AppID: app, State: h.state, SessionID: sessionIDOf(in.Cookie)})
		must(t, "begin", err)
		c, err := nodes[to].RedeemAppSession(bg, app, h.code, h.stateOf)
		must(t, fmt.Sprintf("redeem on node %d a code of node %d", to+1, from+1), err)
		for i, n := range nodes {
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := n.AuthenticateApp(bg, app, c.Value)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the cookie does not work on node %d: %v", i+1, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		_, err = nodes[from].RedeemAppSession(bg, app, h.code, h.stateOf)
		wantCode(t, "the code again, on the node that made it", err, errcode.AuthInvalid)
	}

	h := handoff{state: NewHandoffState()}
	h.code, err = nodes[0].BeginAppSession(bg, NewAppSession{AppID: app, State: h.state, SessionID: sessionIDOf(in.Cookie)})
	must(t, "begin", err)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := nodes[i%3].RedeemAppSession(bg, app, h.code, h.stateOf); err == nil {
				wins.Add(1)
			} else if errcode.CodeOf(err) != errcode.AuthInvalid {
				t.Errorf("redeem: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d redemptions across the nodes won; want 1", wins.Load())
	}
}
