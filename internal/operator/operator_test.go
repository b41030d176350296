package operator

import (
	"context"
	"github.com/svchost/svc/internal/audit"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// clock is a controllable clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openStore(t *testing.T) *raftstore.Store { return raftstoretest.Open(t, Probes, audit.Entries) }

func newService(t *testing.T) (*Service, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	return New(openStore(t), "n1", c.Now), c
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func writeProbe(t *testing.T, svc *Service, payload int) ProbeResult {
	t.Helper()
	res, err := svc.WriteProbe(testContext(t), payload)
	if err != nil {
		t.Fatalf("WriteProbe(%d): %v", payload, err)
	}
	return res
}

func TestWriteProbe(t *testing.T) {
	svc, clk := newService(t)
	res := writeProbe(t, svc, 128)
	if res.Index == 0 {
		t.Errorf("Index = 0; want > 0")
	}
	if !ids.Valid(ids.Probe, res.ID) {
		t.Errorf("ID = %q; want a probe ID", res.ID)
	}
	if res.Node != "n1" || res.Leader != "n1" {
		t.Errorf("Node, Leader = %q, %q; want n1, n1", res.Node, res.Leader)
	}
	if res.DurationMS < 0 {
		t.Errorf("DurationMS = %v; want >= 0", res.DurationMS)
	}

	p, meta, err := svc.Probe(res.ID)
	if err != nil {
		t.Fatalf("Probe(%s): %v", res.ID, err)
	}
	if p.ID != res.ID || p.Node != "n1" || !p.WrittenAt.Equal(clk.Now()) {
		t.Errorf("Probe = %+v; want ID %s, node n1, written at %v", p, res.ID, clk.Now())
	}
	if p.Payload != nil {
		t.Errorf("Probe returned %d bytes of payload; want none", len(p.Payload))
	}
	if meta.CreateIndex != res.Index || meta.ModifyIndex != res.Index {
		t.Errorf("Meta = %+v; want both indexes %d", meta, res.Index)
	}

	// The payload was written even though Probe does not return it.
	stored, _, _ := Probes.Get(svc.store.Read(), res.ID)
	if len(stored.Payload) != 128 {
		t.Errorf("stored payload = %d bytes; want 128", len(stored.Payload))
	}

	if next := writeProbe(t, svc, 0); next.Index <= res.Index || next.ID == res.ID {
		t.Errorf("second probe = %+v; want a new ID and an index above %d", next, res.Index)
	}
}

func TestProbeNotFound(t *testing.T) {
	svc, _ := newService(t)
	_, _, err := svc.Probe(ids.New(ids.Probe))
	if !errcode.Has(err, errcode.NotFound) {
		t.Errorf("Probe of an unknown ID = %v; want NOT_FOUND", err)
	}
}

func TestWriteProbePayloadLimits(t *testing.T) {
	svc, _ := newService(t)
	tests := []struct {
		name    string
		payload int
		ok      bool
	}{
		{"negative", -1, false},
		{"zero", 0, true},
		{"max", MaxProbePayload, true},
		{"over max", MaxProbePayload + 1, false},
		{"far over max", 1 << 30, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := Probes.Count(svc.store.Read())
			res, err := svc.WriteProbe(testContext(t), tt.payload)
			after := Probes.Count(svc.store.Read())
			if tt.ok {
				if err != nil || res.Index == 0 {
					t.Fatalf("WriteProbe(%d) = %+v, %v; want a written probe", tt.payload, res, err)
				}
				if after != before+1 {
					t.Errorf("probe count %d -> %d; want one more", before, after)
				}
				return
			}
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.ValidInvalid {
				t.Fatalf("WriteProbe(%d) = %v; want VALID_INVALID", tt.payload, err)
			}
			if got := e.Details["field"]; got != "payload_bytes" {
				t.Errorf("field = %v; want payload_bytes", got)
			}
			if after != before {
				t.Errorf("probe count %d -> %d after a refused probe; want unchanged", before, after)
			}
		})
	}
}

func TestExpire(t *testing.T) {
	svc, clk := newService(t)
	ctx := testContext(t)

	old := writeProbe(t, svc, 0)
	clk.Advance(30 * time.Minute)
	young := writeProbe(t, svc, 0)

	clk.Advance(30 * time.Minute) // old is exactly ProbeTTL old: kept
	if n, err := svc.Expire(ctx); err != nil || n != 0 {
		t.Fatalf("Expire at exactly ProbeTTL = %d, %v; want 0, nil", n, err)
	}

	clk.Advance(time.Nanosecond) // old is now older than ProbeTTL
	n, err := svc.Expire(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want 1, nil", n, err)
	}
	if _, _, err := svc.Probe(old.ID); !errcode.Has(err, errcode.NotFound) {
		t.Errorf("Probe(old) after Expire = %v; want NOT_FOUND", err)
	}
	if _, _, err := svc.Probe(young.ID); err != nil {
		t.Errorf("Probe(young) after Expire = %v; want it kept", err)
	}
	if n, err := svc.Expire(ctx); err != nil || n != 0 {
		t.Errorf("second Expire = %d, %v; want 0, nil", n, err)
	}

	clk.Advance(ProbeTTL)
	if n, err := svc.Expire(ctx); err != nil || n != 1 {
		t.Errorf("Expire of the last probe = %d, %v; want 1, nil", n, err)
	}
	if got := Probes.Count(svc.store.Read()); got != 0 {
		t.Errorf("%d probes left; want 0", got)
	}
}

func TestStatus(t *testing.T) {
	svc, _ := newService(t)

	st, err := svc.Status(false)
	if err != nil {
		t.Fatalf("Status(false): %v", err)
	}
	if st.Digest != "" {
		t.Errorf("Status(false).Digest = %q; want empty", st.Digest)
	}
	if st.NodeID != "n1" || st.LeaderID != "n1" || st.State != "Leader" {
		t.Errorf("Status = node %q, leader %q, state %q; want n1, n1, Leader", st.NodeID, st.LeaderID, st.State)
	}

	before, err := svc.Status(true)
	if err != nil {
		t.Fatalf("Status(true): %v", err)
	}
	if before.Digest == "" {
		t.Fatal("Status(true).Digest is empty")
	}
	again, err := svc.Status(true)
	if err != nil {
		t.Fatalf("Status(true): %v", err)
	}
	if again.Digest != before.Digest {
		t.Errorf("digest changed without a write: %q then %q", before.Digest, again.Digest)
	}

	res := writeProbe(t, svc, 0)
	after, err := svc.Status(true)
	if err != nil {
		t.Fatalf("Status(true) after a write: %v", err)
	}
	if after.Digest == "" || after.Digest == before.Digest {
		t.Errorf("digest after a write = %q; want non-empty and different from %q", after.Digest, before.Digest)
	}
	if after.AppliedIndex < res.Index {
		t.Errorf("AppliedIndex = %d; want >= the probe's index %d", after.AppliedIndex, res.Index)
	}
}
