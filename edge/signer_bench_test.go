package edge_test

import (
	"context"
	"testing"

	"github.com/svchost/svc/edge"
)

// BenchmarkAssertionCached is the proxy's hot path: the same caller to the
// same app within the first half of the assertion's life.
func BenchmarkAssertionCached(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	c := alice("app_A")
	first, err := f.signer.Assertion(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if tok, err := f.signer.Assertion(ctx, c); err != nil || tok != first {
				b.Fatal("not the cached assertion", err)
			}
		}
	})
}

// BenchmarkAssertionSign is a miss: every call finds its cached assertion
// past the half of its life and signs anew.
func BenchmarkAssertionSign(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	c := alice("app_A")
	if _, err := f.signer.Assertion(ctx, c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f.clock.advance(edge.AssertionTTL / 2)
		if _, err := f.signer.Assertion(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}
