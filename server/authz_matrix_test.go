package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

// call is one request of the matrix, built for an actor (and, for routes
// that need no verb on the caller's own objects, an owner of the object).
type call struct {
	path, body string
	header     []string
	after      func(answer) // sees the answer, e.g. to note a changed password
}

type buildFn func(t *testing.T, actor, owner *principal) call

// matrix sends every route of the table as a set of principals.
type matrix struct {
	h        *harness
	appID    string // an app created by the administrator, shared as each check needs
	otherApp string // an app ID without a row, for grants elsewhere
	probeID  string
	badToken string     // well formed, unknown
	noVerbs  *principal // an account without any role, by a delegated token
	service  *principal // a service token nothing is shared with
	signer   *principal // whose credentials POST /sessions sends
	holders  map[authz.Verb]*principal
	allBut   map[authz.Verb]*principal
	checks   int
	// byAccess counts checks per principal class, for the report.
	byClass map[string]int
	// detected says the matrix's app has a source and a detection.
	detected bool
	build    map[string]buildFn
	// ready are apps prepared for the scheduler's routes, by purpose, and
	// requester asks for the deploys others approve.
	ready     map[string]readyApp
	requester *principal
	// shareRoles are two app roles holding only app.grants.manage.
	shareRoles []string
}

// sharerRoles returns two app roles holding only app.grants.manage: a role
// change between them is one any holder of the verb may make.
func (m *matrix) sharerRoles(t *testing.T) (from, to string) {
	t.Helper()
	if m.shareRoles == nil {
		m.shareRoles = []string{m.h.role(t, authz.ScopeApp, authz.AppGrantsMgmt), m.h.role(t, authz.ScopeApp, authz.AppGrantsMgmt)}
	}
	return m.shareRoles[0], m.shareRoles[1]
}

// readyApp is an app prepared for a route, and the deployment the route
// acts on.
type readyApp struct{ app, dep string }

func newMatrix(t *testing.T, h *harness) *matrix {
	m := &matrix{
		h:        h,
		otherApp: ids.New(ids.App),
		badToken: ids.New(ids.Token) + "." + strings.Repeat("A", 43),
		holders:  map[authz.Verb]*principal{},
		allBut:   map[authz.Verb]*principal{},
		byClass:  map[string]int{},
	}
	m.appID = h.app(t, "matrix")
	m.noVerbs = h.account(t, "noverbs", nil, true)
	m.service = h.serviceToken(t)
	m.signer = h.account(t, "signer", nil, false)
	a := h.send("POST", api+"/operator/raft/probes", `{"payload_bytes":8}`)
	if a.status != http.StatusCreated {
		t.Fatalf("probe: %d %s", a.status, a.body)
	}
	m.probeID = decodeAs[probeResultDTO](t, a).Probe.ID
	m.build = m.builders()
	return m
}

// holder of exactly one verb: an installation role for an installation
// verb; for an app verb, an app role with it granted on the matrix's app.
func (m *matrix) holder(t *testing.T, v authz.Verb) *principal {
	if p, ok := m.holders[v]; ok {
		return p
	}
	var p *principal
	if scope, _ := authz.ScopeOf(v); scope == authz.ScopeApp {
		p = m.h.account(t, "appholder", nil, true)
		m.h.grantApp(t, m.appID, authz.KindUser, p.userID, m.h.role(t, authz.ScopeApp, v))
	} else {
		p = m.h.holder(t, v)
	}
	m.holders[v] = p
	return p
}

// allBut holds every verb but v, through an installation role (whose app
// verbs apply on every app).
func (m *matrix) allButHolder(t *testing.T, v authz.Verb) *principal {
	if p, ok := m.allBut[v]; ok {
		return p
	}
	others := slices.DeleteFunc(authz.All(), func(x authz.Verb) bool { return x == v })
	p := m.h.holder(t, others...)
	m.allBut[v] = p
	return p
}

func fill(path string, kv ...string) string {
	for i := 0; i+1 < len(kv); i += 2 {
		path = strings.Replace(path, "{"+kv[i]+"}", kv[i+1], 1)
	}
	return path
}

// builders returns a request for every route of the table, keyed by
// "METHOD path". Each creates what the handler needs so that a caller
// allowed to call it can succeed; a state-changing call gets fresh objects.
func (m *matrix) builders() map[string]buildFn {
	h := m.h
	fixed := func(path string) buildFn {
		return func(*testing.T, *principal, *principal) call { return call{path: path} }
	}
	withBody := func(path string, body func() string) buildFn {
		return func(*testing.T, *principal, *principal) call { return call{path: path, body: body()} }
	}
	victim := func(t *testing.T) *principal { return h.account(t, "victim", nil, false) }
	member := authz.RoleMember
	return map[string]buildFn{
		"GET /api/v1/setup": fixed(api + "/setup"),
		"POST /api/v1/setup": withBody(api+"/setup", func() string {
			return jsonOf(map[string]string{"username": uniq("late"), "display_name": "Late", "password": "late-password-123"})
		}),
		"POST /api/v1/sessions": withBody(api+"/sessions", func() string {
			return jsonOf(map[string]string{"username": m.signer.username, "password": m.signer.password})
		}),
		"DELETE /api/v1/sessions": fixed(api + "/sessions"),
		"GET /api/v1/me":          fixed(api + "/me"),
		"POST /api/v1/me/password": func(_ *testing.T, actor, _ *principal) call {
			next := "pw-" + uniq("rotated") + "-long-enough"
			return call{path: api + "/me/password",
				body: jsonOf(map[string]string{"current_password": actor.password, "new_password": next}),
				after: func(a answer) {
					if a.status == http.StatusNoContent {
						actor.password = next
					}
				}}
		},
		"GET /api/v1/tokens":          fixed(api + "/tokens"),
		"POST /api/v1/tokens":         withBody(api+"/tokens", func() string { return `{"name":"matrix"}` }),
		"GET /api/v1/tokens/service":  fixed(api + "/tokens/service"),
		"POST /api/v1/tokens/service": withBody(api+"/tokens/service", func() string { return `{"name":"matrix-service"}` }),
		"DELETE /api/v1/tokens/{tokenID}": func(t *testing.T, _, owner *principal) call {
			// Never the token the request is sent with: another of the owner's.
			return call{path: api + "/tokens/" + tokenIDOf(h.delegatedToken(t, owner.userID, false))}
		},
		"GET /api/v1/users": fixed(api + "/users"),
		"POST /api/v1/users": withBody(api+"/users", func() string {
			return jsonOf(map[string]string{"username": uniq("created"), "password": "created-password-123"})
		}),
		"GET /api/v1/users/{userID}": func(_ *testing.T, _, owner *principal) call {
			return call{path: api + "/users/" + owner.userID}
		},
		"PATCH /api/v1/users/{userID}": func(_ *testing.T, _, owner *principal) call {
			return call{path: api + "/users/" + owner.userID, body: jsonOf(map[string]string{"display_name": uniq("Renamed")})}
		},
		"DELETE /api/v1/users/{userID}": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/users/" + victim(t).userID}
		},
		"PUT /api/v1/users/{userID}/role": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/users/" + victim(t).userID + "/role", body: `{"role_id":"role_member"}`}
		},
		"DELETE /api/v1/users/{userID}/role": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/users/" + h.account(t, "member", &member, false).userID + "/role"}
		},
		"POST /api/v1/users/{userID}/password": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/users/" + victim(t).userID + "/password", body: `{"password":"reset-password-123"}`}
		},
		"POST /api/v1/passwords/generate": fixed(api + "/passwords/generate"),
		"GET /api/v1/groups":              fixed(api + "/groups"),
		"POST /api/v1/groups":             withBody(api+"/groups", func() string { return jsonOf(map[string]string{"name": uniq("group")}) }),
		"PUT /api/v1/groups/{groupID}/members": func(t *testing.T, _, _ *principal) call {
			return call{path: fill(api+"/groups/{groupID}/members", "groupID", h.group(t, nil)), body: jsonOf(map[string][]string{"user_ids": {victim(t).userID}})}
		},
		"PUT /api/v1/groups/{groupID}/members/{userID}": func(t *testing.T, _, _ *principal) call {
			return call{path: fill(api+"/groups/{groupID}/members/{userID}", "groupID", h.group(t, nil), "userID", victim(t).userID)}
		},
		"DELETE /api/v1/groups/{groupID}/members/{userID}": func(t *testing.T, _, _ *principal) call {
			v := victim(t)
			return call{path: fill(api+"/groups/{groupID}/members/{userID}", "groupID", h.group(t, nil, v.userID), "userID", v.userID)}
		},
		"PUT /api/v1/groups/{groupID}/role": func(t *testing.T, _, _ *principal) call {
			return call{path: fill(api+"/groups/{groupID}/role", "groupID", h.group(t, nil)), body: `{"role_id":"role_member"}`}
		},
		"DELETE /api/v1/groups/{groupID}/role": func(t *testing.T, _, _ *principal) call {
			return call{path: fill(api+"/groups/{groupID}/role", "groupID", h.group(t, &member))}
		},
		"DELETE /api/v1/groups/{groupID}": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/groups/" + h.group(t, nil)}
		},
		"GET /api/v1/roles": fixed(api + "/roles"),
		"POST /api/v1/roles": withBody(api+"/roles", func() string {
			return jsonOf(map[string]any{"name": uniq("role"), "scope": "install", "verbs": []string{"install.view"}})
		}),
		"DELETE /api/v1/roles/{roleID}": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/roles/" + h.role(t, authz.ScopeApp, authz.AppView)}
		},
		"GET /api/v1/verbs":                          fixed(api + "/verbs"),
		"GET /api/v1/policy":                         fixed(api + "/policy"),
		"PUT /api/v1/policy":                         withBody(api+"/policy", func() string { return `{"policy":{}}` }),
		"POST /api/v1/policy/preview":                withBody(api+"/policy/preview", func() string { return `{"policy":{}}` }),
		"GET /api/v1/config":                         fixed(api + "/config"),
		"POST /api/v1/restart":                       fixed(api + "/restart"),
		"POST /api/v1/upgrade":                       withBody(api+"/upgrade", func() string { return fakeBinary("2.0.0-matrix") }),
		"GET /api/v1/upgrade":                        fixed(api + "/upgrade"),
		"GET /api/v1/audit":                          fixed(api + "/audit"),
		"GET /api/v1/reference":                      fixed(api + "/reference"),
		"GET /api/v1/openapi.json":                   fixed(api + "/openapi.json"),
		"GET /api/v1/operator/raft":                  fixed(api + "/operator/raft"),
		"GET /api/v1/operator/raft/history":          fixed(api + "/operator/raft/history"),
		"POST /api/v1/operator/raft/probes":          withBody(api+"/operator/raft/probes", func() string { return `{"payload_bytes":8}` }),
		"GET /api/v1/operator/raft/probes":           fixed(api + "/operator/raft/probes"),
		"GET /api/v1/operator/raft/probes/{probeID}": fixed(api + "/operator/raft/probes/" + m.probeID),
		"GET /api/v1/me/apps":                        fixed(api + "/me/apps"),
		"PUT /api/v1/me/favorites/{appID}": func(t *testing.T, actor, _ *principal) call {
			return call{path: api + "/me/favorites/" + m.openableApp(t, actor)}
		},
		"DELETE /api/v1/me/favorites/{appID}": func(t *testing.T, actor, _ *principal) call {
			app := m.openableApp(t, actor)
			if actor.token != "" {
				h.send("PUT", api+"/me/favorites/"+app, "", actor.bearer()...)
			}
			return call{path: api + "/me/favorites/" + app}
		},
		"POST /api/v1/me/sections": withBody(api+"/me/sections", func() string { return jsonOf(map[string]string{"name": uniq("Section")}) }),
		"PATCH /api/v1/me/sections/{sectionID}": func(t *testing.T, actor, _ *principal) call {
			return call{path: api + "/me/sections/" + m.sectionOf(t, actor), body: jsonOf(map[string]string{"name": uniq("Renamed")})}
		},
		"DELETE /api/v1/me/sections/{sectionID}": func(t *testing.T, actor, _ *principal) call {
			return call{path: api + "/me/sections/" + m.sectionOf(t, actor)}
		},
		"PUT /api/v1/me/sections/{sectionID}/apps/{appID}": func(t *testing.T, actor, _ *principal) call {
			return call{path: api + "/me/sections/" + m.sectionOf(t, actor) + "/apps/" + m.openableApp(t, actor)}
		},
		"DELETE /api/v1/me/sections/{sectionID}/apps/{appID}": func(t *testing.T, actor, _ *principal) call {
			sec, app := m.sectionOf(t, actor), m.openableApp(t, actor)
			if actor.token != "" {
				h.send("PUT", api+"/me/sections/"+sec+"/apps/"+app, "", actor.bearer()...)
			}
			return call{path: api + "/me/sections/" + sec + "/apps/" + app}
		},
		"PATCH /api/v1/apps/{appID}": func(*testing.T, *principal, *principal) call {
			return call{path: api + "/apps/" + m.appID, body: jsonOf(map[string]string{"name": uniq("Matrix")})}
		},
		"POST /api/v1/apps/{appID}/detection/rerun": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.detectedApp(t) + "/detection/rerun"}
		},
		"POST /api/v1/apps/{appID}/detection/answers": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.detectedApp(t) + "/detection/answers", body: `{"answers":{"port":"3000"}}`}
		},
		"POST /api/v1/apps/{appID}/detection/accept": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.detectedApp(t) + "/detection/accept", body: `{"confirm":true}`}
		},
		"POST /api/v1/apps/{appID}/plan": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.appID + "/plan", body: `{}`}
		},
		"GET /api/v1/apps":  fixed(api + "/apps"),
		"POST /api/v1/apps": withBody(api+"/apps", func() string { return jsonOf(map[string]string{"name": uniq("Matrix App")}) }),
		"DELETE /api/v1/apps/{appID}": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.cloneApp(t)}
		},
		"PUT /api/v1/apps/{appID}/secrets/{key}": func(*testing.T, *principal, *principal) call {
			return call{path: api + "/apps/" + m.appID + "/secrets/MATRIX_KEY", body: `{"value":"matrix-value"}`}
		},
		"DELETE /api/v1/apps/{appID}/secrets/{key}": func(t *testing.T, _, _ *principal) call {
			key := strings.ReplaceAll(strings.ToUpper(uniq("GONE")), "-", "_")
			h.putSecret(t, m.appID, key, "to-delete")
			return call{path: api + "/apps/" + m.appID + "/secrets/" + key}
		},
		"POST /api/v1/apps/{appID}/source": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.appID + "/source", body: string(tinyApp(t)), header: []string{"Content-Type", "application/gzip"}}
		},
		"GET /api/v1/apps/{appID}/secrets/{key}/value": func(t *testing.T, _, _ *principal) call {
			h.putSecret(t, m.appID, "READ_ME", "read-value")
			return call{path: api + "/apps/" + m.appID + "/secrets/READ_ME/value"}
		},
		"GET /api/v1/apps/{appID}/icon": fixed(api + "/apps/" + m.appID + "/icon"),
		"PUT /api/v1/apps/{appID}/icon": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.appID + "/icon", body: string(testPNG(t, 7))}
		},
		"DELETE /api/v1/apps/{appID}/icon": func(t *testing.T, _, _ *principal) call {
			if a := h.putIcon(t, m.appID, testPNG(t, 8)); a.status != http.StatusOK {
				t.Fatalf("set an icon to delete: %d %s", a.status, a.body)
			}
			return call{path: api + "/apps/" + m.appID + "/icon"}
		},
		"POST /api/v1/apps/{appID}/specs": withBody(api+"/apps/"+m.appID+"/specs", func() string { return specExampleJSON }),
		"GET /api/v1/apps/{appID}/specs/{rev}": func(t *testing.T, _, _ *principal) call {
			return call{path: fmt.Sprintf("%s/apps/%s/specs/%d", api, m.appID, h.specRevision(t, m.appID))}
		},
		"POST /api/v1/apps/{appID}/specs/{rev}/pin": func(t *testing.T, _, _ *principal) call {
			return call{path: fmt.Sprintf("%s/apps/%s/specs/%d/pin", api, m.appID, h.specRevision(t, m.appID))}
		},
		"GET /api/v1/apps/{appID}/specs/{a}/diff/{b}": func(t *testing.T, _, _ *principal) call {
			a := h.specRevision(t, m.appID)
			return call{path: fmt.Sprintf("%s/apps/%s/specs/%d/diff/%d", api, m.appID, a, h.specRevision(t, m.appID))}
		},
		"GET /api/v1/apps/{appID}/slots":   fixed(api + "/apps/" + m.appID + "/slots"),
		"GET /api/v1/apps/{appID}/volumes": fixed(api + "/apps/" + m.appID + "/volumes"),
		"PUT /api/v1/apps/{appID}/slots/{key}": func(t *testing.T, _, _ *principal) call {
			h.specRevision(t, m.appID) // declares the slot db
			return call{path: api + "/apps/" + m.appID + "/slots/db", body: `{"value":{"url":"postgres://matrix:matrix-pw@db.internal/matrix"}}`}
		},
		"POST /api/v1/apps/{appID}/volumes": func(t *testing.T, _, _ *principal) call {
			h.specRevision(t, m.appID) // a latest revision to add the volume to
			name := uniq("vol")
			return call{path: api + "/apps/" + m.appID + "/volumes", body: jsonOf(map[string]any{"name": name, "size_bytes": 1 << 20, "path": "/" + name})}
		},
		"GET /api/v1/volumes": fixed(api + "/volumes"),
		"GET /api/v1/backups": fixed(api + "/backups"),
		"POST /api/v1/backups": func(t *testing.T, _, _ *principal) call {
			app := h.app(t, uniq("Backed"))
			h.specRevision(t, app)
			h.send("POST", api+"/apps/"+app+"/volumes", `{"name":"files","path":"/files"}`)
			return call{path: api + "/backups", body: jsonOf(map[string]string{"app_id": app})}
		},
		"GET /api/v1/backups/{backupID}": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/backups/" + h.backedUp(t, h.app(t, uniq("Backed")))}
		},
		"POST /api/v1/backups/{backupID}/verify": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/backups/" + h.backedUp(t, h.app(t, uniq("Backed"))) + "/verify"}
		},
		"POST /api/v1/backups/{backupID}/restore": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/backups/" + h.backedUp(t, h.app(t, uniq("Backed"))) + "/restore"}
		},
		"POST /api/v1/apps/{appID}/restore": func(t *testing.T, _, _ *principal) call {
			app := m.cloneApp(t)
			return call{path: api + "/apps/" + app + "/restore", body: jsonOf(map[string]string{"backup_id": h.backedUp(t, app)})}
		},
		"DELETE /api/v1/volumes/{volumeID}": func(t *testing.T, _, _ *principal) call {
			_, id := h.keptVolume(t, uniq("Kept"))
			return call{path: api + "/volumes/" + id}
		},
		"GET /api/v1/events":        fixed(api + "/events"),
		"GET /api/v1/subscriptions": fixed(api + "/subscriptions"),
		"POST /api/v1/subscriptions": func(t *testing.T, actor, _ *principal) call {
			return call{path: api + "/subscriptions", body: jsonOf(map[string]any{"app_id": m.viewedApp(t, actor), "events": []string{"deploy.*"}, "url": "https://hooks.example.com/svc"})}
		},
		"GET /api/v1/subscriptions/{subscriptionID}": func(t *testing.T, _, owner *principal) call {
			return call{path: api + "/subscriptions/" + m.subscriptionOf(t, owner)}
		},
		"PATCH /api/v1/subscriptions/{subscriptionID}": func(t *testing.T, _, owner *principal) call {
			return call{path: api + "/subscriptions/" + m.subscriptionOf(t, owner), body: `{"events":["app.*"]}`}
		},
		"DELETE /api/v1/subscriptions/{subscriptionID}": func(t *testing.T, _, owner *principal) call {
			return call{path: api + "/subscriptions/" + m.subscriptionOf(t, owner)}
		},
		"POST /api/v1/subscriptions/{subscriptionID}/rotate-key": func(t *testing.T, _, owner *principal) call {
			return call{path: api + "/subscriptions/" + m.subscriptionOf(t, owner) + "/rotate-key"}
		},
		"POST /api/v1/subscriptions/{subscriptionID}/test": func(t *testing.T, _, owner *principal) call {
			return call{path: api + "/subscriptions/" + m.subscriptionOf(t, owner) + "/test"}
		},
		"GET /api/v1/subscriptions/{subscriptionID}/deliveries": func(t *testing.T, _, owner *principal) call {
			return call{path: api + "/subscriptions/" + m.subscriptionOf(t, owner) + "/deliveries"}
		},
		"GET /api/v1/subscriptions/{subscriptionID}/deliveries/{deliveryID}": func(t *testing.T, _, owner *principal) call {
			sub, dlv := m.deliveryOf(t, owner)
			return call{path: api + "/subscriptions/" + sub + "/deliveries/" + dlv}
		},
		"POST /api/v1/subscriptions/{subscriptionID}/deliveries/{deliveryID}/resend": func(t *testing.T, _, owner *principal) call {
			sub, dlv := m.deliveryOf(t, owner)
			return call{path: api + "/subscriptions/" + sub + "/deliveries/" + dlv + "/resend"}
		},
		"GET /api/v1/adapters":       fixed(api + "/adapters"),
		"GET /api/v1/adapters/kinds": fixed(api + "/adapters/kinds"),
		"POST /api/v1/adapters":      withBody(api+"/adapters", func() string { return `{"category":"runtime","kind":"process"}` }),
		"DELETE /api/v1/adapters/{adapterID}": func(t *testing.T, _, _ *principal) call {
			// A slots adapter of its own for each request: nothing depends
			// on it, so the one allowed request deletes it.
			a := h.send("POST", api+"/adapters", `{"new":true,"category":"slots","kind":"postgres","config":{"host":"db.internal","username":"svc_admin"},"credentials":{"password":"matrix-pw"}}`)
			if a.status != http.StatusCreated {
				t.Fatalf("configure an adapter to delete: %d %s", a.status, a.body)
			}
			return call{path: api + "/adapters/" + decodeAs[adapterAnswer](t, a).Adapter.AdapterID}
		},
		"GET /api/v1/keyring":         fixed(api + "/keyring"),
		"POST /api/v1/keyring/rotate": fixed(api + "/keyring/rotate"),

		// The edge's signing keys and the JWKS.
		"GET /api/v1/edge/keys":         fixed(api + "/edge/keys"),
		"POST /api/v1/edge/keys/rotate": fixed(api + "/edge/keys/rotate"),
		"GET /.well-known/jwks.json":    fixed("/.well-known/jwks.json"),

		// Deploys and running apps, on apps prepared for each (shared as
		// the matrix's app is); one a successful request used up is made
		// again for the next.
		"POST /api/v1/apps/{appID}/deployments": func(t *testing.T, _, _ *principal) call {
			r := m.readyFor(t, "deployable", func(t *testing.T) readyApp { return readyApp{app: h.pinnedApp(t, "matrix deploy", siteSpec("", 0))} })
			return call{path: api + "/apps/" + r.app + "/deployments", body: `{}`, after: m.usedUp("deployable")}
		},
		"POST /api/v1/apps/{appID}/deployments/rollback": func(t *testing.T, _, _ *principal) call {
			r := m.readyFor(t, "rollback", m.rolledApp)
			return call{path: api + "/apps/" + r.app + "/deployments/rollback", after: m.usedUp("rollback")}
		},
		"POST /api/v1/apps/{appID}/deployments/{depID}/approve": func(t *testing.T, _, _ *principal) call {
			r := m.readyFor(t, "approve", m.heldApp)
			return call{path: api + "/apps/" + r.app + "/deployments/" + r.dep + "/approve", after: m.usedUp("approve")}
		},
		"POST /api/v1/apps/{appID}/deployments/{depID}/reject": func(t *testing.T, _, _ *principal) call {
			r := m.readyFor(t, "reject", m.heldApp)
			return call{path: api + "/apps/" + r.app + "/deployments/" + r.dep + "/reject", body: `{"reason":"matrix"}`, after: m.usedUp("reject")}
		},
		"GET /api/v1/apps/{appID}/deployments/{depID}": func(t *testing.T, _, _ *principal) call {
			r := m.readyFor(t, "deployed", m.deployedApp)
			return call{path: api + "/apps/" + r.app + "/deployments/" + r.dep}
		},
		"GET /api/v1/apps/{appID}/deployments/{depID}/logs": func(t *testing.T, _, _ *principal) call {
			r := m.readyFor(t, "deployed", m.deployedApp)
			return call{path: api + "/apps/" + r.app + "/deployments/" + r.dep + "/logs"}
		},
		"POST /api/v1/apps/{appID}/start": fixed(api + "/apps/" + m.appID + "/start"),
		"POST /api/v1/apps/{appID}/stop":  fixed(api + "/apps/" + m.appID + "/stop"),
		"POST /api/v1/apps/{appID}/restart": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.readyFor(t, "deployed", m.deployedApp).app + "/restart"}
		},
		"GET /api/v1/apps/{appID}/status": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.readyFor(t, "deployed", m.deployedApp).app + "/status"}
		},
		// Security: a scan of an app with a pinned revision (it runs in
		// the background; TestSecurityAPI waits for one).
		"GET /api/v1/apps/{appID}/security": fixed(api + "/apps/" + m.appID + "/security"),
		"POST /api/v1/apps/{appID}/security/scan": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.readyFor(t, "deployed", m.deployedApp).app + "/security/scan"}
		},
		"GET /api/v1/apps/{appID}/usage": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.readyFor(t, "deployed", m.deployedApp).app + "/usage"}
		},
		"GET /api/v1/apps/{appID}/logs": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.readyFor(t, "deployed", m.deployedApp).app + "/logs"}
		},
		// A plain GET: the holder is let through and told to upgrade (426);
		// TestExecAPI and the audit test open real terminals.
		"GET /api/v1/apps/{appID}/exec": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.readyFor(t, "deployed", m.deployedApp).app + "/exec"}
		},
		// Sharing. Grants are to fresh accounts; a role change is between
		// two roles holding only app.grants.manage, which any holder of the
		// verb may give. The passcode routes answer NOT_FOUND here (the
		// harness's public_sharing is none); TestSharingAPI covers them.
		"GET /api/v1/apps/{appID}/grants": fixed(api + "/apps/" + m.appID + "/grants"),
		"POST /api/v1/apps/{appID}/grants": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.appID + "/grants", body: jsonOf(map[string]string{"plane": "data", "principal_kind": "user", "principal_id": victim(t).userID})}
		},
		"PATCH /api/v1/apps/{appID}/grants/{grantID}": func(t *testing.T, _, _ *principal) call {
			from, to := m.sharerRoles(t)
			g := h.grantTo(t, m.appID, identity.PlaneControl, authz.KindUser, victim(t).userID, &from)
			return call{path: api + "/apps/" + m.appID + "/grants/" + g, body: jsonOf(map[string]string{"role_id": to})}
		},
		"DELETE /api/v1/apps/{appID}/grants/{grantID}": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/apps/" + m.appID + "/grants/" + h.grantTo(t, m.appID, identity.PlaneData, authz.KindUser, victim(t).userID, nil)}
		},
		"GET /api/v1/apps/{appID}/principals": fixed(api + "/apps/" + m.appID + "/principals?q=victim"),
		"GET /api/v1/apps/{appID}/passcode":   fixed(api + "/apps/" + m.appID + "/passcode"),
		"POST /api/v1/apps/{appID}/passcode":  withBody(api+"/apps/"+m.appID+"/passcode", func() string { return `{"passcode":"matrix-passcode"}` }),
		"GET /api/v1/users/{userID}/apps": func(_ *testing.T, _, owner *principal) call {
			return call{path: api + "/users/" + owner.userID + "/apps"}
		},
		"GET /api/v1/groups/{groupID}/apps": func(t *testing.T, _, _ *principal) call {
			return call{path: api + "/groups/" + h.group(t, nil) + "/apps"}
		},
		"GET /api/v1/capacity":   fixed(api + "/capacity"),
		"GET /healthz":           fixed("/healthz"),
		"GET /account/{page...}": fixed("/account/password"),
		"GET /apps":              fixed("/apps"),
		"GET /apps/{page...}":    fixed("/apps/" + m.appID),
		"GET /admin/{page...}":   fixed("/admin/"),
		"GET /assets/{file...}":  fixed("/assets/index.js"),
		"GET /readyz":            fixed("/readyz"),
		"GET /metrics":           fixed("/metrics"),
	}
}

// generic builds a request for a route without its own builder when every
// path parameter is one the matrix can fill: {appID}, so that app-scope
// routes are exercised as they are added.
func (m *matrix) generic(r route) (buildFn, bool) {
	path := fill(r.path, "appID", m.appID)
	if strings.Contains(path, "{") {
		return nil, false
	}
	body := ""
	if r.request != nil {
		body = "{}"
	}
	return func(*testing.T, *principal, *principal) call { return call{path: path, body: body} }, true
}

// withoutObject returns the path built for route with the object it names
// (its last path parameter) replaced by a well-formed ID of the same kind
// that names nothing.
func withoutObject(t *testing.T, route, path string) string {
	t.Helper()
	rs, ps := strings.Split(route, "/"), strings.Split(path, "/")
	for i := len(rs) - 1; i >= 0 && len(rs) == len(ps); i-- {
		if strings.HasPrefix(rs[i], "{") {
			prefix, _, _ := strings.Cut(ps[i], "_")
			ps[i] = ids.New(ids.Prefix(prefix))
			return strings.Join(ps, "/")
		}
	}
	t.Fatalf("%s names no object in %s", path, route)
	return ""
}

// exercise checks one route as every principal class its access rule
// names. It reports whether the route was exercised.
//
// A refusal must write no audit entry: the entries requests wrote (with a
// request ID) are counted around it, not those of the server's own loops
// (a rolling backup scheduled meanwhile), which have none.
func (m *matrix) exercise(t *testing.T, r route) bool {
	build, ok := m.build[r.method+" "+r.path]
	if !ok {
		if build, ok = m.generic(r); !ok {
			t.Errorf("the matrix has no request for %s %s: add one to builders", r.method, r.path)
			return false
		}
	}
	h := m.h
	sendCall := func(class string, c call, auth ...string) answer {
		t.Helper()
		before := requestEntries(h.auditEntries(t))
		a := h.send(r.method, c.path, c.body, append(auth, c.header...)...)
		if c.after != nil {
			c.after(a)
		}
		m.checks++
		m.byClass[class]++
		if code := codeOf(a); isRefusal(code) {
			if after := requestEntries(h.auditEntries(t)); after != before {
				t.Errorf("%s: the refusal %s wrote %d audit entries", class, code, after-before)
			}
		}
		return a
	}
	send := func(class string, actor, owner *principal, auth ...string) answer {
		t.Helper()
		return sendCall(class, build(t, actor, owner), auth...)
	}
	notRefused := func(class string, a answer) {
		t.Helper()
		if code := codeOf(a); isRefusal(code) || a.status >= 500 {
			t.Errorf("%s: refused or failed: %d %s", class, a.status, a.body)
		} else if a.status >= 300 {
			t.Logf("%s: allowed, and the handler answered %d %s", class, a.status, a.body)
		}
	}
	refused := func(class string, a answer, status int, code errcode.Code) {
		t.Helper()
		e := wantError(t, class, a, status, code)
		if code == errcode.PermVerbRequired && e.Details["verb"] != string(r.verb) {
			t.Errorf("%s: details.verb = %v, want %s", class, e.Details["verb"], r.verb)
		}
	}
	anon := &principal{name: "anonymous", password: "not-the-password-1"}

	// Anonymous, and a credential that is not valid.
	a := send("anonymous", anon, m.noVerbs, "Authorization", "")
	b := send("unknown token", anon, m.noVerbs, "Authorization", "Bearer "+m.badToken)
	if r.access == accessPublic {
		notRefused("anonymous", a)
		notRefused("unknown token on a public route", b)
		return true
	}
	refused("anonymous", a, http.StatusUnauthorized, errcode.AuthRequired)
	refused("unknown token", b, http.StatusUnauthorized, errcode.AuthTokenInvalid)

	switch r.access {
	case accessSignedIn:
		notRefused("signed in without verbs", send("no verbs", m.noVerbs, m.noVerbs, m.noVerbs.bearer()...))

	case accessVerb:
		if scope, _ := authz.ScopeOf(r.verb); scope == authz.ScopeApp {
			// An app the caller cannot see answers NOT_FOUND; one it can see
			// without the verb PERM_VERB_REQUIRED.
			refused("no verbs", send("no verbs", m.noVerbs, m.noVerbs, m.noVerbs.bearer()...), http.StatusNotFound, errcode.NotFound)
			refused("service token", send("service token", m.service, m.service, m.service.bearer()...), http.StatusNotFound, errcode.NotFound)
			other := m.h.account(t, "otherapp", nil, true)
			m.h.grantApp(t, m.otherApp, authz.KindUser, other.userID, m.h.role(t, authz.ScopeApp, r.verb))
			refused("the verb on another app", send("verb elsewhere", other, other, other.bearer()...), http.StatusNotFound, errcode.NotFound)
			ab := m.allButHolder(t, r.verb)
			refused("every verb but this one", send("all but", ab, ab, ab.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
			p := m.holder(t, r.verb)
			notRefused("holder of the verb on the app", send("holder", p, p, p.bearer()...))
			// Shared with a group the caller is in, and with a service token.
			g := m.h.account(t, "groupmember", nil, true)
			m.h.grantApp(t, m.appID, "group", m.h.group(t, nil, g.userID), m.h.role(t, authz.ScopeApp, r.verb))
			notRefused("holder through a group", send("holder", g, g, g.bearer()...))
			st := m.h.serviceToken(t)
			m.h.grantApp(t, m.appID, authz.KindToken, st.tokenID, m.h.role(t, authz.ScopeApp, r.verb))
			notRefused("service token it is shared with", send("holder", st, st, st.bearer()...))
			return true
		}
		refused("no verbs", send("no verbs", m.noVerbs, m.noVerbs, m.noVerbs.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
		refused("service token", send("service token", m.service, m.service, m.service.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
		ab := m.allButHolder(t, r.verb)
		refused("every verb but this one", send("all but", ab, ab, ab.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
		p := m.holder(t, r.verb)
		notRefused("holder of only this verb", send("holder", p, p, p.bearer()...))

	case accessSelf:
		// An installation resource: its own needs no verb; anyone else's
		// needs the verb, and without it the answer is PERM_VERB_REQUIRED
		// whether or not the object exists (visibility is an app-level
		// notion: API.md); with it, an object that does not exist is
		// NOT_FOUND.
		someone := func() *principal { return m.h.account(t, "someone", nil, true) }
		missing := func(class string, p *principal) answer {
			t.Helper()
			c := build(t, p, someone())
			c.path = withoutObject(t, r.path, c.path)
			return sendCall(class, c, p.bearer()...)
		}
		ab := m.allButHolder(t, r.verb)
		for _, c := range []struct {
			class string
			p     *principal
		}{{"no verbs", m.noVerbs}, {"service token", m.service}, {"every verb but this one", ab}} {
			refused(c.class+" on someone else's", send(c.class, c.p, someone(), c.p.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
			refused(c.class+" on one that does not exist", missing(c.class, c.p), http.StatusForbidden, errcode.PermVerbRequired)
		}
		notRefused("no verbs on its own", send("own", m.noVerbs, m.noVerbs, m.noVerbs.bearer()...))
		p := m.holder(t, r.verb)
		notRefused("holder of the verb on someone else's", send("holder", p, someone(), p.bearer()...))
		admin := m.h.adminPrincipal()
		wantError(t, "the administrator on one that does not exist", missing("admin", admin), http.StatusNotFound, errcode.NotFound)

	case accessOpen:
		// Whoever may open the app (a data-plane grant) or holds any verb on
		// it; to anyone else the app does not exist.
		stranger := m.h.account(t, "stranger", nil, true)
		refused("no grant", send("no verbs", stranger, stranger, stranger.bearer()...), http.StatusNotFound, errcode.NotFound)
		refused("service token", send("service token", m.service, m.service, m.service.bearer()...), http.StatusNotFound, errcode.NotFound)
		elsewhere := m.h.account(t, "openelsewhere", nil, true)
		m.h.grantOpen(t, m.otherApp, authz.KindUser, elsewhere.userID, false)
		refused("a data-plane grant on another app", send("open elsewhere", elsewhere, elsewhere, elsewhere.bearer()...), http.StatusNotFound, errcode.NotFound)
		opener := m.h.account(t, "opener", nil, true)
		m.h.grantOpen(t, m.appID, authz.KindUser, opener.userID, false)
		notRefused("a data-plane grant only", send("opener", opener, opener, opener.bearer()...))
		p := m.holder(t, authz.AppView)
		notRefused("a verb on the app", send("holder", p, p, p.bearer()...))

	default:
		t.Errorf("access %s is not covered by the matrix", r.access)
		return false
	}
	return true
}

func TestAuthorizationMatrix(t *testing.T) {
	h := newHarness(t)
	m := newMatrix(t, h)
	routes := slices.Clone(h.srv.routes)
	covered := map[string]bool{}
	for _, r := range routes {
		key := r.method + " " + r.path
		t.Run(key, func(t *testing.T) {
			if m.exercise(t, r) {
				covered[key] = true
			}
		})
	}

	// Two stand-in routes registered after the table show that the matrix
	// and authorize handle app verbs on any route.
	t.Run("app-scope stand-ins", func(t *testing.T) {
		ok := func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) }
		for _, r := range []route{
			{method: get, path: api + "/apps/{appID}/matrix-view", op: "matrix_view", access: accessVerb, verb: authz.AppView, handler: ok},
			{method: post, path: api + "/apps/{appID}/matrix-deploy", op: "matrix_deploy", access: accessVerb, verb: authz.AppDeploy, handler: ok},
		} {
			if err := h.srv.register(r); err != nil {
				t.Fatal(err)
			}
			t.Run(r.method+" "+r.path, func(t *testing.T) {
				if !m.exercise(t, r) {
					t.Error("not exercised")
				}
			})
		}
	})

	t.Run("host policy floor", func(t *testing.T) { testPolicyFloor(t, h, m) })

	var missing []string
	for _, r := range routes {
		if !covered[r.method+" "+r.path] {
			missing = append(missing, r.method+" "+r.path)
		}
	}
	if len(covered) != len(routes) {
		t.Errorf("the matrix exercised %d of %d routes; not exercised: %v", len(covered), len(routes), missing)
	}
	t.Logf("matrix: %d routes, %d requests; by principal class: %v", len(routes), m.checks, m.byClass)
}

// testPolicyFloor: host policy's disabled_verbs is a floor under every
// principal, agent_disabled_verbs under agent tokens only.
func testPolicyFloor(t *testing.T, h *harness, m *matrix) {
	viewer := m.holder(t, authz.InstallView)
	putPolicy := func(body string) {
		t.Helper()
		if a := h.send("PUT", api+"/policy", body); a.status != http.StatusOK {
			t.Fatalf("PUT /policy %s: %d %s", body, a.status, a.body)
		}
	}
	users := func(p *principal) answer { return h.send("GET", api+"/users", "", p.bearer()...) }
	wantStatus(t, "install.view before the policy", users(viewer), http.StatusOK)

	putPolicy(`{"policy":{"disabled_verbs":["install.view"]}}`)
	e := wantError(t, "install.view disabled, its holder", users(viewer), http.StatusForbidden, errcode.PermVerbRequired)
	if e.Details["verb"] != "install.view" {
		t.Errorf("details = %v", e.Details)
	}
	wantError(t, "install.view disabled, the administrator", users(h.adminPrincipal()), http.StatusForbidden, errcode.PermVerbRequired)
	me := decodeAs[meDTO](t, h.send("GET", api+"/me", ""))
	if slices.Contains(me.Verbs, authz.InstallView) || !slices.Contains(me.Verbs, authz.InstallPolicyManage) {
		t.Errorf("GET /me verbs under the floor = %v", me.Verbs)
	}
	// Own account: no verb needed, so the floor does not take it away.
	wantStatus(t, "own account under the floor", h.send("GET", api+"/users/"+viewer.userID, "", viewer.bearer()...), http.StatusOK)

	putPolicy(`{"policy":{"agent_disabled_verbs":["install.view"]}}`)
	wantStatus(t, "agent_disabled_verbs, a person's token", users(viewer), http.StatusOK)
	a := h.send("POST", api+"/tokens", `{"name":"assistant","agent":true}`, viewer.bearer()...)
	if a.status != http.StatusCreated {
		t.Fatalf("mint an agent token: %d %s", a.status, a.body)
	}
	agent := &principal{name: "agent", token: decodeAs[tokenAnswer](t, a).Secret}
	wantError(t, "agent_disabled_verbs, an agent token", users(agent), http.StatusForbidden, errcode.PermVerbRequired)
	// A token minted by an agent token is an agent token too.
	a = h.send("POST", api+"/tokens", `{"name":"laundered","agent":false}`, agent.bearer()...)
	if a.status != http.StatusCreated {
		t.Fatalf("mint a token with an agent token: %d %s", a.status, a.body)
	}
	child := decodeAs[tokenAnswer](t, a)
	if !child.Token.Agent {
		t.Errorf("a token minted by an agent token is not an agent token: %s", a.body)
	}
	wantError(t, "agent_disabled_verbs, a token minted by an agent", users(&principal{token: child.Secret}), http.StatusForbidden, errcode.PermVerbRequired)
	// The same verb through an app route: the floor applies to app verbs too.
	app := m.holder(t, authz.AppView)
	agentApp := &principal{token: h.delegatedToken(t, app.userID, true)}
	putPolicy(`{"policy":{"agent_disabled_verbs":["app.view"]}}`)
	if r := m.appRoute(); r != "" {
		wantStatus(t, "app.view, a person", h.send("GET", r, "", app.bearer()...), http.StatusOK)
		if a := h.send("GET", r, "", agentApp.bearer()...); a.status < 400 {
			t.Errorf("app.view disabled for agents, an agent token holding it: %d %s", a.status, a.body)
		}
	}
	putPolicy(`{"policy":{}}`)
	wantStatus(t, "floor lifted", users(agent), http.StatusOK)
}

// appRoute is the path of the app-scope stand-in that needs app.view.
func (m *matrix) appRoute() string {
	for _, r := range m.h.srv.routes {
		if r.verb == authz.AppView && strings.Contains(r.path, "{appID}") && r.method == get {
			return fill(r.path, "appID", m.appID)
		}
	}
	return ""
}

// readyFor returns the app prepared for purpose, preparing it first when
// there is none, shared on the control plane as the matrix's app is now.
func (m *matrix) readyFor(t *testing.T, purpose string, prepare func(*testing.T) readyApp) readyApp {
	t.Helper()
	if m.ready == nil {
		m.ready = map[string]readyApp{}
	}
	r, ok := m.ready[purpose]
	if !ok {
		r = prepare(t)
		m.ready[purpose] = r
	}
	m.shareLike(t, r.app)
	return r
}

// usedUp drops the app prepared for purpose once a request succeeded on it
// (its deploy runs, its held deploy was decided), so the next gets a fresh
// one.
func (m *matrix) usedUp(purpose string) func(answer) {
	return func(a answer) {
		if a.status < 300 {
			delete(m.ready, purpose)
		}
	}
}

// shareLike gives app every control-plane grant the matrix's app has that
// it lacks.
func (m *matrix) shareLike(t *testing.T, app string) {
	t.Helper()
	r := m.h.store.Read()
	key := func(g identity.Grant) string { return g.PrincipalKind + "/" + g.PrincipalID + "/" + deref(g.RoleID) }
	have := map[string]bool{}
	gs, _ := identity.Grants.List(r, raftstore.Query{Index: "app", Key: app})
	for _, g := range gs {
		have[key(g.Value)] = true
	}
	src, _ := identity.Grants.List(r, raftstore.Query{Index: "app", Key: m.appID})
	for _, g := range src {
		if g.Value.Plane == identity.PlaneControl && g.Value.RoleID != nil && !have[key(g.Value)] {
			m.h.grantApp(t, app, g.Value.PrincipalKind, g.Value.PrincipalID, *g.Value.RoleID)
		}
	}
}

// deployedApp is an app that runs a deployment that succeeded.
func (m *matrix) deployedApp(t *testing.T) readyApp {
	app := m.h.pinnedApp(t, "matrix deployed", siteSpec("", 0))
	d := m.h.deployed(t, app)
	m.h.waitAppState(t, app, apps.StateRunning)
	return readyApp{app: app, dep: d.ID}
}

// rolledApp is an app with two successful deploys of two revisions: a
// rollback has somewhere to go.
func (m *matrix) rolledApp(t *testing.T) readyApp {
	r := m.deployedApp(t)
	rev := m.h.writeSpec(t, r.app, siteSpec("echo two", 0))
	d := m.h.waitDeployment(t, r.app, m.h.deploy(t, r.app, fmt.Sprintf(`{"revision":%d}`, rev)).ID)
	if d.State != scheduler.DepSucceeded {
		t.Fatalf("second deploy: %+v", d)
	}
	return r
}

// heldApp is an app with a deploy waiting for an approval, asked for by
// the matrix's requester (so that anyone else may decide it).
func (m *matrix) heldApp(t *testing.T) readyApp {
	if m.requester == nil {
		m.requester = m.h.account(t, "requester", nil, true)
	}
	app := m.h.pinnedApp(t, "matrix held", siteSpec("", 1))
	m.h.grantApp(t, app, authz.KindUser, m.requester.userID, authz.RoleDeveloper)
	d := m.h.deploy(t, app, `{}`, m.requester.bearer()...)
	if d.State != scheduler.DepWaitingApproval {
		t.Fatalf("held deploy: %+v", d)
	}
	return readyApp{app: app, dep: d.ID}
}

// cloneApp creates an app shared exactly as the matrix's app is, for
// requests that destroy the app they are sent to.
func (m *matrix) cloneApp(t *testing.T) string {
	t.Helper()
	id := m.h.app(t, "matrix clone")
	grants, _ := identity.Grants.List(m.h.store.Read(), raftstore.Query{Index: "app", Key: m.appID})
	for _, g := range grants {
		if g.Value.Plane == identity.PlaneControl && g.Value.RoleID != nil {
			m.h.grantApp(t, id, g.Value.PrincipalKind, g.Value.PrincipalID, *g.Value.RoleID)
		}
	}
	return id
}

// openableApp creates an app that actor can open (a data-plane grant to its
// account, or to the service token itself).
func (m *matrix) openableApp(t *testing.T, actor *principal) string {
	t.Helper()
	id := m.h.app(t, "launcher")
	switch {
	case actor.userID != "":
		m.h.openGrant(t, id, authz.KindUser, actor.userID)
	case actor.tokenID != "":
		m.h.openGrant(t, id, authz.KindToken, actor.tokenID)
	}
	return id
}

// sectionOf creates a section in actor's launcher (an unknown ID for a
// caller without a credential).
func (m *matrix) sectionOf(t *testing.T, actor *principal) string {
	t.Helper()
	if actor.token == "" {
		return ids.New(ids.Section)
	}
	a := m.h.send("POST", api+"/me/sections", jsonOf(map[string]string{"name": uniq("Section")}), actor.bearer()...)
	if a.status != http.StatusCreated {
		t.Fatalf("create a section: %d %s", a.status, a.body)
	}
	return decodeAs[sectionAnswer](t, a).Section.ID
}

// detectedApp gives the matrix's app a source once, so that detection has
// a proposal, and returns its ID.
func (m *matrix) detectedApp(t *testing.T) string {
	t.Helper()
	if !m.detected {
		a := m.h.upload(api+"/apps/"+m.appID+"/source", "application/gzip", nodeApp(t))
		if a.status != http.StatusAccepted {
			t.Fatalf("upload the matrix app's source: %d %s", a.status, a.body)
		}
		m.detected = true
	}
	return m.appID
}

// viewedApp is a fresh app the principal holds app.view on (the viewer
// role), for subscribing to its events.
func (m *matrix) viewedApp(t *testing.T, p *principal) string {
	t.Helper()
	id := m.cloneApp(t)
	switch {
	case p.userID != "":
		m.h.grantApp(t, id, authz.KindUser, p.userID, authz.RoleViewer)
	case p.tokenID != "":
		m.h.grantApp(t, id, authz.KindToken, p.tokenID, authz.RoleViewer)
	}
	return id
}

// subscriptionOf is a new subscription the principal owns, on an app it
// views.
func (m *matrix) subscriptionOf(t *testing.T, owner *principal) string {
	t.Helper()
	if owner.token == "" && owner.userID == "" {
		return ids.New(ids.Subscription)
	}
	body := jsonOf(map[string]any{"app_id": m.viewedApp(t, owner), "events": []string{"*"}, "url": "https://hooks.example.com/matrix"})
	if owner.token == "" { // an account without a token: made as it would be
		var req subscriptions.Request
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		c, err := m.h.srv.d.Subscriptions.Create(context.Background(), userCaller(owner.userID), req)
		if err != nil {
			t.Fatalf("create a subscription: %v", err)
		}
		return c.Subscription.ID
	}
	a := m.h.send("POST", api+"/subscriptions", body, owner.bearer()...)
	if a.status != http.StatusCreated {
		t.Fatalf("create a subscription: %d %s", a.status, a.body)
	}
	return decodeAs[subscriptionCreated](t, a).Subscription.ID
}

// deliveryOf is a delivery (a test event's) of a new subscription the
// principal owns.
func (m *matrix) deliveryOf(t *testing.T, owner *principal) (string, string) {
	t.Helper()
	sub := m.subscriptionOf(t, owner)
	if owner.token == "" && owner.userID == "" {
		return sub, ids.New(ids.Delivery)
	}
	if owner.token == "" {
		d, err := m.h.srv.d.Subscriptions.Test(context.Background(), userCaller(owner.userID), sub)
		if err != nil {
			t.Fatalf("test a subscription: %v", err)
		}
		return sub, d.ID
	}
	a := m.h.send("POST", api+"/subscriptions/"+sub+"/test", "", owner.bearer()...)
	if a.status != http.StatusAccepted {
		t.Fatalf("test a subscription: %d %s", a.status, a.body)
	}
	return sub, decodeAs[deliveryAnswer](t, a).Delivery.ID
}

// requestEntries counts the audit entries requests wrote.
func requestEntries(es []audit.Entry) int {
	n := 0
	for _, e := range es {
		if e.RequestID != "" {
			n++
		}
	}
	return n
}
