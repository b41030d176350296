package edge

import (
	"sync"
	"sync/atomic"
	"time"
)

// activity keeps, per app, when the edge last forwarded a request to it:
// what idle detection reads. It lives in memory; internal/idle writes it
// to the store now and then (Proxy.Activity), coarsely, and the leader
// reads it from there and from its own memory. It costs one map load and usually no write per request: the stamp moves
// only once per activityGrain, so that busy apps do not fight over one
// cache line.
type activity struct {
	apps sync.Map // app ID -> *atomic.Int64 (Unix nanoseconds)
}

// activityGrain is the resolution of the activity stamps.
const activityGrain = time.Second

// touch records activity on the app at now.
func (a *activity) touch(appID string, now time.Time) {
	n := now.UnixNano()
	v, ok := a.apps.Load(appID)
	if !ok {
		v, _ = a.apps.LoadOrStore(appID, new(atomic.Int64))
	}
	stamp := v.(*atomic.Int64)
	if last := stamp.Load(); n-last >= int64(activityGrain) {
		stamp.CompareAndSwap(last, n)
	}
}

// last returns when the app was last active, or the zero time.
func (a *activity) last(appID string) time.Time {
	v, ok := a.apps.Load(appID)
	if !ok {
		return time.Time{}
	}
	n := v.(*atomic.Int64).Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// all returns every app's stamp.
func (a *activity) all() map[string]time.Time {
	out := map[string]time.Time{}
	a.apps.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 0 {
			out[k.(string)] = time.Unix(0, n).UTC()
		}
		return true
	})
	return out
}
