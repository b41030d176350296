package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFirstRunClosesSetupFromTheFirstAnswer starts the real binary with
// SVC_ADMIN_PASSWORD and, from the moment its port accepts connections
// (dialled in a tight loop), fires 16 POST /setup, 16 GET /setup and a
// sign-in as admin at once: every POST is refused STATE_INVALID, no GET
// says setup_required true, the sign-in succeeds on its first answer, and
// admin is the only account.
func TestFirstRunClosesSetupFromTheFirstAnswer(t *testing.T) {
	addr := freeRaftAddr(t) // a loopback port nobody listens on
	p := newProc(t, "firstrun", []string{
		"SVC_SERVER_ADDR=" + addr,
		"SVC_SERVER_WORK_DIR=" + filepath.Join(t.TempDir(), "work"),
	})
	p.start()
	deadline := time.Now().Add(scaled(servingTimeout))
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if !p.running() || time.Now().After(deadline) {
			t.Fatalf("the port never accepted a connection (%v); the log:\n%s", err, p.currentLog())
		}
	}

	base := "http://" + addr + "/api/v1"
	client := &http.Client{Timeout: scaled(60 * time.Second), Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	type answer struct {
		what   string
		status int
		body   string
		err    error
	}
	send := func(what, method, path, body string) answer {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := client.Do(req)
		if err != nil {
			return answer{what: what, err: err}
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return answer{what: what, status: res.StatusCode, body: string(b)}
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers []answer
		start   = make(chan struct{})
	)
	fire := func(what, method, path, body string) {
		wg.Go(func() {
			<-start
			a := send(what, method, path, body)
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		})
	}
	for i := range 16 {
		fire("POST /setup", "POST", "/setup", fmt.Sprintf(`{"username":"claimer%02d","display_name":"Claimer","password":"claimer-password-%02d"}`, i, i))
		fire("GET /setup", "GET", "/setup", "")
	}
	fire("POST /sessions", "POST", "/sessions", fmt.Sprintf(`{"username":"admin","password":%q}`, adminPassword))
	close(start)
	wg.Wait()

	for _, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("%s: %v", a.what, a.err)
		case a.what == "POST /setup" && (a.status != http.StatusConflict || !strings.Contains(a.body, `"STATE_INVALID"`)):
			t.Errorf("%s: %d %s; want 409 STATE_INVALID", a.what, a.status, a.body)
		case a.what == "GET /setup" && (a.status != http.StatusOK || !strings.Contains(a.body, `"setup_required":false`)):
			t.Errorf("%s: %d %s; want 200 setup_required false", a.what, a.status, a.body)
		case a.what == "POST /sessions" && a.status != http.StatusOK:
			t.Errorf("%s as admin on the first answer: %d %s; want 200", a.what, a.status, a.body)
		}
	}

	p.waitServing()
	signIn(t, scaled(10*time.Second), p)
	var users struct {
		Items []struct {
			Username string `json:"username"`
		} `json:"items"`
	}
	req, _ := http.NewRequest("GET", base+"/users", nil)
	req.Header.Set("Authorization", "Bearer "+p.token)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&users); err != nil || len(users.Items) != 1 || users.Items[0].Username != "admin" {
		t.Errorf("accounts after the race: %+v (%v); want admin alone", users.Items, err)
	}
	if n := strings.Count(p.currentLog(), "setup refused"); n != 16 {
		t.Errorf("%d refused setups logged, want 16", n)
	}
}

// TestFirstRunRefusesAnUnusablePassword: a single node whose
// SVC_ADMIN_PASSWORD the password rules refuse does not start (it would
// otherwise leave the installation open for anyone to claim).
func TestFirstRunRefusesAnUnusablePassword(t *testing.T) {
	code, _, stderr := runOnce(t, []string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + filepath.Join(t.TempDir(), "work"),
		"SVC_ADMIN_PASSWORD=short",
	}, scaled(60*time.Second))
	if code != 2 || !strings.Contains(stderr, "SVC_ADMIN_PASSWORD") {
		t.Errorf("exit code %d, stderr:\n%s\nwant 2 and a message naming SVC_ADMIN_PASSWORD", code, lastLines(stderr, 20))
	}
}
