package identity

import (
	"strings"
	"time"

	"github.com/svchost/svc/internal/clientip"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/throttle"
)

// Limiter throttles guesses at a secret: an attempt is reserved before the
// secret is checked, and the reservation ended after, so that no more than
// the limit is ever checked whatever the concurrency (throttle.Limiter).
type Limiter interface {
	Reserve(key string) (r *throttle.Reservation, ok bool, retryAfter time.Duration)
	Reset(key string)
}

// KnownClients remembers the clients that proved a secret recently
// (throttle.Recent): they are exempt from the limit that counts every
// address's failures together, so that an attacker elsewhere cannot lock
// them out.
type KnownClients interface {
	Add(key string)
	Has(key string) bool
}

var (
	_ Limiter      = (*throttle.Limiter)(nil)
	_ KnownClients = (*throttle.Recent)(nil)
)

// limit is a limiter and the key an attempt counts under.
type limit struct {
	l   Limiter
	key string
}

// attempt is the reservations one guess holds.
type attempt []*throttle.Reservation

// reserve takes an attempt under every limit, in order, before a secret
// is checked. When one refuses, those already taken are released and the
// answer is RATE_LIMITED with msg and Retry-After.
func reserve(msg string, limits ...limit) (attempt, error) {
	a := make(attempt, 0, len(limits))
	for _, lim := range limits {
		r, ok, wait := lim.l.Reserve(lim.key)
		if !ok {
			a.release()
			e := errcode.New(errcode.RateLimited, "%s", msg).WithRemedy("wait as Retry-After says before trying again")
			e.RetryAfter = max(1, int((wait+time.Second-1)/time.Second))
			return nil, e
		}
		a = append(a, r)
	}
	return a, nil
}

// failed ends the attempt as a wrong guess under every limit.
func (a attempt) failed() {
	for _, r := range a {
		r.Failed()
	}
}

// release ends the attempt without counting it.
func (a attempt) release() {
	for _, r := range a {
		r.Release()
	}
}

// passwordLimits are the limits a guess at the password of the account
// username from client address ip counts under: the account and address
// together, the address alone, and the account alone unless the address
// signed in to it recently. pair is the account-and-address key.
func (s *Service) passwordLimits(username, ip string) (pair string, limits []limit) {
	account, client := strings.ToLower(username), clientip.Key(ip)
	pair = "account:" + account + "\x00client:" + client
	limits = []limit{{s.d.AccountLimit, pair}, {s.d.ClientLimit, "client:" + client}}
	if !s.d.KnownClients.Has(pair) {
		limits = append(limits, limit{s.d.AccountAnyLimit, "account:" + account})
	}
	return pair, limits
}

// passwordProved records that the client of pair proved the account's
// password: its failures there are forgotten and it is known from now on.
func (s *Service) passwordProved(pair string) {
	s.d.AccountLimit.Reset(pair)
	s.d.KnownClients.Add(pair)
}
