package server

import (
	"net/http"
	"testing"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/raftstore"
)

// TestHistoryEndpoint: GET /operator/raft/history checks the node's
// history chain; its head is the one the store status shows, it moves with
// every audited write, it survives a restart, and only a holder of
// install.audit.read may ask.
func TestHistoryEndpoint(t *testing.T) {
	h := newHarness(t)
	u := h.account(t, "reader", nil, true)
	wantError(t, "without install.audit.read", h.send("GET", api+"/operator/raft/history", "", u.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)

	report := func() raftstore.HistoryReport {
		t.Helper()
		a := h.send("GET", api+"/operator/raft/history", "")
		if a.status != http.StatusOK {
			t.Fatalf("GET /operator/raft/history: %d %s", a.status, a.body)
		}
		rep := decodeAs[raftstore.HistoryReport](t, a)
		if len(rep.Problems) != 0 || rep.Checked != rep.Head.Records || rep.Head.Records == 0 {
			t.Fatalf("history report %+v", rep)
		}
		return rep
	}
	first := report()
	h.send("PATCH", api+"/users/"+u.userID, `{"display_name":"Someone Else"}`)
	second := report()
	if second.Head.Records <= first.Head.Records || second.Head.Hash == first.Head.Hash {
		t.Fatalf("an audited write did not move the head: %+v then %+v", first.Head, second.Head)
	}
	st := decodeAs[operator.RaftStatus](t, h.send("GET", api+"/operator/raft", ""))
	if st.History != second.Head {
		t.Errorf("the store status shows head %+v, the check %+v", st.History, second.Head)
	}
	h.restart()
	if again := report(); again.Head != second.Head {
		t.Errorf("after a restart the head is %+v, want %+v", again.Head, second.Head)
	}
}
