package ids

import (
	"bytes"
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// idRE is the documented format: a prefix, an underscore and a canonical
// (upper-case Crockford base32) 26-character ULID.
var idRE = regexp.MustCompile(`^([a-z]+)_([0-9A-HJKMNP-TV-Z]{26})$`)

var allPrefixes = []Prefix{
	App, Spec, Deployment, User, Token, Volume, Grant, Session, Request, Event,
	Backup, Subscription, Group, Role, Delivery, Section, Audit, Adapter, Probe, Upgrade,
}

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// entropy returns a deterministic source of entropy. (An all-zero reader
// would not do: ulid's monotonic entropy re-reads its source whenever the
// current entropy is zero, so it would mint the same ID again and again.)
func entropy() io.Reader { return rand.NewChaCha8([32]byte{1, 2, 3}) }

func TestFormat(t *testing.T) {
	for _, p := range allPrefixes {
		t.Run(string(p), func(t *testing.T) {
			id := New(p)
			m := idRE.FindStringSubmatch(id)
			if m == nil {
				t.Fatalf("New(%q) = %q; want %s", p, id, idRE)
			}
			if m[1] != string(p) {
				t.Errorf("New(%q) prefix = %q; want %q", p, m[1], p)
			}
			if !Valid(p, id) {
				t.Errorf("Valid(%q, %q) = false; want true", p, id)
			}
		})
	}
}

func TestPrefixesUnique(t *testing.T) {
	seen := map[Prefix]bool{}
	for _, p := range allPrefixes {
		if seen[p] {
			t.Errorf("prefix %q used by two kinds", p)
		}
		seen[p] = true
	}
}

func TestValid(t *testing.T) {
	good := NewGenerator(fixedClock(time.UnixMilli(1_700_000_000_000)), entropy()).New(App)
	body := strings.TrimPrefix(good, "app_")
	tests := []struct {
		name string
		p    Prefix
		s    string
		want bool
	}{
		{"minted", App, good, true},
		{"all zero ulid", App, "app_00000000000000000000000000", true},
		{"max ulid", App, "app_7ZZZZZZZZZZZZZZZZZZZZZZZZZ", true},
		{"wrong prefix", User, good, false},
		{"prefix of prefix", "ap", good, false},
		{"longer prefix", "apps", good, false},
		{"lowercase body", App, "app_" + strings.ToLower(body), false},
		{"canonical example", App, "app_01ARZ3NDEKTSV4RRFFQ69G5FAV", true},
		{"one lowercase char", App, "app_01ARZ3NDEKTSV4RRFFQ69G5FAv", false},
		{"body too short", App, good[:len(good)-1], false},
		{"body too long", App, good + "0", false},
		{"no body", App, "app_", false},
		{"empty", App, "", false},
		{"invalid char I", App, "app_" + body[:25] + "I", false},
		{"invalid char U", App, "app_" + body[:25] + "U", false},
		{"invalid char dash", App, "app_" + body[:25] + "-", false},
		{"overflowing timestamp", App, "app_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", false},
		{"missing underscore", App, "app" + body, false},
		{"other separator", App, "app-" + body, false},
		{"bare body", App, body, false},
		{"double underscore", App, "app__" + body[1:], false},
		{"leading space", App, " " + good, false},
		{"trailing newline", App, good + "\n", false},
		{"uppercase prefix", App, "APP_" + body, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Valid(tt.p, tt.s); got != tt.want {
				t.Errorf("Valid(%q, %q) = %t; want %t", tt.p, tt.s, got, tt.want)
			}
		})
	}
}

func TestMonotonicWithinMillisecond(t *testing.T) {
	ts := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	g := NewGenerator(fixedClock(ts), entropy())
	prev := g.New(Deployment)
	for i := range 10_000 {
		id := g.New(Deployment)
		if id <= prev {
			t.Fatalf("ID %d = %q is not greater than the previous %q", i+1, id, prev)
		}
		got, ok := Time(id)
		if !ok || !got.Equal(ts) {
			t.Fatalf("Time(%q) = %v, %t; want %v, true", id, got, ok, ts)
		}
		prev = id
	}
}

func TestIncreasingAcrossMilliseconds(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	g := NewGenerator(func() time.Time { return now }, entropy())
	a := g.New(Event)
	now = now.Add(time.Millisecond)
	b := g.New(Event)
	if b <= a {
		t.Errorf("ID of a later millisecond %q is not greater than %q", b, a)
	}
}

func TestDeterministicGenerator(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_123)
	a := NewGenerator(fixedClock(ts), bytes.NewReader(bytes.Repeat([]byte{7}, 64))).New(App)
	b := NewGenerator(fixedClock(ts), bytes.NewReader(bytes.Repeat([]byte{7}, 64))).New(App)
	if a != b {
		t.Errorf("same clock and entropy gave %q and %q; want equal", a, b)
	}
}

func TestTimeRoundTrip(t *testing.T) {
	tests := []time.Time{
		time.UnixMilli(0).UTC(),
		time.Date(2025, 3, 1, 12, 34, 56, 789_000_000, time.UTC),
		time.Date(2025, 3, 1, 12, 34, 56, 789_999_999, time.FixedZone("x", 3600)), // truncated to ms
		time.UnixMilli(int64(ulid.MaxTime())).UTC(),
	}
	for _, ts := range tests {
		t.Run(ts.String(), func(t *testing.T) {
			id := NewGenerator(fixedClock(ts), entropy()).New(Backup)
			got, ok := Time(id)
			if !ok {
				t.Fatalf("Time(%q) failed", id)
			}
			want := ts.Truncate(time.Millisecond).UTC()
			if !got.Equal(want) {
				t.Errorf("Time(%q) = %v; want %v", id, got, want)
			}
			if got.Location() != time.UTC {
				t.Errorf("Time(%q) location = %v; want UTC", id, got.Location())
			}
		})
	}
}

func TestTimeRejects(t *testing.T) {
	for _, s := range []string{"", "app", "app_", "app_short", "app_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "app_0000000000000000000000000I"} {
		if got, ok := Time(s); ok {
			t.Errorf("Time(%q) = %v, true; want false", s, got)
		}
	}
}

func TestConcurrentMinting(t *testing.T) {
	const goroutines, each = 32, 500
	var (
		mu   sync.Mutex
		seen = make(map[string]bool, goroutines*each)
		wg   sync.WaitGroup
	)
	fixed := NewGenerator(fixedClock(time.UnixMilli(1_700_000_000_000)), entropy())
	for g := range goroutines {
		wg.Go(func() {
			local := make([]string, 0, 2*each)
			for range each {
				// Half from the package's generator, half from one
				// generator with a fixed clock: all in one millisecond.
				local = append(local, New(Request), fixed.New(Request))
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("goroutine %d: duplicate ID %q", g, id)
				}
				seen[id] = true
				if !Valid(Request, id) {
					t.Errorf("goroutine %d: invalid ID %q", g, id)
				}
			}
		})
	}
	wg.Wait()
	if got, want := len(seen), goroutines*each*2; got != want {
		t.Errorf("%d unique IDs; want %d", got, want)
	}
}

func FuzzValid(f *testing.F) {
	f.Add("app", New(App))
	f.Add("app", "app_00000000000000000000000000")
	f.Add("app", "app_7ZZZZZZZZZZZZZZZZZZZZZZZZZ")
	f.Add("app", "app_8ZZZZZZZZZZZZZZZZZZZZZZZZZ")
	f.Add("", "_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	f.Add("a_b", "a_b_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	f.Add("usr", "usr_01arz3ndektsv4rrffq69g5fav")
	f.Add("tok", "tok_")
	f.Fuzz(func(t *testing.T, p, s string) {
		if !Valid(Prefix(p), s) {
			return
		}
		if !strings.HasPrefix(s, p+"_") || len(s) != len(p)+1+ulid.EncodedSize {
			t.Fatalf("Valid(%q, %q) = true for a string of the wrong shape", p, s)
		}
		got, ok := Time(s)
		if !ok {
			t.Fatalf("Valid(%q, %q) = true but Time failed", p, s)
		}
		u := ulid.MustParseStrict(s[len(p)+1:])
		if want := ulid.Time(u.Time()).UTC(); !got.Equal(want) {
			t.Fatalf("Time(%q) = %v; want %v", s, got, want)
		}
	})
}

func TestLowestAndHighestBoundAMillisecond(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 500_700_000, time.UTC)
	lo, hi := Lowest(Audit, at), Highest(Audit, at)
	if !Valid(Audit, lo) || !Valid(Audit, hi) || lo >= hi {
		t.Fatalf("Lowest %s, Highest %s", lo, hi)
	}
	for range 100 {
		id := NewAt(Audit, at.Add(time.Duration(rand.Int64N(int64(time.Millisecond)))-700_000))
		if id < lo || id > hi {
			t.Fatalf("%s minted in the millisecond is outside [%s, %s]", id, lo, hi)
		}
	}
	if earlier := NewAt(Audit, at.Add(-time.Millisecond)); earlier >= lo {
		t.Errorf("%s of the millisecond before is not below %s", earlier, lo)
	}
	if later := NewAt(Audit, at.Add(time.Millisecond)); later <= hi {
		t.Errorf("%s of the millisecond after is not above %s", later, hi)
	}
	if got := Lowest(Audit, time.Unix(-5, 0)); got != "aud_00000000000000000000000000" {
		t.Errorf("before the epoch: %s", got)
	}
	if got := Highest(Audit, time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)); got != "aud_7ZZZZZZZZZZZZZZZZZZZZZZZZZ" {
		t.Errorf("after the last ULID time: %s", got)
	}
}
