package throttle

import (
	"container/list"
	"sync"
	"time"
)

// Recent remembers keys for a while: the account and client address pairs
// that signed in, which the per-account limit then exempts. It keeps at
// most maxKeys keys, each for ttl after it was last added, and forgets the
// least recently added first when full. Only successes add keys, so an
// attacker cannot flush it without succeeding. It is safe for concurrent
// use.
type Recent struct {
	ttl     time.Duration
	now     func() time.Time
	maxKeys int

	mu    sync.Mutex
	keys  map[string]*list.Element // of *recentEntry
	order *list.List               // of *recentEntry, least recently added first
}

type recentEntry struct {
	key   string
	added time.Time
}

// NewRecent returns a Recent keeping at most maxKeys keys for ttl each. now
// is the clock (time.Now if nil). It panics if ttl or maxKeys is not
// positive.
func NewRecent(ttl time.Duration, now func() time.Time, maxKeys int) *Recent {
	if ttl <= 0 || maxKeys < 1 {
		panic("throttle: ttl and maxKeys must be positive")
	}
	if now == nil {
		now = time.Now
	}
	return &Recent{ttl: ttl, now: now, maxKeys: maxKeys, keys: make(map[string]*list.Element), order: list.New()}
}

// Add remembers key from now for ttl.
func (r *Recent) Add(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if el := r.keys[key]; el != nil {
		el.Value.(*recentEntry).added = now
		r.order.MoveToBack(el)
		return
	}
	for el := r.order.Front(); el != nil && (len(r.keys) >= r.maxKeys || !now.Before(el.Value.(*recentEntry).added.Add(r.ttl))); el = r.order.Front() {
		delete(r.keys, el.Value.(*recentEntry).key)
		r.order.Remove(el)
	}
	r.keys[key] = r.order.PushBack(&recentEntry{key: key, added: now})
}

// Has reports whether key was added less than ttl ago (and not forgotten
// since to make room).
func (r *Recent) Has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	el := r.keys[key]
	if el == nil {
		return false
	}
	return r.now().Before(el.Value.(*recentEntry).added.Add(r.ttl))
}
