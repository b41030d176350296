package server

import (
	"encoding/json"
	"fmt"
	"github.com/svchost/svc/internal/plan"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/vaulttest"
)

// vaultHas says whether the Vault v holds a KV version 2 value at path
// (mount "secret").
func vaultHas(t *testing.T, v *vaulttest.Server, path string) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, v.Addr+"/v1/secret/data/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", v.RootToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Data map[string]any `json:"data"`
		} `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode == http.StatusOK && out.Data.Data["value"] != nil
}

func adaptersOfKind(l adapters.List, category, kind string) []adapters.View {
	var out []adapters.View
	for _, v := range l.Items {
		if v.Category == category && v.Kind == kind {
			out = append(out, v)
		}
	}
	return out
}

// TestReconfiguringAnAdapterReplacesTheLoadedOne posts the documented
// postgres body twice, and the vault body twice against a real Vault dev server: the second changes
// the same adapter (200, same ID, next revision) instead of adding one,
// and after the restart only the new configuration is loaded: a secret
// set then lands under the new prefix, none under the old.
func TestReconfiguringAnAdapterReplacesTheLoadedOne(t *testing.T) {
	v := vaulttest.Start(t)
	h := newHarness(t)
	// A category that holds several adapters of a kind (slots, like
	// runtime) is configured in place too.
	pg := `{"category":"slots","kind":"postgres","config":{"host":"db.internal","username":"svc_admin"},"credentials":{"password":"pw"}}`
	wantStatus(t, "configure postgres", h.send("POST", api+"/adapters", pg), http.StatusCreated)
	wantStatus(t, "configure postgres again", h.send("POST", api+"/adapters", strings.Replace(pg, "db.internal", "db2.internal", 1)), http.StatusOK)
	if l := decodeAs[adapters.List](t, h.send("GET", api+"/adapters", "")); len(adaptersOfKind(l, "slots", "postgres")) != 1 ||
		adaptersOfKind(l, "slots", "postgres")[0].Config["host"] != "db2.internal" {
		t.Fatalf("postgres adapters: %+v", adaptersOfKind(l, "slots", "postgres"))
	}
	body := func(prefix string) string {
		return `{"category":"secrets","kind":"vault","config":{"address":"` + v.Addr + `","prefix":"` + prefix + `"},"credentials":{"token":"` + v.RootToken + `"}}`
	}
	a := h.send("POST", api+"/adapters", body("one"))
	wantStatus(t, "configure vault", a, http.StatusCreated)
	id := decodeAs[adapterAnswer](t, a).Adapter.AdapterID
	h.restart()
	app := h.app(t, "Replaced Vault")
	wantStatus(t, "a secret through the first configuration", h.send("PUT", api+"/apps/"+app+"/secrets/FIRST", `{"value":"v1"}`), http.StatusOK)
	if !vaultHas(t, v, "one/apps/"+app+"/FIRST") {
		t.Fatal("the first configuration did not write under its prefix")
	}

	a = h.send("POST", api+"/adapters", body("two"))
	wantStatus(t, "configure vault again", a, http.StatusOK)
	if again := decodeAs[adapterAnswer](t, a).Adapter; again.AdapterID != id || again.Revision != 2 || !again.PendingRestart {
		t.Fatalf("configured again: %s", a.body)
	}
	h.restart()
	l := decodeAs[adapters.List](t, h.send("GET", api+"/adapters", ""))
	if vs := adaptersOfKind(l, "secrets", "vault"); len(vs) != 1 || vs[0].AdapterID != id || !vs[0].Loaded || !vs[0].Primary ||
		vs[0].Config["prefix"] != "two" || vs[0].Capabilities["prefix"] != "two" || l.RestartNeeded {
		t.Fatalf("vault adapters after the restart: %+v", vs)
	}
	wantStatus(t, "a secret through the second configuration", h.send("PUT", api+"/apps/"+app+"/secrets/SECOND", `{"value":"v2"}`), http.StatusOK)
	if !vaultHas(t, v, "two/apps/"+app+"/SECOND") || vaultHas(t, v, "one/apps/"+app+"/SECOND") {
		t.Fatal("the secret did not go to the new configuration's prefix alone")
	}
}

// TestDeletingAnAdapter: DELETE /adapters/{id} is refused with
// STATE_INVALID while something depends on the adapter (here the secrets a
// real Vault holds for an app, and its being the primary), with a message
// naming the dependents and a remedy; a built-in adapter is never deleted;
// one nothing depends on is deleted (204, audit entry, adapter.configured),
// listed as deleted until the restart, and gone after it.
func TestDeletingAnAdapter(t *testing.T) {
	v := vaulttest.Start(t)
	h := newHarness(t)
	a := h.send("POST", api+"/adapters", `{"category":"secrets","kind":"vault","config":{"address":"`+v.Addr+`"},"credentials":{"token":"`+v.RootToken+`"}}`)
	wantStatus(t, "configure vault", a, http.StatusCreated)
	vault := decodeAs[adapterAnswer](t, a).Adapter.AdapterID
	h.restart()
	app := h.app(t, "Held By Vault")
	wantStatus(t, "a secret in vault", h.send("PUT", api+"/apps/"+app+"/secrets/K", `{"value":"v"}`), http.StatusOK)

	e := wantError(t, "delete the vault holding a secret", h.send("DELETE", api+"/adapters/"+vault, ""), http.StatusConflict, errcode.StateInvalid)
	what := map[string]bool{}
	deps, _ := e.Details["dependents"].([]any)
	for _, d := range deps {
		m, _ := d.(map[string]any)
		what[m["what"].(string)] = true
		if m["remedy"] == "" || m["message"] == "" {
			t.Errorf("dependent without message or remedy: %v", m)
		}
	}
	if !what["secrets"] || !what["primary"] || !strings.Contains(e.Message, "1 secret") || e.Remedy == "" {
		t.Fatalf("refusal = %+v", e)
	}
	if l := decodeAs[adapters.List](t, h.send("GET", api+"/adapters", "")); len(adaptersOfKind(l, "secrets", "vault")) != 1 {
		t.Fatal("a refused delete removed the adapter")
	}
	wantError(t, "delete a built-in adapter", h.send("DELETE", api+"/adapters/adp_builtin_secrets", ""), http.StatusConflict, errcode.StateInvalid)
	wantError(t, "delete an unknown adapter", h.send("DELETE", api+"/adapters/adp_01JZZZZZZZZZZZZZZZZZZZZZZZ", ""), http.StatusNotFound, errcode.NotFound)

	a = h.send("POST", api+"/adapters", `{"category":"slots","kind":"postgres","config":{"host":"db.internal","username":"svc_admin"},"credentials":{"password":"pw-d3l"}}`)
	wantStatus(t, "configure postgres", a, http.StatusCreated)
	pg := decodeAs[adapterAnswer](t, a).Adapter.AdapterID
	h.restart()
	before := h.auditEntries(t)
	wantStatus(t, "delete postgres", h.send("DELETE", api+"/adapters/"+pg, ""), http.StatusNoContent)
	got := newEntries(before, h.auditEntries(t))
	if len(got) != 1 || got[0].Action != "adapter.delete" || got[0].TargetID == nil || *got[0].TargetID != pg {
		t.Fatalf("audit = %+v", got)
	}
	evs := h.allEvents(t)
	if last := evs[len(evs)-1]; last.Type != "adapter.configured" || last.Data["target_id"] != pg || last.Data["kind"] != "postgres" || last.Data["credentials_changed"] != true {
		t.Fatalf("last event = %+v", last)
	}
	l := decodeAs[adapters.List](t, h.send("GET", api+"/adapters", ""))
	if vs := adaptersOfKind(l, "slots", "postgres"); len(vs) != 1 || !vs[0].Deleted || !vs[0].PendingRestart || !l.RestartNeeded {
		t.Fatalf("before the restart: %+v", vs)
	}
	if strings.Contains(string(h.send("GET", api+"/adapters", "").body), "pw-d3l") {
		t.Fatal("the list shows a credential")
	}
	h.restart()
	l = decodeAs[adapters.List](t, h.send("GET", api+"/adapters", ""))
	if vs := adaptersOfKind(l, "slots", "postgres"); len(vs) != 0 {
		t.Fatalf("after the restart: %+v", vs)
	}
	wantError(t, "delete it again", h.send("DELETE", api+"/adapters/"+pg, ""), http.StatusNotFound, errcode.NotFound)
}

// TestADeletedRuntimeTakesNoNewDeploys: a runtime adapter deleted stays
// loaded until the restart, but a plan (and so a deploy) of a spec that
// names it is refused as naming a runtime not configured.
func TestADeletedRuntimeTakesNoNewDeploys(t *testing.T) {
	h := newHarness(t)
	a := h.send("POST", api+"/adapters", `{"category":"runtime","kind":"nomad","config":{"address":"http://127.0.0.1:1"}}`)
	wantStatus(t, "configure a nomad runtime", a, http.StatusCreated)
	nomadID := decodeAs[adapterAnswer](t, a).Adapter.AdapterID
	// The process runtime configured after it is the primary one again.
	wantStatus(t, "configure the process runtime", h.send("POST", api+"/adapters", `{"category":"runtime","kind":"process"}`), http.StatusCreated)
	h.restart()
	app := h.app(t, "Pinned Runtime")
	doc := strings.Replace(specExampleJSON, `{"spec": {`, `{"spec": {"runtime": {"adapter": "`+nomadID+`"},`, 1)
	rev := h.send("POST", api+"/apps/"+app+"/specs", doc)
	wantStatus(t, "a revision naming the runtime", rev, http.StatusCreated)
	body := fmt.Sprintf(`{"revision": %d}`, decodeAs[specAnswer](t, rev).Spec.Number)
	notConfigured := func(p plan.Result) bool {
		return slices.ContainsFunc(p.Refusals, func(e *errcode.Error) bool { return e.Code == errcode.PlanAdapterNotConfig })
	}
	if p := decodeAs[plan.Result](t, h.send("POST", api+"/apps/"+app+"/plan", body)); notConfigured(p) {
		t.Fatalf("plan before the delete = %+v; want the runtime found", p)
	}
	wantStatus(t, "delete the runtime", h.send("DELETE", api+"/adapters/"+nomadID, ""), http.StatusNoContent)
	if p := decodeAs[plan.Result](t, h.send("POST", api+"/apps/"+app+"/plan", body)); p.Deployable || !notConfigured(p) {
		t.Fatalf("plan after the delete = %+v; want refused: the runtime is not configured", p)
	}
	// The deploy is refused for every reason the plan gives, this one
	// among them.
	if d := h.send("POST", api+"/apps/"+app+"/deployments", body); d.status != http.StatusConflict || !strings.Contains(string(d.body), string(errcode.PlanAdapterNotConfig)) {
		t.Fatalf("deploy onto the deleted runtime: %d %s; want 409 naming %s", d.status, d.body, errcode.PlanAdapterNotConfig)
	}
}
