package audit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// t0 is the time of the first generated entry.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// idGen returns a deterministic ID generator whose clock steps by step from
// start at every ID, so that IDs are strictly increasing.
func idGen(seed uint64, start time.Time, step time.Duration) *ids.Generator {
	now := start.Add(-step)
	clock := func() time.Time { now = now.Add(step); return now }
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	return ids.NewGenerator(clock, rand.NewChaCha8(key))
}

// universe is the vocabulary of generated entries.
type universe struct {
	users, tokens, apps, secrets []string
	actions                      []string
}

func newUniverse(users, tokens, apps int) universe {
	u := universe{
		actions: []string{
			"app.create", "app.delete", "app.deploy", "app.deploy.rollback", "app.exec", "app.restart",
			"secret.read", "secret.write", "token.create", "token.revoke",
			"user.create", "user.login", "user.login.failed",
			"install.settings.update", "grant.create", "grant.delete",
		},
	}
	for i := range users {
		u.users = append(u.users, fmt.Sprintf("usr_%04d", i))
	}
	for i := range tokens {
		u.tokens = append(u.tokens, fmt.Sprintf("tok_%03d", i))
	}
	for i := range apps {
		u.apps = append(u.apps, fmt.Sprintf("app_%03d", i))
		u.secrets = append(u.secrets, fmt.Sprintf("sec_%03d", i))
	}
	return u
}

func ptr(s string) *string { return &s }

// pick returns an element of xs, skewed towards the first ones so that some
// keys have many entries and most have few.
func pick(rng *rand.Rand, xs []string) string {
	i := int(float64(len(xs)) * rng.Float64() * rng.Float64())
	return xs[i]
}

// genEntries returns n entries with increasing IDs one second apart and a
// mix of principals, kinds, apps, targets and actions. Their Time is the
// ID's time, to the millisecond, as audit.New makes them.
func genEntries(u universe, n int, seed uint64) []Entry {
	rng := rand.New(rand.NewPCG(seed, 1))
	g := idGen(seed, t0, time.Second)
	out := make([]Entry, 0, n)
	for i := range n {
		id := g.New(ids.Audit)
		e := Entry{
			ID:        id,
			Time:      t0.Add(time.Duration(i)*time.Second + time.Duration(rng.IntN(1000))*time.Microsecond),
			Action:    pick(rng, u.actions),
			RequestID: fmt.Sprintf("req_%d", i),
			Details:   map[string]any{"n": fmt.Sprint(i)},
		}
		switch k := rng.IntN(10); {
		case k < 6:
			e.PrincipalKind, e.PrincipalID = PrincipalUser, pick(rng, u.users)
		case k < 8:
			e.PrincipalKind, e.PrincipalID = PrincipalToken, pick(rng, u.tokens)
		case k < 9:
			e.PrincipalKind, e.PrincipalID = PrincipalSystem, "system"
		default:
			e.PrincipalKind = PrincipalAnonymous
		}
		switch k := rng.IntN(20); {
		case k < 6:
		case k < 7:
			e.AppID = ptr("")
		default:
			e.AppID = ptr(pick(rng, u.apps))
		}
		switch k := rng.IntN(20); {
		case k < 4:
		case k < 5:
			e.TargetKind, e.TargetID = ptr("user"), ptr(e.PrincipalID) // self, or "" for anonymous
		case k < 10:
			e.TargetKind, e.TargetID = ptr("app"), ptr(pick(rng, u.apps))
		case k < 14:
			e.TargetKind, e.TargetID = ptr("user"), ptr(pick(rng, u.users))
		case k < 17:
			e.TargetKind, e.TargetID = ptr("token"), ptr(pick(rng, u.tokens))
		default:
			e.TargetKind, e.TargetID = ptr("secret"), ptr(pick(rng, u.secrets))
		}
		out = append(out, e)
	}
	return out
}

// load inserts entries, in a shuffled order, into a new store and returns a
// reader that sees them all.
func load(tb testing.TB, entries []Entry) *raftstore.Reader {
	tb.Helper()
	s := raftstoretest.Open(tb, Entries)
	shuffled := slices.Clone(entries)
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for chunk := range slices.Chunk(shuffled, 10_000) {
		ops := make([]raftstore.Op, len(chunk))
		for i := range chunk {
			ops[i] = Entries.Insert(&chunk[i])
		}
		if _, err := s.Apply(context.Background(), ops...); err != nil {
			tb.Fatalf("insert: %v", err)
		}
	}
	r := s.Read()
	if n := Entries.Count(r); n != len(entries) {
		tb.Fatalf("store holds %d entries, want %d", n, len(entries))
	}
	return r
}

// reference answers a query by brute force over all entries, written apart
// from Filter.match.
func reference(all []Entry, f Filter, before string, limit int) ([]Entry, bool) {
	if limit < 1 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	out := referenceAll(all, f, before)
	if len(out) > limit {
		return out[:limit], true
	}
	return out, false
}

// referenceAll returns every entry that matches, newest first.
func referenceAll(all []Entry, f Filter, before string) []Entry {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	eq := func(want, got string) bool { return want == "" || (got != "" && got == want) }
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b Entry) int { return strings.Compare(b.ID, a.ID) })
	var out []Entry
	for _, e := range sorted {
		if before != "" && e.ID >= before {
			continue
		}
		if !strings.HasPrefix(e.Action, f.Action) ||
			!eq(f.PrincipalID, e.PrincipalID) || !eq(f.PrincipalKind, e.PrincipalKind) ||
			!eq(f.AppID, str(e.AppID)) || !eq(f.TargetKind, str(e.TargetKind)) || !eq(f.TargetID, str(e.TargetID)) {
			continue
		}
		if f.Involving != "" && !(e.PrincipalID == f.Involving || str(e.TargetID) == f.Involving) {
			continue
		}
		if !f.Since.IsZero() && e.Time.Compare(f.Since) < 0 {
			continue
		}
		if !f.Until.IsZero() && e.Time.Compare(f.Until) >= 0 {
			continue
		}
		out = append(out, e)
	}
	return out
}

// diff describes how two ID lists differ, briefly.
func diff(got, want []string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	at := func(xs []string) string {
		if i < len(xs) {
			return xs[i]
		}
		return "(end)"
	}
	return fmt.Sprintf("got %d, want %d; first difference at %d: got %s, want %s", len(got), len(want), i, at(got), at(want))
}

func idsOf(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}
