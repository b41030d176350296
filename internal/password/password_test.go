package password

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testParams are cheap, so that tests using the real Argon2id run fast.
var testParams = Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// Reference hashes from the Argon2 reference implementation's tests
// (phc-winner-argon2, src/test.c), all of the password "password" with the
// salt "somesalt".
var referenceHashes = []string{
	"$argon2id$v=19$m=256,t=2,p=1$c29tZXNhbHQ$nf65EOgLrQMR/uIPnA4rEsF5h7TKyQwu9U1bMCHGi/4",
	"$argon2id$v=19$m=256,t=2,p=2$c29tZXNhbHQ$bQk8UB/VmZZF4Oo79iDXuL5/0ttZwg2f/5U52iv1cDc",
	"$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
	"$argon2id$v=19$m=65536,t=1,p=1$c29tZXNhbHQ$9qWtwbpyPd3vm1rB1GThgPzZ3/ydHL92zKL+15XZypg",
	"$argon2id$v=19$m=65536,t=2,p=1$ZGlmZnNhbHQ$vfMrBczELrFdWP0ZsfhWsRPaHppYdP3MVEMIVlqoFBw", // salt "diffsalt"
}

func TestHashVerifyRoundTrip(t *testing.T) {
	for _, p := range []Params{testParams, DefaultParams, {Memory: 512, Time: 3, Threads: 4, SaltLen: 8, KeyLen: 64}} {
		t.Run(fmt.Sprintf("%+v", p), func(t *testing.T) {
			h := NewHasher(p, 2)
			ctx := t.Context()
			const pw = "correct horse battery staple"
			enc, err := h.Hash(ctx, pw)
			if err != nil {
				t.Fatalf("Hash: %v", err)
			}
			wantPrefix := fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$", p.Memory, p.Time, p.Threads)
			if !strings.HasPrefix(enc, wantPrefix) {
				t.Errorf("Hash = %q, want prefix %q", enc, wantPrefix)
			}
			if re := regexp.MustCompile(`^\$[^$]+\$[^$]+\$[^$]+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$`); !re.MatchString(enc) {
				t.Errorf("Hash = %q, not a PHC string with unpadded base64", enc)
			}
			gotP, salt, key, err := decode(enc)
			if err != nil {
				t.Fatalf("decode(Hash()): %v", err)
			}
			if diff := cmp.Diff(p, gotP); diff != "" {
				t.Errorf("params of the hash (-want +got):\n%s", diff)
			}
			if got, want := len(salt), int(p.SaltLen); got != want {
				t.Errorf("salt length = %d, want %d", got, want)
			}
			if got, want := len(key), int(p.KeyLen); got != want {
				t.Errorf("key length = %d, want %d", got, want)
			}

			ok, rehash, err := h.Verify(ctx, enc, pw)
			if err != nil || !ok || rehash {
				t.Errorf("Verify(right password) = %v, %v, %v; want true, false, nil", ok, rehash, err)
			}
			for _, wrong := range []string{"", "correct horse battery stapl", "Correct horse battery staple", pw + " "} {
				ok, rehash, err := h.Verify(ctx, enc, wrong)
				if err != nil || ok || rehash {
					t.Errorf("Verify(%q) = %v, %v, %v; want false, false, nil", wrong, ok, rehash, err)
				}
			}

			enc2, err := h.Hash(ctx, pw)
			if err != nil {
				t.Fatalf("second Hash: %v", err)
			}
			if enc2 == enc {
				t.Errorf("two hashes of the same password are equal (%q): salt not random", enc)
			}
		})
	}
}

func TestVerifyReferenceHashes(t *testing.T) {
	h := NewHasher(testParams, 1)
	for _, enc := range referenceHashes {
		t.Run(enc, func(t *testing.T) {
			ok, rehash, err := h.Verify(t.Context(), enc, "password")
			if err != nil || !ok || !rehash {
				t.Errorf("Verify(%q) = %v, %v, %v; want true, true, nil", "password", ok, rehash, err)
			}
			ok, rehash, err = h.Verify(t.Context(), enc, "differentpassword")
			if err != nil || ok || rehash {
				t.Errorf("Verify(%q) = %v, %v, %v; want false, false, nil", "differentpassword", ok, rehash, err)
			}
		})
	}
}

func TestVerifyNeedsRehash(t *testing.T) {
	ctx := t.Context()
	const pw = "a perfectly fine password"
	tests := []struct {
		name   string
		old    Params
		rehash bool
	}{
		{"same", testParams, false},
		{"memory", Params{Memory: 128, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, true},
		{"time", Params{Memory: 64, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}, true},
		{"threads", Params{Memory: 64, Time: 1, Threads: 2, SaltLen: 16, KeyLen: 32}, true},
		{"salt length", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 8, KeyLen: 32}, true},
		{"key length", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 16}, true},
	}
	h := NewHasher(testParams, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := NewHasher(tt.old, 1).Hash(ctx, pw)
			if err != nil {
				t.Fatalf("Hash: %v", err)
			}
			ok, rehash, err := h.Verify(ctx, enc, pw)
			if err != nil || !ok || rehash != tt.rehash {
				t.Errorf("Verify(right password) = %v, %v, %v; want true, %v, nil", ok, rehash, err, tt.rehash)
			}
			ok, rehash, err = h.Verify(ctx, enc, "wrong")
			if err != nil || ok || rehash {
				t.Errorf("Verify(wrong password) = %v, %v, %v; want false, false, nil", ok, rehash, err)
			}
		})
	}
}

// valid is a well-formed hash with testParams, for tampering.
const valid = "$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"

func TestVerifyMalformed(t *testing.T) {
	const (
		salt = "c29tZXNhbHRzb21lc2FsdA"
		key  = "CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
	)
	params := func(s string) string { return "$argon2id$v=19$" + s + "$" + salt + "$" + key }
	tests := map[string]string{
		"empty":               "",
		"garbage":             "not a hash",
		"no leading dollar":   strings.TrimPrefix(valid, "$"),
		"argon2i":             strings.Replace(valid, "argon2id", "argon2i", 1),
		"argon2d":             strings.Replace(valid, "argon2id", "argon2d", 1),
		"bcrypt":              "$2a$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ012",
		"upper-case algo":     strings.Replace(valid, "argon2id", "ARGON2ID", 1),
		"version 16":          strings.Replace(valid, "v=19", "v=16", 1),
		"version missing":     strings.Replace(valid, "v=19$", "", 1),
		"version zero-padded": strings.Replace(valid, "v=19", "v=019", 1),
		"params missing":      "$argon2id$v=19$" + salt + "$" + key,
		"params empty":        params(""),
		"params reordered":    params("t=1,m=64,p=1"),
		"param missing":       params("m=64,t=1"),
		"param extra":         params("m=64,t=1,p=1,x=1"),
		"param repeated":      params("m=64,t=1,p=1,p=1"),
		"trailing comma":      params("m=64,t=1,p=1,"),
		"semicolons":          params("m=64;t=1;p=1"),
		"spaces":              params("m=64, t=1, p=1"),
		"m empty":             params("m=,t=1,p=1"),
		"m letters":           params("m=abc,t=1,p=1"),
		"m negative":          params("m=-64,t=1,p=1"),
		"m plus sign":         params("m=+64,t=1,p=1"),
		"m leading zero":      params("m=064,t=1,p=1"),
		"m hex":               params("m=0x40,t=1,p=1"),
		"m underscore":        params("m=6_4,t=1,p=1"),
		"m overflow":          params("m=99999999999999999999999,t=1,p=1"),
		"m above 1 GiB":       params("m=1048577,t=1,p=1"),
		"m uint32 wrap":       params("m=4294967360,t=1,p=1"),
		"m below 8p":          params("m=15,t=1,p=2"),
		"m zero":              params("m=0,t=1,p=1"),
		"t zero":              params("m=64,t=0,p=1"),
		"t above 100":         params("m=64,t=101,p=1"),
		"p zero":              params("m=64,t=1,p=0"),
		"p above 64":          params("m=1024,t=1,p=65"),
		"p uint8 wrap":        params("m=64,t=1,p=257"),
		"salt missing":        "$argon2id$v=19$m=64,t=1,p=1$" + key,
		"salt empty":          "$argon2id$v=19$m=64,t=1,p=1$$" + key,
		"salt too short":      "$argon2id$v=19$m=64,t=1,p=1$AAAAAAAAAA$" + key, // 7 bytes
		"salt too long":       "$argon2id$v=19$m=64,t=1,p=1$" + strings.Repeat("A", 1368) + "$" + key,
		"salt padded":         "$argon2id$v=19$m=64,t=1,p=1$" + salt + "==$" + key,
		"salt url alphabet":   "$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHRzb21lc2F-_A$" + key,
		"salt newline":        "$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHRz\nb21lc2FsdA$" + key,
		"salt bad length":     "$argon2id$v=19$m=64,t=1,p=1$" + salt + "AAA$" + key, // 25 characters
		"salt padding bits":   "$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHRzb21lc2FsdB$" + key,
		"key missing":         "$argon2id$v=19$m=64,t=1,p=1$" + salt,
		"key empty":           "$argon2id$v=19$m=64,t=1,p=1$" + salt + "$",
		"key too short":       "$argon2id$v=19$m=64,t=1,p=1$" + salt + "$AAAAAAAAAA",
		"key too long":        "$argon2id$v=19$m=64,t=1,p=1$" + salt + "$" + strings.Repeat("A", 1368),
		"key padded":          valid + "=",
		"key padding bits":    strings.TrimSuffix(valid, "c") + "d",
		"key trailing space":  valid + " ",
		"key trailing dollar": valid + "$",
		"extra field":         valid + "$AAAA",
		"leading space":       " " + valid,
		"NUL inside":          strings.Replace(valid, "m=64", "m=64\x00", 1),
	}
	h := NewHasher(testParams, 1)
	for name, enc := range tests {
		t.Run(name, func(t *testing.T) {
			ok, rehash, err := h.Verify(t.Context(), enc, "password")
			if !errors.Is(err, ErrInvalidHash) || ok || rehash {
				t.Errorf("Verify(%q) = %v, %v, %v; want false, false, an error wrapping ErrInvalidHash", enc, ok, rehash, err)
			}
		})
	}
	// The fixture itself must be fine, or the table proves nothing.
	if _, _, err := h.Verify(t.Context(), valid, "password"); err != nil {
		t.Fatalf("Verify(valid) = %v", err)
	}
}

// TestDecodeLimits checks both sides of each limit without spending the
// memory a verification at the limit would take.
func TestDecodeLimits(t *testing.T) {
	b64n := func(n int) string { return b64.EncodeToString(make([]byte, n)) }
	enc := func(m, tt, p string, salt, key int) string {
		return "$argon2id$v=19$m=" + m + ",t=" + tt + ",p=" + p + "$" + b64n(salt) + "$" + b64n(key)
	}
	tests := []struct {
		name string
		enc  string
		ok   bool
	}{
		{"minimum", enc("8", "1", "1", 8, 8), true},
		{"memory at 1 GiB", enc("1048576", "1", "1", 16, 32), true},
		{"memory above 1 GiB", enc("1048577", "1", "1", 16, 32), false},
		{"time 100", enc("64", "100", "1", 16, 32), true},
		{"time 101", enc("64", "101", "1", 16, 32), false},
		{"threads 64", enc("512", "1", "64", 16, 32), true},
		{"threads 65", enc("520", "1", "65", 16, 32), false},
		{"memory 8*threads", enc("32", "1", "4", 16, 32), true},
		{"memory below 8*threads", enc("31", "1", "4", 16, 32), false},
		{"salt 7", enc("64", "1", "1", 7, 32), false},
		{"salt 1024", enc("64", "1", "1", 1024, 32), true},
		{"salt 1025", enc("64", "1", "1", 1025, 32), false},
		{"key 7", enc("64", "1", "1", 16, 7), false},
		{"key 1024", enc("64", "1", "1", 16, 1024), true},
		{"key 1025", enc("64", "1", "1", 16, 1025), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := decode(tt.enc)
			if got := err == nil; got != tt.ok {
				t.Errorf("decode(%q) error = %v, want ok %v", tt.enc, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidHash) {
				t.Errorf("decode error %v does not wrap ErrInvalidHash", err)
			}
		})
	}
}

// TestVerifyTampered alters the valid hash in every position and truncates
// it at every length: never a panic, never a match.
func TestVerifyTampered(t *testing.T) {
	h := NewHasher(testParams, 1)
	ctx := t.Context()
	const pw = "tamper with me please"
	enc, err := h.Hash(ctx, pw)
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, bad string) {
		t.Helper()
		ok, rehash, err := h.Verify(ctx, bad, pw)
		if ok || rehash {
			t.Errorf("Verify(%q) = %v, %v, %v; want false, false", bad, ok, rehash, err)
		}
	}
	for i := range len(enc) {
		check(t, enc[:i])
		for _, c := range []byte{'$', ',', '=', '0', '9', 'A', 'z', '+', '/', '-', ' ', 0, 0xff} {
			if enc[i] == c {
				continue
			}
			b := []byte(enc)
			b[i] = c
			check(t, string(b))
		}
	}
	check(t, enc+"A")
}

func TestParamsValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		ok   bool
	}{
		{"default", DefaultParams, true},
		{"test", testParams, true},
		{"zero", Params{}, false},
		{"time 0", Params{Memory: 64, Time: 0, Threads: 1, SaltLen: 16, KeyLen: 32}, false},
		{"threads 0", Params{Memory: 64, Time: 1, Threads: 0, SaltLen: 16, KeyLen: 32}, false},
		{"memory 1 GiB + 1", Params{Memory: MaxMemory + 1, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, false},
		{"salt 4", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 4, KeyLen: 32}, false},
		{"key 2048", Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 2048}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if got := err == nil; got != tt.ok {
				t.Errorf("%+v.Validate() = %v, want ok %v", tt.p, err, tt.ok)
			}
		})
	}
}

func TestNewHasherPanics(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		n    int
	}{
		{"invalid params", Params{}, 1},
		{"zero concurrency", testParams, 0},
		{"negative concurrency", testParams, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("NewHasher(%+v, %d) did not panic", tt.p, tt.n)
				}
			}()
			NewHasher(tt.p, tt.n)
		})
	}
}

// gate is a kdf for tests: it counts calls and operations in flight and
// blocks each call until released.
type gate struct {
	release  chan struct{}
	calls    atomic.Int32
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	params   []Params // guarded by mu
	mu       sync.Mutex
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) kdf(_, _ []byte, p Params) []byte {
	g.calls.Add(1)
	n := g.inFlight.Add(1)
	for {
		m := g.maxSeen.Load()
		if n <= m || g.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	g.mu.Lock()
	g.params = append(g.params, p)
	g.mu.Unlock()
	<-g.release
	g.inFlight.Add(-1)
	return make([]byte, p.KeyLen)
}

func TestConcurrencyLimit(t *testing.T) {
	for _, limit := range []int{1, 3} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHasher(testParams, limit)
				g := newGate()
				h.kdf = g.kdf
				ctx := t.Context()
				var wg sync.WaitGroup
				const callers = 5
				for i := range callers {
					wg.Go(func() {
						var err error
						if i%2 == 0 {
							_, err = h.Hash(ctx, "pw")
						} else {
							_, _, err = h.Verify(ctx, valid, "pw")
						}
						if err != nil {
							t.Errorf("call %d: %v", i, err)
						}
					})
				}
				synctest.Wait() // every caller is in the kdf or waiting for a slot
				if got := g.calls.Load(); got != int32(limit) {
					t.Errorf("operations started while all callers wait = %d, want %d", got, limit)
				}
				close(g.release)
				wg.Wait()
				if got := g.calls.Load(); got != callers {
					t.Errorf("operations in all = %d, want %d", got, callers)
				}
				if got := g.maxSeen.Load(); got != int32(limit) {
					t.Errorf("most operations at once = %d, want %d", got, limit)
				}
			})
		})
	}
}

// TestConcurrencyLimitStress runs real goroutines without a gate: whatever
// the schedule, no more than the limit may overlap.
func TestConcurrencyLimitStress(t *testing.T) {
	const limit = 2
	h := NewHasher(testParams, limit)
	var inFlight, maxSeen atomic.Int32
	h.kdf = func(pw, salt []byte, p Params) []byte {
		n := inFlight.Add(1)
		for {
			m := maxSeen.Load()
			if n <= m || maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		for range 10 {
			runtime.Gosched()
		}
		inFlight.Add(-1)
		return argon2id(pw, salt, p)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				if _, err := h.Hash(t.Context(), "pw"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := maxSeen.Load(); got > limit {
		t.Errorf("most operations at once = %d, want at most %d", got, limit)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	ops := map[string]func(context.Context, *Hasher) error{
		"Hash": func(ctx context.Context, h *Hasher) error {
			_, err := h.Hash(ctx, "pw")
			return err
		},
		"Verify": func(ctx context.Context, h *Hasher) error {
			_, _, err := h.Verify(ctx, valid, "pw")
			return err
		},
	}
	for name, op := range ops {
		t.Run(name+"/cancel", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHasher(testParams, 1)
				g := newGate()
				h.kdf = g.kdf
				holder := make(chan error)
				go func() { holder <- op(t.Context(), h) }()
				synctest.Wait() // the holder has the only slot

				ctx, cancel := context.WithCancel(t.Context())
				waiter := make(chan error)
				go func() { waiter <- op(ctx, h) }()
				synctest.Wait()
				select {
				case err := <-waiter:
					t.Fatalf("waiting call returned %v while the slot was taken", err)
				default:
				}
				cancel()
				if err := <-waiter; !errors.Is(err, context.Canceled) {
					t.Errorf("waiting call after cancel = %v, want context.Canceled", err)
				}
				if got := g.calls.Load(); got != 1 {
					t.Errorf("operations started = %d, want 1", got)
				}
				close(g.release)
				if err := <-holder; err != nil {
					t.Errorf("holder: %v", err)
				}
			})
		})
		t.Run(name+"/deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHasher(testParams, 1)
				g := newGate()
				h.kdf = g.kdf
				holder := make(chan error)
				go func() { holder <- op(t.Context(), h) }()
				synctest.Wait()

				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				start := time.Now()
				if err := op(ctx, h); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("waiting call = %v, want context.DeadlineExceeded", err)
				}
				if got := time.Since(start); got != time.Second {
					t.Errorf("waited %v, want 1s", got)
				}
				close(g.release)
				if err := <-holder; err != nil {
					t.Errorf("holder: %v", err)
				}
			})
		})
		t.Run(name+"/already cancelled", func(t *testing.T) {
			h := NewHasher(testParams, 1)
			g := newGate()
			close(g.release)
			h.kdf = g.kdf
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			// The slot is free: a cancelled call must still not start.
			for range 20 {
				if err := op(ctx, h); !errors.Is(err, context.Canceled) {
					t.Fatalf("call with a cancelled context = %v, want context.Canceled", err)
				}
			}
			if got := g.calls.Load(); got != 0 {
				t.Errorf("operations started = %d, want 0", got)
			}
		})
	}
}

func TestDummy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Params{Memory: 128, Time: 3, Threads: 2, SaltLen: 24, KeyLen: 40}
		h := NewHasher(p, 1)
		g := newGate()
		h.kdf = g.kdf
		done := make(chan struct{})
		go func() {
			h.Dummy(t.Context(), "whatever")
			close(done)
		}()
		synctest.Wait()
		if got := g.calls.Load(); got != 1 {
			t.Fatalf("Dummy computed %d keys, want 1", got)
		}
		// It holds a slot like a real verification.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := h.Hash(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Errorf("Hash while Dummy runs = %v, want context.Canceled", err)
		}
		close(g.release)
		<-done
		if diff := cmp.Diff([]Params{p}, g.params); diff != "" {
			t.Errorf("Dummy's params (-want +got):\n%s", diff)
		}
	})
	// And with the real kdf it does not match the password, nor fail.
	h := NewHasher(testParams, 1)
	for _, pw := range []string{"", "password", "whatever"} {
		ok, _, err := h.Verify(t.Context(), h.dummy, pw)
		if ok || err != nil {
			t.Errorf("Verify(dummy, %q) = %v, %v; want false, nil", pw, ok, err)
		}
	}
}

func FuzzVerify(f *testing.F) {
	for _, s := range referenceHashes {
		f.Add(s, "password")
	}
	f.Add(valid, "password")
	f.Add("$argon2id$v=19$m=8,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAA", "")
	f.Add("$argon2id$v=19$m=1048576,t=100,p=64$AAAAAAAAAAA$AAAAAAAAAAA", "x")
	f.Add("$argon2id$v=19$m=64,t=1,p=1$$", "")
	f.Add("$argon2i$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$wWKIMhR9lyDFvRz9YTZweHKfbftvj+qf+YFY4NeBbtA", "password")
	f.Fuzz(func(t *testing.T, encoded, password string) {
		h := NewHasher(testParams, 1)
		h.kdf = func(pw, salt []byte, p Params) []byte {
			if err := p.Validate(); err != nil {
				t.Fatalf("kdf called with params outside the limits: %v", err)
			}
			if len(salt) < MinLen || len(salt) > MaxLen {
				t.Fatalf("kdf called with a %d-byte salt", len(salt))
			}
			// Compute for real when cheap; the fuzzer must not spend
			// a gigabyte per input.
			if uint64(p.Memory)*uint64(p.Time) <= 1<<14 {
				return argon2id(pw, salt, p)
			}
			return make([]byte, p.KeyLen)
		}
		ok, rehash, err := h.Verify(t.Context(), encoded, password)
		if err != nil && (ok || rehash) {
			t.Errorf("Verify = %v, %v, %v: true alongside an error", ok, rehash, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidHash) {
			t.Errorf("Verify error %v does not wrap ErrInvalidHash", err)
		}
		// Strictness: whatever is accepted is in canonical form.
		if p, salt, key, err := decode(encoded); err == nil {
			if got := encode(p, salt, key); got != encoded {
				t.Errorf("decode accepted %q, which encodes back as %q", encoded, got)
			}
		}
	})
}

func BenchmarkHash(b *testing.B) {
	h := NewHasher(DefaultParams, 1)
	for b.Loop() {
		if _, err := h.Hash(b.Context(), "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

func BenchmarkVerify(b *testing.B) {
	h := NewHasher(DefaultParams, 1)
	enc, err := h.Hash(b.Context(), "correct horse battery staple")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if ok, _, err := h.Verify(b.Context(), enc, "correct horse battery staple"); !ok || err != nil {
			b.Fatalf("Verify = %v, %v", ok, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}
