package audit

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// fixture is a store of a few hundred generated entries.
type fixture struct {
	u   universe
	all []Entry
	r   *raftstore.Reader
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	u := newUniverse(8, 3, 5)
	all := genEntries(u, 600, 1)
	return &fixture{u: u, all: all, r: load(t, all)}
}

func (fx *fixture) check(t *testing.T, f Filter, before string, limit int) {
	t.Helper()
	got, more := Query(fx.r, f, before, limit)
	want, wantMore := reference(fx.all, f, before, limit)
	if got == nil {
		t.Fatalf("Query(%+v, %q, %d) returned nil, want a non-nil slice", f, before, limit)
	}
	if !slices.Equal(idsOf(got), idsOf(want)) || more != wantMore {
		t.Fatalf("Query(%+v, before %q, limit %d): more %v, want %v; %s",
			f, before, limit, more, wantMore, diff(idsOf(got), idsOf(want)))
	}
}

// TestQueryMatchesReference compares Query with a brute-force reference over
// many random combinations of filters, cursors and limits.
func TestQueryMatchesReference(t *testing.T) {
	fx := newFixture(t)
	rng := rand.New(rand.NewPCG(42, 42))
	outside := idGen(99, t0.Add(-time.Hour), 7*time.Second) // IDs between and around the stored ones
	oneOf := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	people := append(append(slices.Clone(fx.u.users), fx.u.tokens...), "system", "usr_none")
	targets := append(append(slices.Clone(people), fx.u.apps...), fx.u.secrets...)
	end := fx.all[len(fx.all)-1].Time
	randTime := func() time.Time {
		if rng.IntN(3) == 0 {
			return fx.all[rng.IntN(len(fx.all))].Time // on an entry: boundaries
		}
		return t0.Add(time.Duration(rng.Int64N(int64(end.Sub(t0)+20*time.Second))) - 10*time.Second)
	}
	some := func() bool { return rng.IntN(4) == 0 }
	for i := range 3000 {
		var f Filter
		if some() {
			f.Action = oneOf("a", "app.", "app.d", "app.deploy", "app.deploy.rollback", "app.deploy.x",
				"user.login", "user.", "u", "secret.read", "grant.", "nope", "token.c", "install.settings.update", "i", "")
		}
		if some() {
			f.PrincipalID = oneOf(people...)
		}
		if some() {
			f.PrincipalKind = oneOf(PrincipalUser, PrincipalToken, PrincipalSystem, PrincipalAnonymous)
		}
		if some() {
			f.AppID = oneOf(append(slices.Clone(fx.u.apps), "app_none")...)
		}
		if some() {
			f.TargetKind = oneOf("app", "user", "token", "secret", "none")
		}
		if some() {
			f.TargetID = oneOf(targets...)
		}
		if some() {
			f.Involving = oneOf(targets...)
		}
		if some() {
			f.Since = randTime()
		}
		if some() {
			f.Until = randTime()
		}
		var before string
		switch k := rng.IntN(10); {
		case k < 3:
		case k < 7:
			before = fx.all[rng.IntN(len(fx.all))].ID
		case k < 9:
			before = outside.New(ids.Audit)
		default:
			before = oneOf("aud_00000000000000000000000000", "aud_7ZZZZZZZZZZZZZZZZZZZZZZZZZ")
		}
		limit := []int{1, 2, 3, 7, 20, 50, 500, 0, 1000}[rng.IntN(9)]
		if i%500 == 0 {
			f, before = Filter{}, "" // a few plain first pages
		}
		fx.check(t, f, before, limit)
	}
}

func TestQueryEntries(t *testing.T) {
	fx := newFixture(t)
	byID := map[string]Entry{}
	for _, e := range fx.all {
		byID[e.ID] = e
	}
	got, more := Query(fx.r, Filter{Action: "app."}, "", 20)
	if len(got) != 20 || !more {
		t.Fatalf("got %d entries, more %v; want 20 and more", len(got), more)
	}
	for _, e := range got {
		if !reflect.DeepEqual(e, byID[e.ID]) {
			t.Fatalf("entry %s reads back as %+v, want %+v", e.ID, e, byID[e.ID])
		}
	}
}

func TestQueryLimits(t *testing.T) {
	fx := newFixture(t)
	for _, tc := range []struct{ limit, want int }{{0, DefaultLimit}, {-3, DefaultLimit}, {1, 1}, {MaxLimit, MaxLimit}, {MaxLimit + 1, MaxLimit}, {1 << 40, MaxLimit}} {
		got, more := Query(fx.r, Filter{}, "", tc.limit)
		if len(got) != tc.want || !more {
			t.Errorf("limit %d: got %d entries, more %v; want %d and more", tc.limit, len(got), more, tc.want)
		}
	}
	last := fx.all[MaxLimit].ID // exactly MaxLimit entries below it: no more
	got, more := Query(fx.r, Filter{}, last, MaxLimit)
	if len(got) != MaxLimit || more {
		t.Errorf("limit %d below entry %d: got %d entries, more %v; want all and no more", MaxLimit, MaxLimit, len(got), more)
	}
}

// TestPaging walks every page with before and checks that it sees every
// match exactly once, newest first.
func TestPaging(t *testing.T) {
	fx := newFixture(t)
	for _, f := range []Filter{
		{},
		{PrincipalID: "usr_0000"},
		{PrincipalKind: PrincipalAnonymous},
		{Involving: "usr_0001"},
		{Action: "app."},
		{Action: "user.login"},
		{Action: "app.", AppID: "app_000"},
		{TargetKind: "user", Since: t0.Add(100 * time.Second), Until: t0.Add(400 * time.Second)},
		{Involving: "app_001", Action: "a"},
		{Action: "nope"},
	} {
		want := referenceAll(fx.all, f, "")
		var got []string
		before := ""
		for pages := 0; ; pages++ {
			if pages > len(fx.all) {
				t.Fatalf("%+v: paging does not end", f)
			}
			page, more := Query(fx.r, f, before, 7)
			if more && len(page) != 7 {
				t.Fatalf("%+v: a page with more has %d entries", f, len(page))
			}
			got = append(got, idsOf(page)...)
			if !more {
				break
			}
			before = page[len(page)-1].ID
		}
		if !slices.Equal(got, idsOf(want)) {
			t.Fatalf("%+v: paging: %s", f, diff(got, idsOf(want)))
		}
	}
}

func TestInvolving(t *testing.T) {
	fx := newFixture(t)
	x := "usr_0001"
	var asActor, asTarget, both int
	for _, e := range fx.all {
		a, tg := e.PrincipalID == x, e.TargetID != nil && *e.TargetID == x
		if a {
			asActor++
		}
		if tg {
			asTarget++
		}
		if a && tg {
			both++
		}
	}
	if asActor == 0 || asTarget == 0 || both == 0 {
		t.Fatalf("test data: %s is actor %d, target %d, both %d times; want each at least once", x, asActor, asTarget, both)
	}
	got, more := Query(fx.r, Filter{Involving: x}, "", MaxLimit) // fewer than MaxLimit
	if more || len(got) != asActor+asTarget-both {
		t.Fatalf("involving %s: %d entries (more %v), want %d", x, len(got), more, asActor+asTarget-both)
	}
	for _, e := range got {
		if e.PrincipalID != x && (e.TargetID == nil || *e.TargetID != x) {
			t.Fatalf("involving %s returned %+v", x, e)
		}
	}
	fx.check(t, Filter{Involving: x}, "", MaxLimit)
}

func TestSinceUntilBoundaries(t *testing.T) {
	g := idGen(3, t0, time.Second)
	var all []Entry
	for i := range 5 {
		all = append(all, Entry{ID: g.New(ids.Audit), Time: t0.Add(time.Duration(i) * time.Second), Action: "app.create", PrincipalKind: PrincipalSystem, PrincipalID: "system"})
	}
	r := load(t, all)
	// Parsed with an offset: 12:00:01Z and 12:00:03Z.
	f, _, _, err := ParseFilter(url.Values{"since": {"2025-03-01T14:00:01+02:00"}, "until": {"2025-03-01T09:00:03-03:00"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := Query(r, f, "", 10)
	if want := []string{all[2].ID, all[1].ID}; !slices.Equal(idsOf(got), want) {
		t.Fatalf("since 12:00:01 until 12:00:03 gave %v, want entries 2 and 1 %v", idsOf(got), want)
	}
	got, _ = Query(r, Filter{Since: t0.Add(4 * time.Second)}, "", 10)
	if len(got) != 1 || got[0].ID != all[4].ID {
		t.Fatalf("since the last entry's time gave %v", idsOf(got))
	}
	got, _ = Query(r, Filter{Until: t0}, "", 10)
	if len(got) != 0 {
		t.Fatalf("until the first entry's time gave %v", idsOf(got))
	}
	got, _ = Query(r, Filter{Since: t0.Add(2 * time.Second), Until: t0.Add(2 * time.Second)}, "", 10)
	if len(got) != 0 {
		t.Fatalf("empty range gave %v", idsOf(got))
	}
}

func TestParseFilter(t *testing.T) {
	id := idGen(5, t0, time.Second).New(ids.Audit)
	good := []struct {
		name   string
		q      string
		f      Filter
		before string
		limit  int
	}{
		{name: "empty", q: "", limit: 50},
		{name: "all", q: "action=app.&principal_id=usr_1&principal_kind=user&app_id=app_1&target_kind=app&target_id=app_2&involving=usr_2" +
			"&since=2025-03-01T12:00:00Z&until=2025-03-02T00:00:00.5Z&before=" + id + "&limit=10",
			f: Filter{Action: "app.", PrincipalID: "usr_1", PrincipalKind: "user", AppID: "app_1", TargetKind: "app", TargetID: "app_2", Involving: "usr_2",
				Since: t0, Until: time.Date(2025, 3, 2, 0, 0, 0, 5e8, time.UTC)},
			before: id, limit: 10},
		{name: "kinds", q: "principal_kind=anonymous", f: Filter{PrincipalKind: PrincipalAnonymous}, limit: 50},
		{name: "offset", q: "since=2025-03-01T14:00:00%2B02:00", f: Filter{Since: t0}, limit: 50},
		{name: "limit 1", q: "limit=1", limit: 1},
		{name: "limit max", q: "limit=500", limit: 500},
		{name: "limit clamped", q: "limit=501", limit: 500},
		{name: "limit huge", q: "limit=99999999999999999999999", limit: 500},
		{name: "limit leading zero", q: "limit=007", limit: 7},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			f, before, limit, err := ParseFilter(q)
			if err != nil {
				t.Fatalf("ParseFilter(%q): %v", tc.q, err)
			}
			if !reflect.DeepEqual(f, tc.f) || before != tc.before || limit != tc.limit {
				t.Fatalf("ParseFilter(%q) = %+v, %q, %d; want %+v, %q, %d", tc.q, f, before, limit, tc.f, tc.before, tc.limit)
			}
			if f.Since.Location() != time.UTC || f.Until.Location() != time.UTC {
				t.Fatalf("times not in UTC: %v, %v", f.Since, f.Until)
			}
		})
	}

	bad := []struct{ q, field string }{
		{"foo=1", "foo"},
		{"zeta=1&alpha=2&action=x", "alpha"},
		{"Action=x", "Action"},
		{"=x", ""},
		{"action=a&action=b", "action"},
		{"principal_id=", "principal_id"},
		{"target_id=a%00b", "target_id"},
		{"app_id=" + strings.Repeat("a", 257), "app_id"},
		{"principal_kind=robot", "principal_kind"},
		{"principal_kind=User", "principal_kind"},
		{"since=yesterday", "since"},
		{"since=2025-03-01", "since"},
		{"since=2025-03-01T12:00:00", "since"},
		{"since=2025-03-01T14:00:00+02:00", "since"}, // + unescaped reads as a space
		{"until=0001-01-01T00:00:00Z", "until"},
		{"since=2025-03-02T00:00:00Z&until=2025-03-01T00:00:00Z", "until"},
		{"since=2025-03-01T00:00:00Z&until=2025-03-01T00:00:00Z", "until"},
		{"since=2025-03-01T02:00:00%2B02:00&until=2025-03-01T00:00:00Z", "until"},
		{"before=usr_01JNJ6A2XMZ4K8Q9V1R2S3T4V5", "before"},
		{"before=aud_bad", "before"},
		{"before=aud_01jnj6a2xmz4k8q9v1r2s3t4v5", "before"},
		{"limit=0", "limit"},
		{"limit=-1", "limit"},
		{"limit=-99999999999999999999999", "limit"},
		{"limit=abc", "limit"},
		{"limit=1.5", "limit"},
		{"limit=1e3", "limit"},
		{"limit=%2010", "limit"},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.q, func(t *testing.T) {
			q, err := url.ParseQuery(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			_, _, _, err = ParseFilter(q)
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.ValidInvalid {
				t.Fatalf("ParseFilter(%q) = %v, want VALID_INVALID", tc.q, err)
			}
			if field, ok := e.Details["field"]; !ok || field != tc.field {
				t.Fatalf("ParseFilter(%q): field %v, want %q (%v)", tc.q, e.Details["field"], tc.field, err)
			}
		})
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{
		"", "action=app.&limit=10", "since=2025-03-01T12:00:00Z&until=2025-03-02T12:00:00%2B01:00",
		"before=aud_01JNJ6A2XMZ4K8Q9V1R2S3T4V5", "limit=99999999999999999999", "limit=-0", "principal_kind=token",
		"involving=usr_1&involving=usr_2", "x=1&y=2", "since=9999-12-31T23:59:59.999999999Z", "until=0000-01-01T00:00:00Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, _ := url.ParseQuery(s) // what could be parsed
		flt, before, limit, err := ParseFilter(q)
		if err != nil {
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.ValidInvalid {
				t.Fatalf("ParseFilter(%q): %v is not VALID_INVALID", s, err)
			}
			if _, ok := e.Details["field"].(string); !ok {
				t.Fatalf("ParseFilter(%q): %v names no field", s, err)
			}
			return
		}
		if limit < 1 || limit > MaxLimit {
			t.Fatalf("ParseFilter(%q): limit %d", s, limit)
		}
		if before != "" && !ids.Valid(ids.Audit, before) {
			t.Fatalf("ParseFilter(%q): before %q", s, before)
		}
		if !flt.Since.IsZero() && !flt.Until.IsZero() && !flt.Since.Before(flt.Until) {
			t.Fatalf("ParseFilter(%q): since %v not before until %v", s, flt.Since, flt.Until)
		}
		switch flt.PrincipalKind {
		case "", PrincipalUser, PrincipalToken, PrincipalSystem, PrincipalAnonymous:
		default:
			t.Fatalf("ParseFilter(%q): principal_kind %q", s, flt.PrincipalKind)
		}
	})
}

// TestNewEntryIDCarriesItsTime: Query bounds a time range by IDs, which is
// right only because New mints an entry's ID from its Time.
func TestNewEntryIDCarriesItsTime(t *testing.T) {
	now := time.Date(2026, 11, 27, 16, 0, 0, 123_456_789, time.FixedZone("x", 3600))
	e := New(context.Background(), now, "app.create", "", Target{}, nil)
	got, ok := ids.Time(e.ID)
	if !ok || !got.Equal(now.Truncate(time.Millisecond)) || !e.Time.Equal(now) {
		t.Fatalf("entry of %v has ID time %v and Time %v", now, got, e.Time)
	}
}
