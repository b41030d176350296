package e2e

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
)

// TestTheEdgeFrontsADeployedApp deploys a sample on the real binary in
// port routing and opens it where the App's url says: through the edge,
// which the administrator (the creator, who holds a data-plane grant)
// passes with a token, an anonymous client does not, and a browser is
// sent to sign in.
func TestTheEdgeFrontsADeployedApp(t *testing.T) {
	first, err := testserver.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	srv := startAppServer(t, "edge", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first+2))
	sm := samples[3] // static-hello: nothing to build
	id, _ := srv.onboard(t, "edge-static", sm.dir, sm.detector)
	d := srv.deploy(t, id, 0)
	if lines, end := srv.follow(t, id, d.ID); end.State != "succeeded" {
		t.Fatalf("deploy ended %s %s; its log:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
	}
	srv.waitDeployed(t, id)

	var got struct {
		App struct {
			URL *string `json:"url"`
		} `json:"app"`
	}
	srv.must(t, "GET", "/apps/"+id, nil, http.StatusOK, &got)
	// Built from the listener's address (loopback is localhost), as the
	// startup log names the console.
	if got.App.URL == nil || !strings.HasPrefix(*got.App.URL, "http://localhost:") {
		t.Fatalf("the app's url = %v; want http://localhost:<its port>/", got.App.URL)
	}
	appURL := *got.App.URL
	u, _ := url.Parse(appURL)
	if port, _ := strconv.Atoi(u.Port()); port < first || port > first+2 {
		t.Fatalf("url %s: the port is not from SVC_APP_PORT_START..END (%d..%d)", appURL, first, first+2)
	}

	// The edge listens once the route table has the app.
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		r := send(srv.p, "GET", appURL, nil)
		if r.err == nil && r.status == http.StatusOK && strings.Contains(string(r.body), "hello from "+sm.lang) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s with the admin's token: %d %q (%v); want the app's page through the edge", appURL, r.status, r.body, r.err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	noRedirect := &http.Client{Timeout: scaled(30 * time.Second), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Get(appURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"AUTH_REQUIRED"`) {
		t.Errorf("anonymous: %d %s; want 401 AUTH_REQUIRED", res.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", appURL+"page?x=1", nil)
	req.Header.Set("Accept", "text/html")
	res, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	// A browser without the app's cookie is sent to the console's handoff
	// (the console's address from the listener's, never from Host).
	console, _ := url.Parse(srv.p.Base())
	want := "http://localhost:" + console.Port() + "/api/v1/edge/handoff?next=" + url.QueryEscape(appURL+"page?x=1") + "&state="
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), want) {
		t.Errorf("a browser, not signed in: %d to %q; want 303 to %q…", res.StatusCode, res.Header.Get("Location"), want)
	}
}
