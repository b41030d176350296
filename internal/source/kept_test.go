package source_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/source"
)

// A release's checkout outlives newer uploads while it is kept (Deps.Keep):
// CheckoutOf gives it on the server that made it and, fetched from there,
// on another, without making it current anywhere; once it is no longer
// kept, Sweep removes it on both; then it is NOT_FOUND with a remedy.
func TestKeptCheckoutsOutliveNewerUploads(t *testing.T) {
	c := newCluster(t, source.Limits{})
	id := c.app(t, "Released")
	v1 := c.a.upload(t, c, id, sampleApp(t, "v1"))
	c.keepOnly(id, v1.ID)
	v2 := c.a.upload(t, c, id, sampleApp(t, "v2"))
	want := []string{v1.ID, v1.ID + ".json", v2.ID, v2.ID + ".json", "current"}
	if got := listing(t, c.a.sourceDir(id)); !slices.Equal(got, want) {
		t.Fatalf("a's source dir holds %v after a newer upload; want %v", got, want)
	}

	got, err := c.a.svc.CheckoutOf(c.ctx, id, v1.Source)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != v1.ID || got.Commit != v1.Commit || got.Dir != v1.Dir {
		t.Fatalf("CheckoutOf v1 on a = %+v; want %+v", got, v1)
	}
	if cur, err := c.a.svc.Current(id); err != nil || cur.ID != v2.ID {
		t.Fatalf("a's current checkout = %+v, %v; want v2", cur, err)
	}

	// b never had v1: it fetches it from a, and keeps v2 current.
	if _, err := c.b.svc.Ensure(c.ctx, id); err != nil {
		t.Fatal(err)
	}
	fromB, err := c.b.svc.CheckoutOf(c.ctx, id, v1.Source)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tree(t, v1.Dir), tree(t, fromB.Dir)); diff != "" {
		t.Fatalf("b's copy of v1 differs from a's (-a +b):\n%s", diff)
	}
	if cur, err := c.b.svc.Current(id); err != nil || cur.ID != v2.ID {
		t.Fatalf("b's current checkout = %+v, %v; want v2 still", cur, err)
	}
	if asked := c.b.peers.names(); !slices.Contains(asked, source.BlobName(id, v1.ID)) {
		t.Fatalf("b asked for %v; want v1's blob", asked)
	}
	// Asked again, nothing is fetched.
	before := len(c.b.peers.names())
	if again, err := c.b.svc.CheckoutOf(c.ctx, id, v1.Source); err != nil || again.Dir != fromB.Dir || len(c.b.peers.names()) != before {
		t.Fatalf("CheckoutOf again = %+v, %v; asked %v", again, err, c.b.peers.names())
	}

	// No longer kept: every server's sweep removes it, never the current one.
	c.keepOnly(id)
	for name, n := range map[string]*node{"a": c.a, "b": c.b} {
		if err := n.svc.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := listing(t, n.sourceDir(id)), []string{v2.ID, v2.ID + ".json", "current"}; !slices.Equal(got, want) {
			t.Errorf("%s's source dir after the sweep: %v; want %v", name, got, want)
		}
	}
	_, err = c.b.svc.CheckoutOf(c.ctx, id, v1.Source)
	if e := wantCode(t, "a checkout no server keeps", err, errcode.NotFound); !strings.Contains(e.Remedy, "upload the source again") {
		t.Fatalf("remedy %q", e.Remedy)
	}
	if got := listing(t, c.b.sourceDir(id)); slices.Contains(got, v1.ID) {
		t.Fatalf("b's source dir holds %v after a failed fetch", got)
	}
	_, err = c.a.svc.CheckoutOf(c.ctx, id, v1.Source)
	wantCode(t, "a checkout no server keeps, on the server that made it", err, errcode.NotFound)
	v1.Source.CheckoutID = "../" + v2.ID
	_, err = c.a.svc.CheckoutOf(c.ctx, id, v1.Source)
	wantCode(t, "a checkout ID that is none", err, errcode.ValidInvalid)
}
