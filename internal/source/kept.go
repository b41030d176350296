package source

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
)

// CheckoutOf returns the app's checkout that src names (src.CheckoutID, as
// a deployment recorded it), which need not be the current one: a
// release's source, kept while its builds are (Deps.Keep), is what a
// rollback builds from when its artifact is gone. A checkout this server
// lacks is made as Ensure makes the current one, from the other servers or
// by cloning a repository again at src.Commit, but never becomes current.
// NOT_FOUND (with a remedy) when it is gone everywhere; ADAPTER_UNAVAILABLE
// when other servers could not be asked.
func (s *Service) CheckoutOf(ctx context.Context, appID string, src apps.Source) (Checkout, error) {
	dir, err := s.sourceDir(appID)
	if err != nil {
		return Checkout{}, err
	}
	if !ids.Valid(checkoutPrefix, src.CheckoutID) {
		return Checkout{}, errcode.Invalid("checkout_id", "%q is not a checkout ID", shorten(src.CheckoutID))
	}
	if _, err := s.d.Apps.Get(appID); err != nil {
		return Checkout{}, err
	}
	for range 2 { // once obtained here, or by a concurrent call for it
		if c, ok := s.present(dir, src.CheckoutID); ok {
			return c, nil
		}
		if err := s.obtainOnce(ctx, appID, dir, src, false); err != nil {
			return Checkout{}, err
		}
	}
	if c, ok := s.present(dir, src.CheckoutID); ok {
		return c, nil
	}
	return Checkout{}, errcode.New(errcode.NotFound, "app %s's source (checkout %s) was removed from this server while it was fetched", appID, src.CheckoutID).
		WithRemedy("retry")
}

// present reads a complete checkout of dir and its metadata.
func (s *Service) present(dir, id string) (Checkout, bool) {
	s.trees.RLock()
	defer s.trees.RUnlock()
	dest := filepath.Join(dir, id)
	if !complete(dest) {
		return Checkout{}, false
	}
	b, err := os.ReadFile(dest + ".json")
	if err != nil {
		return Checkout{}, false
	}
	var c Checkout
	if err := json.Unmarshal(b, &c); err != nil {
		s.d.Logger.Warn("a checkout's metadata cannot be read", "checkout_id", id, "err", fmt.Sprint(err))
		return Checkout{}, false
	}
	c.Dir = dest // where it is now, whatever the metadata says
	return c, true
}
