// Package actor carries who is acting, request by request: the principal
// the server authenticated and the request id, so that every audit entry and
// event written on the request's behalf names them.
//
// It must not touch HTTP or storage; the server puts an Actor in the request
// context and services read it.
package actor

import "context"

// Actor is who caused a change.
type Actor struct {
	Kind string // user, token, system or anonymous
	ID   string // usr_… or tok_…; empty for system and anonymous
	// UserID is the person behind the credential: the user, or the owner
	// of a delegated token; empty for a service token, system and
	// anonymous. Rules about people (four eyes) compare it.
	UserID    string
	RequestID string // req_…, empty outside a request
}

// System is the actor of work the service does on its own.
var System = Actor{Kind: "system"}

type key struct{}

// With returns ctx carrying a.
func With(ctx context.Context, a Actor) context.Context { return context.WithValue(ctx, key{}, a) }

// From returns the actor ctx carries, or System.
func From(ctx context.Context) Actor {
	if a, ok := ctx.Value(key{}).(Actor); ok {
		return a
	}
	return System
}
