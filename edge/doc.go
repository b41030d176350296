// Package edge owns the identity-aware reverse proxy in front of every app:
// route lookup (port, subdomain or path mode), stripping inbound X-Svc-*
// headers and svc_* cookies, authenticating and authorizing every request,
// signing the Ed25519 assertion the app trusts, publishing the JWKS, and the
// passcode flow. It fails closed: no assertion, no request.
//
// It must not import the scheduler or any runtime adapter; routes reach it
// through a small interface (edge/consul feeds it in a cluster). The edge
// arrives with its issue; until then this package only reserves its place in
// the layout.
package edge
