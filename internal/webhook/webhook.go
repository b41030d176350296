// Package webhook owns one webhook request of a subscription: its body (the
// standard envelope, or the subscription's payload template rendered with
// bounds on time and size), its signature (Svc-Signature, HMAC-SHA256 over
// timestamp, full stop, raw body, with every live signing key), its headers,
// and sending it once over a client that checks the address it actually
// connects to (private, loopback and link-local addresses refused unless
// host policy allows private webhooks) and never follows a redirect.
//
// It also checks what a subscription saves: the URL (a literal private
// address in any spelling is refused), extra headers, and the template
// (rendered against a sample event; a JSON content type requires JSON).
//
// docs/webhooks.md is the receivers' side: the body, the headers, how to
// verify a signature, the template's variables and functions, the limits
// and the address rule.
//
// It must not read or write the store, schedule retries or decide who may
// receive an event: the dispatcher (internal/dispatch) does that. It never
// logs, and never puts a header value or signing key in an error.
package webhook

import (
	"net"
	"time"

	"github.com/svchost/svc/internal/events"
)

// Options configure a Sender.
type Options struct {
	// Timeout bounds one attempt, from dialling to the answer's headers and
	// the first 64 KiB of its body (events.attempt_timeout, 15s by default).
	Timeout time.Duration
	// AllowPrivate reports host policy's allow_private_webhooks; it is read
	// at every attempt. Nil means false.
	AllowPrivate func() bool
	// Now is the clock of Svc-Timestamp (time.Now when nil).
	Now func() time.Time
	// UserAgent is sent as User-Agent ("svc/<version>").
	UserAgent string
	// Resolver looks names up (nil: the system's). The address rule
	// applies to whatever it answers: tests point it at a DNS server of
	// their own to have names resolve to loopback and private addresses.
	Resolver *net.Resolver
}

// Request is one attempt to deliver an event to a webhook.
type Request struct {
	URL         string
	Method      string // POST, PUT or PATCH; empty means POST
	ContentType string // empty means application/json
	// Headers are the subscription's extra headers, values opened.
	Headers map[string]string
	// Template is the subscription's payload template; empty sends the
	// standard envelope.
	Template string
	// Keys are the subscription's live signing keys (whsec_…), newest
	// first; each signs the body (one v1= per key, space separated).
	Keys       []string
	DeliveryID string
	Event      *events.Event
	// ConsoleURL is the installation's external URL, for .Link; empty
	// leaves it empty.
	ConsoleURL string
}

// Result is what one attempt came to.
type Result struct {
	// StatusCode is the answer's status; 0 when there was no answer.
	StatusCode int
	// Error says why the attempt failed, for the delivery log; empty when
	// it was delivered. It never carries a header value or key.
	Error    string
	Duration time.Duration
}

// Delivered reports whether the attempt counts as delivered: a 2xx answer.
func (r Result) Delivered() bool { return r.Error == "" && r.StatusCode >= 200 && r.StatusCode < 300 }
