package identity

import (
	"context"
	"testing"

	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

func TestSetupRequiredUntilAnAccountExists(t *testing.T) {
	st := raftstoretest.Open(t, Users)
	s := New(st)
	if !s.SetupRequired() {
		t.Fatal("a fresh installation does not wait for setup")
	}
	if _, err := st.Apply(context.Background(), Users.Insert(&User{ID: "usr_1", Username: "Admin", Status: "active"})); err != nil {
		t.Fatal(err)
	}
	if s.SetupRequired() {
		t.Error("setup is still required once an account exists")
	}
	_, err := st.Apply(context.Background(), Users.Insert(&User{ID: "usr_2", Username: "admin"}))
	if !raftstore.IsReason(err, raftstore.ReasonConflict) {
		t.Errorf("a second account named admin (other case) = %v, want a conflict", err)
	}
}
