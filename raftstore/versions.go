package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// Version-gated commands, as Consul and Nomad gate features: every command
// type declares the oldest binary version that can apply it (since, at
// register; "" for the types every version knows), every server announces
// its binary's version (cmdServer, which versions before it skip as
// ignorable), and a command whose since is later than the lowest version
// among the cluster's servers is refused before it is proposed, so that no
// node meets a log entry it cannot apply. A node that meets one anyway
// (announced versions were wrong, or a snapshot restored under an old
// binary) stops applying (fsm.applyOne panics) rather than diverge.
//
// The announced versions live in the FSM but not in its snapshots (the
// snapshot format stays what older binaries read); each server announces
// at start and every announceInterval, and a server whose version is not
// known counts as older than every gated command.

// announceInterval is how often a server announces its version again.
const announceInterval = 10 * time.Minute

type serverCmd struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// since is, per command type, the oldest version that applies it.
var since = map[cmdType]string{}

// servers is the FSM's record of the servers' announced versions.
type servers struct {
	mu sync.Mutex
	v  map[string]string
}

func (s *servers) set(id, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v == nil {
		s.v = map[string]string{}
	}
	s.v[id] = version
}

func (s *servers) get(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.v[id]
	return v, ok
}

func (f *fsm) applyServer(_ uint64, payload []byte) any {
	var c serverCmd
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil // ignorable: a malformed announcement changes nothing
	}
	f.servers.set(c.ID, c.Version)
	return nil
}

// GateDecision says whether a command that needs version need may be
// proposed to a cluster whose servers run versions (unknown: a server
// whose version is not known), with compare ordering versions. It is nil
// when it may.
func GateDecision(need string, versions []string, unknown []string, compare func(a, b string) int) error {
	if need == "" {
		return nil
	}
	if len(unknown) > 0 {
		return fmt.Errorf("this change needs version %s or later on every server, and the version of %v is not known yet", need, unknown)
	}
	for _, v := range versions {
		if compare == nil || compare(v, need) < 0 {
			return fmt.Errorf("this change needs version %s or later on every server, and a server runs %s", need, v)
		}
	}
	return nil
}

// gate refuses cmd when a server of the cluster is older than its type.
func (s *Store) gate(cmd []byte) *errcode.Error {
	if len(cmd) == 0 {
		return nil // validateCommand refuses it
	}
	need := since[cmdType(cmd[0])]
	if need == "" {
		return nil
	}
	var versions, unknown []string
	if s.cfg.VersionFloor != "" {
		versions = append(versions, s.cfg.VersionFloor)
	}
	for _, srv := range s.Status().Servers {
		if v, ok := s.fsm.servers.get(srv.ID); ok {
			versions = append(versions, v)
		} else {
			unknown = append(unknown, srv.ID)
		}
	}
	if err := GateDecision(need, versions, unknown, s.cfg.CompareVersions); err != nil {
		return errcode.New(errcode.StateInvalid, "%v", err).
			WithRemedy("finish upgrading every server of the cluster (GET /api/v1/upgrade), then try again")
	}
	return nil
}

// announce writes this server's version now and every announceInterval,
// until the store closes. Without Config.Version it does nothing.
func (s *Store) announce() {
	if s.cfg.Version == "" {
		return
	}
	ctx, cancel := s.closingContext(context.Background())
	defer cancel()
	cmd, err := encodeCommand(cmdServer, serverCmd{ID: s.cfg.NodeID, Version: s.cfg.Version})
	if err != nil {
		return
	}
	for {
		actx, acancel := context.WithTimeout(ctx, time.Minute)
		_, err := s.propose(actx, cmd)
		acancel()
		wait := announceInterval
		if err != nil && ctx.Err() == nil {
			s.log.Debug("could not announce this server's version yet", "version", s.cfg.Version, "err", err)
			wait = 10 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
