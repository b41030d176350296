package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// increment builds a read-modify-write of one counter row: the shape of
// every hot-object change (a rename, a grant on one app).
func increment(id string, runs *atomic.Int64) Build {
	return func(r *Reader) ([]Op, error) {
		runs.Add(1)
		t, m, _ := things.Get(r, id)
		t.ID, t.N = id, t.N+1
		return []Op{things.PutIf(&t, m.ModifyIndex)}, nil
	}
}

// concurrentIncrements runs n increments of one row from n goroutines,
// spread over the given nodes, and checks that every one was applied.
func concurrentIncrements(t *testing.T, nodes []*Store, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var runs atomic.Int64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := nodes[i%len(nodes)].Update(ctx, increment("hot", &runs))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("an increment was refused: %v", err)
		}
	}
	r, err := nodes[0].ConsistentRead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := things.Get(r, "hot"); got.N != n {
		t.Errorf("counter = %d after %d increments; some changes were lost", got.N, n)
	}
	t.Logf("%d increments took %d builds", n, runs.Load())
}

func TestUpdateSerializesConcurrentChangesToOneRow(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	concurrentIncrements(t, []*Store{s}, 32)
}

func TestUpdateSerializesConcurrentChangesAcrossNodes(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.leader(ctx)
	concurrentIncrements(t, c.nodes, 24)
	c.converged(ctx)
}

func TestUpdateReturnsRefusalsThatAreNotConflictsAtOnce(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Apply(ctx, things.Insert(&thing{ID: "a", Name: "taken"})); err != nil {
		t.Fatal(err)
	}
	_, meta, _ := things.Get(s.Read(), "a")

	cases := []struct {
		name   string
		build  func(r *Reader) []Op
		reason Reason
		code   errcode.Code
	}{
		{"a precondition of the caller's own", func(r *Reader) []Op {
			// An If-Match the client sent, older than the row.
			return []Op{things.PutIf(&thing{ID: "a", N: 1}, meta.ModifyIndex-1)}
		}, ReasonStale, errcode.StateInvalid},
		{"a unique key taken before the view", func(r *Reader) []Op {
			return []Op{things.Insert(&thing{ID: "b", Name: "taken"})}
		}, ReasonConflict, errcode.StateInvalid},
		{"a row that exists in the view", func(r *Reader) []Op {
			return []Op{things.Insert(&thing{ID: "a"})}
		}, ReasonExists, errcode.StateInvalid},
		{"a table's rule", func(r *Reader) []Op {
			return []Op{things.Put(&thing{ID: "c", N: -1})}
		}, ReasonRejected, errcode.ValidInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			builds := 0
			_, err := s.Update(ctx, func(r *Reader) ([]Op, error) {
				builds++
				return tc.build(r), nil
			})
			if !IsReason(err, tc.reason) {
				t.Fatalf("err = %v, want a %s refusal", err, tc.reason)
			}
			if builds != 1 {
				t.Errorf("build ran %d times; a refusal that is not a conflict is final", builds)
			}
			if e, ok := errcode.As(err); !ok || e.Code != tc.code {
				t.Errorf("err = %v, want %s", err, tc.code)
			}
		})
	}
}

func TestUpdateRebuildsOnAChangeItDidNotSee(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Apply(ctx, things.Insert(&thing{ID: "a", N: 1})); err != nil {
		t.Fatal(err)
	}
	// The first build's view is taken, then another writer changes the row
	// and a new row takes the name the build is about to claim.
	builds := 0
	_, err := s.Update(ctx, func(r *Reader) ([]Op, error) {
		builds++
		if builds == 1 {
			if _, err := s.Apply(ctx, things.Put(&thing{ID: "a", N: 10}), things.Insert(&thing{ID: "z", Name: "wanted"})); err != nil {
				return nil, err
			}
		}
		a, m, _ := things.Get(r, "a")
		if _, _, taken := things.First(r, "name", "wanted"); taken {
			return nil, errcode.New(errcode.StateInvalid, "the name is taken")
		}
		a.N++
		a.Name = "wanted"
		return []Op{things.PutIf(&a, m.ModifyIndex)}, nil
	})
	if builds != 2 {
		t.Errorf("build ran %d times, want 2 (the change it did not see makes it build again)", builds)
	}
	if e, ok := errcode.As(err); !ok || e.Message != "the name is taken" {
		t.Errorf("err = %v, want the build's own decision on the newer view", err)
	}
}

func TestUpdateWithoutOperationsWritesNothing(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	before := s.Status().AppliedIndex
	index, err := s.Update(context.Background(), func(*Reader) ([]Op, error) { return nil, nil })
	if err != nil || index != 0 {
		t.Fatalf("Update = %d, %v; want 0, nil", index, err)
	}
	want := errors.New("no")
	if _, err := s.Update(context.Background(), func(*Reader) ([]Op, error) { return nil, want }); !errors.Is(err, want) {
		t.Fatalf("err = %v, want the build's error", err)
	}
	if after := s.Status().AppliedIndex; after != before {
		t.Errorf("applied index moved from %d to %d", before, after)
	}
}

func TestUpdateGivesUpOnEndlessCollisionsAsRetryable(t *testing.T) {
	s := openSingle(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Apply(ctx, things.Insert(&thing{ID: "a"})); err != nil {
		t.Fatal(err)
	}
	// Every build is overtaken by another write to the row it read.
	builds := 0
	_, err := s.Update(ctx, func(r *Reader) ([]Op, error) {
		builds++
		a, m, _ := things.Get(r, "a")
		if _, err := s.Apply(ctx, things.Put(&thing{ID: "a", N: builds})); err != nil {
			return nil, err
		}
		return []Op{things.PutIf(&a, m.ModifyIndex)}, nil
	})
	if builds != maxUpdateTries {
		t.Errorf("build ran %d times, want %d", builds, maxUpdateTries)
	}
	e, ok := errcode.As(err)
	if !ok || e.Code != errcode.StoreUnavailable || e.RetryAfter == 0 {
		t.Errorf("err = %v, want a retryable STORE_UNAVAILABLE", err)
	}
}

func BenchmarkUpdateHotRow(b *testing.B) {
	s := openSingle(b, b.TempDir())
	defer s.Close()
	ctx := context.Background()
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			var runs atomic.Int64
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := s.Update(ctx, increment("bench", &runs)); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(runs.Load())/float64(b.N), "builds/op")
		})
	}
}
