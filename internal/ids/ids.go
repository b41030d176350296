// Package ids owns identifiers: a prefix naming the kind of object for human
// readers, an underscore, and a ULID body that sorts by creation time. The
// prefix is for reading, never for parsing by clients.
//
// IDs are minted by callers before a write reaches the replicated store (an FSM
// must not draw random numbers); this package must not touch storage.
package ids

import (
	"crypto/rand"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Prefix names a kind of object.
type Prefix string

// Prefixes of the specification and of the API contract.
const (
	App          Prefix = "app"
	Spec         Prefix = "spec"
	Deployment   Prefix = "dep"
	User         Prefix = "usr"
	Token        Prefix = "tok"
	Volume       Prefix = "vol"
	Grant        Prefix = "gr"
	Session      Prefix = "ses"
	Request      Prefix = "req"
	Event        Prefix = "evt"
	Backup       Prefix = "bkp"
	Subscription Prefix = "sub"
	Group        Prefix = "grp"
	Role         Prefix = "role"
	Delivery     Prefix = "dlv"
	Section      Prefix = "sec"
	Audit        Prefix = "aud"
	Adapter      Prefix = "adp"
	Probe        Prefix = "prb"
	DataKey      Prefix = "key"
	EdgeKey      Prefix = "ek"
	AppSession   Prefix = "aps"
	Upgrade      Prefix = "upg"
)

// Generator mints IDs from a clock and a source of entropy. IDs minted by one
// generator within the same millisecond are strictly increasing.
type Generator struct {
	mu      sync.Mutex
	now     func() time.Time
	entropy *ulid.MonotonicEntropy
}

// NewGenerator returns a generator reading the given clock and entropy.
// Tests pass a fixed clock and a deterministic reader; it must not yield
// only zero bytes (ulid's monotonic entropy then draws the same value again
// and again, and IDs repeat), so use a seeded generator such as ChaCha8.
func NewGenerator(now func() time.Time, entropy io.Reader) *Generator {
	return &Generator{now: now, entropy: ulid.Monotonic(entropy, 0)}
}

// New mints an ID with the given prefix.
func (g *Generator) New(p Prefix) string { return g.NewAt(p, g.now()) }

// NewAt mints an ID whose time is t (for a record that carries t, so that
// its ID and its time agree).
func (g *Generator) NewAt(p Prefix, t time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, err := ulid.New(ulid.Timestamp(t), g.entropy)
	if err != nil {
		// Monotonic entropy overflows only after 2^80 IDs in one
		// millisecond, and crypto/rand does not fail on supported systems.
		panic("ids: mint: " + err.Error())
	}
	return string(p) + "_" + id.String()
}

var std = NewGenerator(time.Now, rand.Reader)

// New mints an ID with the given prefix from the wall clock and crypto/rand.
func New(p Prefix) string { return std.New(p) }

// NewAt mints an ID with the given prefix and time.
func NewAt(p Prefix, t time.Time) string { return std.NewAt(p, t) }

// Lowest returns the lowest ID with prefix p that t's millisecond can have,
// and Highest the highest: every ID minted at t sorts between them, every
// one minted in an earlier millisecond below Lowest and in a later one above
// Highest. Times before the epoch or after the year 10889 are clamped.
func Lowest(p Prefix, t time.Time) string { return bound(p, t, 0) }

// Highest: see Lowest.
func Highest(p Prefix, t time.Time) string { return bound(p, t, 0xff) }

func bound(p Prefix, t time.Time, fill byte) string {
	ms := min(max(t.UnixMilli(), 0), int64(ulid.MaxTime()))
	var u ulid.ULID
	_ = u.SetTime(uint64(ms)) // in range by the clamp
	for i := 6; i < len(u); i++ {
		u[i] = fill
	}
	return string(p) + "_" + u.String()
}

// Valid reports whether s is a well-formed ID with prefix p: the prefix, an
// underscore, and a canonical 26-character ULID.
func Valid(p Prefix, s string) bool {
	body, ok := strings.CutPrefix(s, string(p)+"_")
	if !ok || len(body) != ulid.EncodedSize {
		return false
	}
	_, err := ulid.ParseStrict(body)
	return err == nil && strings.ToUpper(body) == body
}

// Time returns the creation time encoded in a well-formed ID.
func Time(s string) (time.Time, bool) {
	i := strings.LastIndexByte(s, '_')
	if i < 0 {
		return time.Time{}, false
	}
	u, err := ulid.ParseStrict(s[i+1:])
	if err != nil {
		return time.Time{}, false
	}
	return ulid.Time(u.Time()).UTC(), true
}
