package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/svchost/svc/api"
)

// TestClusterNodeBackFromASnapshotNeverDeniesWhatItHasNotSeen: issue 15's
// soak saw a node just back (restoring a snapshot, then replaying) refuse
// valid tokens AUTH_TOKEN_INVALID. A follower is killed; through the
// leader the administrator mints 40 tokens (a write each) while the leader
// snapshots and compacts its log past everything the follower holds; the
// follower comes back and must install the leader's snapshot. From the
// moment it serves, every token is tried on it, again and again: each
// answer is 200, or 503 STORE_UNAVAILABLE with Retry-After while it
// catches up; never AUTH_* or another refusal, until every token works.
func TestClusterNodeBackFromASnapshotNeverDeniesWhatItHasNotSeen(t *testing.T) {
	const secret = "e2e-catchup-secret-0123456789"
	nodes := startCluster(t, secret, secret, secret)
	leader := waitLeader(t, nodes, scaled(60*time.Second))
	var back *proc
	for _, n := range nodes {
		if n != leader {
			back = n
			break
		}
	}
	before, err := back.status(false)
	if err != nil {
		t.Fatal(err)
	}
	back.kill()
	var tokens []string
	for i := range 40 {
		_, tok, err := leader.Client().CreateToken(ctxTimeout(t, 15*time.Second), api.NewToken{Name: fmt.Sprintf("t%02d", i)}, false)
		if err != nil {
			t.Fatalf("token %d through %s: %v", i, leader.name, err)
		}
		tokens = append(tokens, tok)
	}
	waitSnapshotPast(t, leader, before.LastIndex+2, scaled(30*time.Second))

	back.restart()
	client := &http.Client{Timeout: scaled(10 * time.Second)}
	me := func(tok string) (int, string, string) {
		req, _ := http.NewRequest("GET", back.Base()+"/api/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET /api/v1/me on %s: %v", back.name, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var e struct{ Code string }
		_ = json.Unmarshal(b, &e)
		return res.StatusCode, e.Code, res.Header.Get("Retry-After")
	}
	works := map[string]bool{}
	unavailable, tries := 0, 0
	for deadline := time.Now().Add(scaled(60 * time.Second)); len(works) < len(tokens); {
		for _, tok := range tokens {
			if works[tok] {
				continue
			}
			tries++
			switch status, code, retry := me(tok); {
			case status == http.StatusOK:
				works[tok] = true
			case status == http.StatusServiceUnavailable && code == "STORE_UNAVAILABLE" && retry != "":
				unavailable++
			default:
				t.Fatalf("%s, back, answered a valid token %d %s (after %d tries, %d unavailable); want 200, or 503 STORE_UNAVAILABLE with Retry-After", back.name, status, code, tries, unavailable)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d tokens work %s after it came back", back.name, len(works), len(tokens), scaled(60*time.Second))
		}
	}
	if _, ok := back.waitLog(installedSnapshot, scaled(10*time.Second)); !ok {
		t.Errorf("%s came back without installing the leader's snapshot:\n%s", back.name, back.tail(40))
	}
	t.Logf("%s: %d requests, %d answered STORE_UNAVAILABLE while it caught up, then all %d tokens worked", back.name, tries, unavailable, len(tokens))
}
