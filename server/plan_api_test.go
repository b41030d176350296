package server

import (
	"net/http"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
)

func planCodes(r plan.Result) []errcode.Code {
	var out []errcode.Code
	for _, e := range r.Refusals {
		out = append(out, e.Code)
	}
	return out
}

func TestPlanAPI(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Planned")
	base := api + "/apps/" + app
	r := decodeAs[plan.Result](t, h.send("POST", base+"/plan", `{}`))
	if r.Deployable || len(r.Refusals) != 1 || r.Refusals[0].Code != errcode.StateInvalid {
		t.Fatalf("nothing pinned: %+v", r)
	}
	doc := `{"spec":{"workloads":{"web":{"build":{"kind":"go","command":"go build -o app ."},"run":{"command":["./app"],"port":8080},
		"env":{"DB":{"slot":"db","field":"url"},"KEY":{"secret":"API_KEY"}}}},"slots":{"db":{"type":"postgres","required":true}}}}`
	wantStatus(t, "write a revision", h.send("POST", base+"/specs", doc), http.StatusCreated)
	wantStatus(t, "pin it", h.send("POST", base+"/specs/1/pin", ""), http.StatusOK)
	r = decodeAs[plan.Result](t, h.send("POST", base+"/plan", `{}`))
	if r.Deployable || len(r.Refusals) != 1 || r.Refusals[0].Code != errcode.PlanSlotUnfilled || r.Runtime != "adp_builtin_runtime" {
		t.Fatalf("slot unfilled: %+v", r)
	}
	if slots, _ := r.Refusals[0].Details["slots"].([]any); len(slots) != 1 || slots[0] != "db" {
		t.Fatalf("details.slots = %v", r.Refusals[0].Details)
	}
	codes := map[string]bool{}
	for _, w := range r.Warnings {
		codes[w.Code] = true
	}
	if !codes["WARN_NO_HEALTH_CHECK"] || !codes["WARN_SECRET_NOT_SET"] {
		t.Fatalf("warnings = %+v", r.Warnings)
	}
	wantStatus(t, "fill the slot", h.send("PUT", base+"/slots/db", `{"value":{"url":"postgres://u:p@db.internal:5432/app"}}`), http.StatusOK)
	h.putSecret(t, app, "API_KEY", "plan-secret")
	if r = decodeAs[plan.Result](t, h.send("POST", base+"/plan", `{"revision":1}`)); !r.Deployable || len(r.Actions) != 2 {
		t.Fatalf("deployable: %+v", r)
	}
	wantError(t, "an unknown revision", h.send("POST", base+"/plan", `{"revision":9}`), http.StatusNotFound, errcode.NotFound)
	wantError(t, "a bad revision", h.send("POST", base+"/plan", `{"revision":0}`), http.StatusBadRequest, errcode.ValidInvalid)

	// The policy preview names the app a stricter policy would block.
	a := h.send("POST", api+"/policy/preview", `{"policy":{"min_runtime_isolation":"vm"}}`)
	wantStatus(t, "preview", a, http.StatusOK)
	pv := decodeAs[struct {
		Blocked []plan.Blocked `json:"blocked"`
	}](t, a)
	if len(pv.Blocked) != 1 || pv.Blocked[0].AppID != app || pv.Blocked[0].Reasons[0].Code != errcode.PlanNoAdapterPolicy {
		t.Fatalf("preview = %s", a.body)
	}
	h.openGrant(t, app, authz.KindAnonymous, "")
	a = h.send("POST", api+"/policy/preview", `{"policy":{"public_sharing":"none"}}`)
	pv = decodeAs[struct {
		Blocked []plan.Blocked `json:"blocked"`
	}](t, a)
	if len(pv.Blocked) != 1 || pv.Blocked[0].Reasons[0].Code != errcode.PolicyAnonymousGrant {
		t.Fatalf("preview of public_sharing none = %s", a.body)
	}
}
