package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/scheduler"
)

// listed is a list a filler made items for: where to ask for it, as whom,
// and whether it holds more items than a page (it could make them).
type listed struct {
	path string
	as   []string // the Authorization header to send; nil for the administrator
	many bool
}

// overAPage is how many items a filler makes: one more than a page.
const overAPage = defaultPageLimit + 1

// listFillers make more than a page of items for every list route (or, for
// a list this build fixes, say there are fewer) and name the list.
func listFillers(h *harness) map[string]func(t *testing.T) listed {
	var pool []string // apps for the lists of apps, made once
	appPool := func(t *testing.T) []string {
		for len(pool) < overAPage {
			pool = append(pool, h.app(t, fmt.Sprintf("Listed %02d", len(pool))))
		}
		return pool
	}
	many := func(t *testing.T, add func(i int)) {
		t.Helper()
		for i := range overAPage {
			add(i)
		}
	}
	post := func(t *testing.T, path, body string, status int) {
		t.Helper()
		if a := h.send("POST", path, body); a.status != status {
			t.Fatalf("POST %s: %d %s", path, a.status, a.body)
		}
	}
	document := func(part string, n int, value string) string {
		m := map[string]json.RawMessage{}
		for i := range n {
			m[fmt.Sprintf("%s%02d", part[:1], i)] = json.RawMessage(value)
		}
		return jsonOf(map[string]any{"spec": map[string]any{"workloads": map[string]any{"web": map[string]any{"build": map[string]string{"kind": "static"}}}, part: m}})
	}
	return map[string]func(t *testing.T) listed{
		"GET /api/v1/tokens": func(t *testing.T) listed {
			p := h.account(t, "tokens", nil, true)
			many(t, func(int) { h.delegatedToken(t, p.userID, false) })
			return listed{path: api + "/tokens", as: p.bearer(), many: true}
		},
		"GET /api/v1/events": func(t *testing.T) listed {
			return listed{path: api + "/events", many: false} // the catalogue's 43 names: less than a page
		},
		"GET /api/v1/subscriptions": func(t *testing.T) listed {
			many(t, func(i int) {
				post(t, api+"/subscriptions", jsonOf(map[string]any{"events": []string{"*"}, "url": fmt.Sprintf("https://hooks.example.com/%d", i)}), http.StatusCreated)
			})
			return listed{path: api + "/subscriptions", many: true}
		},
		"GET /api/v1/subscriptions/{subscriptionID}/deliveries": func(t *testing.T) listed {
			a := h.send("POST", api+"/subscriptions", `{"events":["policy.updated"],"url":"https://hooks.example.com/log"}`)
			if a.status != http.StatusCreated {
				t.Fatalf("subscribe: %d %s", a.status, a.body)
			}
			id := decodeAs[subscriptionCreated](t, a).Subscription.ID
			many(t, func(int) { post(t, api+"/subscriptions/"+id+"/test", "", http.StatusAccepted) })
			return listed{path: api + "/subscriptions/" + id + "/deliveries", many: true}
		},
		"GET /api/v1/tokens/service": func(t *testing.T) listed {
			many(t, func(int) { h.serviceToken(t) })
			return listed{path: api + "/tokens/service", many: true}
		},
		"GET /api/v1/users": func(t *testing.T) listed {
			many(t, func(int) { h.account(t, "listed", nil, false) })
			return listed{path: api + "/users", many: true}
		},
		"GET /api/v1/users/{userID}/apps": func(t *testing.T) listed {
			p := h.account(t, "granted", nil, false)
			for _, app := range appPool(t) {
				h.grantApp(t, app, authz.KindUser, p.userID, authz.RoleViewer)
			}
			return listed{path: api + "/users/" + p.userID + "/apps", many: true}
		},
		"GET /api/v1/groups": func(t *testing.T) listed {
			many(t, func(int) { h.group(t, nil) })
			return listed{path: api + "/groups", many: true}
		},
		"GET /api/v1/groups/{groupID}/apps": func(t *testing.T) listed {
			g := h.group(t, nil)
			for _, app := range appPool(t) {
				h.grantApp(t, app, "group", g, authz.RoleViewer)
			}
			return listed{path: api + "/groups/" + g + "/apps", many: true}
		},
		"GET /api/v1/roles": func(t *testing.T) listed {
			many(t, func(int) { h.role(t, authz.ScopeInstall, authz.InstallView) })
			return listed{path: api + "/roles?scope=all", many: true}
		},
		"GET /api/v1/adapters": func(t *testing.T) listed {
			many(t, func(int) {
				post(t, api+"/adapters", `{"new":true,"category":"slots","kind":"postgres","config":{"host":"db.internal","username":"svc_admin"},"credentials":{"password":"pw"}}`, http.StatusCreated)
			})
			return listed{path: api + "/adapters", many: true}
		},
		// The kinds this build can run are fixed by the build: fewer than
		// a page, paged as every list.
		"GET /api/v1/adapters/kinds": func(*testing.T) listed { return listed{path: api + "/adapters/kinds"} },
		"GET /api/v1/edge/keys": func(t *testing.T) listed {
			many(t, func(int) { post(t, api+"/edge/keys/rotate", "", http.StatusOK) })
			return listed{path: api + "/edge/keys", many: true}
		},
		"GET /api/v1/me/apps": func(t *testing.T) listed {
			p := h.account(t, "opener", nil, true)
			for _, app := range appPool(t) {
				h.openGrant(t, app, authz.KindUser, p.userID)
			}
			return listed{path: api + "/me/apps", as: p.bearer(), many: true}
		},
		"GET /api/v1/apps": func(t *testing.T) listed {
			appPool(t)
			return listed{path: api + "/apps", many: true}
		},
		"GET /api/v1/apps/{appID}/secrets": func(t *testing.T) listed {
			app := h.app(t, "Secrets")
			many(t, func(i int) { h.putSecret(t, app, fmt.Sprintf("KEY_%02d", i), "v") })
			return listed{path: api + "/apps/" + app + "/secrets", many: true}
		},
		"GET /api/v1/apps/{appID}/specs": func(t *testing.T) listed {
			app := h.app(t, "Specs")
			many(t, func(int) { h.specRevision(t, app) })
			return listed{path: api + "/apps/" + app + "/specs", many: true}
		},
		"GET /api/v1/apps/{appID}/slots": func(t *testing.T) listed {
			app := h.app(t, "Slots")
			post(t, api+"/apps/"+app+"/specs", document("slots", overAPage, `{"type":"postgres"}`), http.StatusCreated)
			return listed{path: api + "/apps/" + app + "/slots", many: true}
		},
		"GET /api/v1/apps/{appID}/volumes": func(t *testing.T) listed {
			app := h.app(t, "Volumes")
			post(t, api+"/apps/"+app+"/specs", document("volumes", overAPage, `{"size_bytes":1048576}`), http.StatusCreated)
			return listed{path: api + "/apps/" + app + "/volumes", many: true}
		},
		"GET /api/v1/backups": func(t *testing.T) listed {
			app := h.app(t, "All Backups")
			h.specRevision(t, app)
			post(t, api+"/apps/"+app+"/volumes", `{"name":"files","path":"/files"}`, http.StatusCreated)
			many(t, func(int) { post(t, api+"/backups", jsonOf(map[string]string{"app_id": app}), http.StatusAccepted) })
			return listed{path: api + "/backups", many: true}
		},
		"GET /api/v1/volumes": func(t *testing.T) listed {
			app := h.app(t, "All Volumes")
			post(t, api+"/apps/"+app+"/specs", document("volumes", overAPage, `{"size_bytes":1048576}`), http.StatusCreated)
			post(t, api+"/apps/"+app+"/volumes", `{"name":"one-more","path":"/one-more"}`, http.StatusCreated) // makes every row
			return listed{path: api + "/volumes", many: true}
		},
		// Deployments that ended, written as the scheduler writes them (a
		// deploy that runs takes seconds).
		"GET /api/v1/apps/{appID}/deployments": func(t *testing.T) listed {
			app := h.app(t, "Deployments")
			rev := h.specRevision(t, app)
			many(t, func(int) {
				d := scheduler.Deployment{ID: ids.New(ids.Deployment), AppID: app, SpecID: ids.New(ids.Spec), Revision: rev,
					State: scheduler.DepSucceeded, Trigger: "api", CreatedAt: time.Now().UTC()}
				if _, err := h.store.Apply(context.Background(), scheduler.Deployments.Insert(&d)); err != nil {
					t.Fatal(err)
				}
			})
			return listed{path: api + "/apps/" + app + "/deployments", many: true}
		},
		"GET /api/v1/operator/raft/probes": func(t *testing.T) listed {
			many(t, func(int) { post(t, api+"/operator/raft/probes", `{"payload_bytes":8}`, http.StatusCreated) })
			return listed{path: api + "/operator/raft/probes", many: true}
		},
	}
}

// TestEveryListPages walks the route table: every GET route that answers
// a list (an items array) pages it as API.md says. With more than a page
// of items the first answer has 50 and a next_cursor, and following the
// cursors (at the default size, and at another) yields every item once, in
// the order one page of 500 has them. The audit log is the one exception
// (it pages with before, as the specification fixes).
func TestEveryListPages(t *testing.T) {
	h := newHarness(t)
	fillers := listFillers(h)
	reference := map[string]string{}
	for _, e := range h.srv.reference().Endpoints {
		reference[e.Method+" "+e.Path] = e.Paging
	}
	lists := 0
	for _, r := range slices.Clone(h.srv.routes) {
		if r.method != http.MethodGet || !answersList(r.response) {
			continue
		}
		lists++
		key := r.method + " " + r.path
		t.Run(key, func(t *testing.T) {
			if reference[key] != r.paging.String() || reference[key] == "" {
				t.Errorf("the reference says paging %q", reference[key])
			}
			switch r.paging {
			case pagedCursor:
			case pagedBefore:
				if r.path != api+"/audit" {
					t.Fatalf("only the audit log pages with before (the specification's exception); %s does", r.path)
				}
				checkAuditPages(t, h)
				return
			default:
				t.Fatal("the route answers a list and does not page")
			}
			fill, ok := fillers[key]
			if !ok {
				t.Fatalf("no filler for %s: add one that makes more than a page of items", key)
			}
			checkPages(t, h, fill(t))
		})
	}
	if lists < len(fillers) {
		t.Errorf("%d list routes, %d fillers: a filler names a route that is gone", lists, len(fillers))
	}
}

// aPage is one page of any list.
type aPage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"next_cursor"`
}

func checkPages(t *testing.T, h *harness, l listed) {
	t.Helper()
	get := func(query string) aPage {
		t.Helper()
		path := l.path
		if query != "" {
			path += map[bool]string{true: "&", false: "?"}[strings.Contains(path, "?")] + query
		}
		a := h.send("GET", path, "", l.as...)
		if a.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
		return decodeAs[aPage](t, a)
	}
	walk := func(limit string) []string {
		t.Helper()
		var out []string
		seen := map[string]bool{}
		for q, pages := limit, 0; ; pages++ {
			if pages > 100 {
				t.Fatalf("the pages of %s do not end", l.path)
			}
			p := get(q)
			for _, it := range p.Items {
				id := itemID(t, it)
				if seen[id] {
					t.Fatalf("%s by %q: %s twice", l.path, limit, id)
				}
				seen[id] = true
				out = append(out, id)
			}
			if p.NextCursor == "" {
				return out
			}
			q = strings.TrimPrefix(limit+"&cursor="+p.NextCursor, "&")
		}
	}
	whole := get("limit=500")
	if whole.NextCursor != "" {
		t.Fatalf("%s holds more than 500 items: the test wants one page of them all", l.path)
	}
	all := walk("limit=500")
	first := get("")
	switch {
	case l.many && len(all) <= defaultPageLimit:
		t.Fatalf("%s lists %d items; the filler made more than %d", l.path, len(all), defaultPageLimit)
	case len(all) > defaultPageLimit && (len(first.Items) != defaultPageLimit || first.NextCursor == ""):
		t.Errorf("first page of %d items: %d items, next_cursor %q; want %d and a cursor", len(all), len(first.Items), first.NextCursor, defaultPageLimit)
	case len(all) <= defaultPageLimit && (len(first.Items) != len(all) || first.NextCursor != ""):
		t.Errorf("one page of %d items: %d items, next_cursor %q", len(all), len(first.Items), first.NextCursor)
	}
	for _, limit := range []string{"", "limit=7"} {
		if got := walk(limit); !slices.Equal(got, all) {
			t.Errorf("pages by %q give %d items, want the %d of one page, in order:\n got %v\nwant %v", limit, len(got), len(all), got, all)
		}
	}
}

// itemID names an item of a list by what identifies it.
func itemID(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("item %s: %v", raw, err)
	}
	for _, k := range []string{"id", "adapter_id", "kid", "key"} {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	if app, ok := m["app"].(map[string]any); ok {
		return fmt.Sprint(app["id"])
	}
	if c, ok := m["category"].(string); ok {
		return c + "/" + fmt.Sprint(m["kind"]) // an adapter kind
	}
	if n, ok := m["name"].(string); ok {
		return n // a volume
	}
	t.Fatalf("no identity in item %s", raw)
	return ""
}

// checkAuditPages: the audit log, newest first, pages with before and the
// same page size as every list.
func checkAuditPages(t *testing.T, h *harness) {
	t.Helper()
	total := len(h.auditEntries(t))
	if total <= defaultPageLimit {
		t.Fatalf("%d audit entries: the lists before made more than a page", total)
	}
	var got []string
	seen := map[string]bool{}
	for before, pages := "", 0; ; pages++ {
		if pages > total {
			t.Fatal("the audit pages do not end")
		}
		path := api + "/audit"
		if before != "" {
			path += "?before=" + before
		}
		a := decodeAs[auditDTO](t, h.send("GET", path, ""))
		if pages == 0 && len(a.Items) != defaultPageLimit {
			t.Errorf("first audit page: %d entries, want %d", len(a.Items), defaultPageLimit)
		}
		for _, e := range a.Items {
			if seen[e.ID] || (len(got) > 0 && e.ID >= got[len(got)-1]) {
				t.Fatalf("audit entry %s out of order or twice", e.ID)
			}
			seen[e.ID] = true
			got = append(got, e.ID)
		}
		if before = a.NextBefore; before == "" {
			break
		}
	}
	if len(got) != total {
		t.Errorf("the audit pages gave %d entries of %d", len(got), total)
	}
}
