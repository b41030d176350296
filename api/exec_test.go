package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// execServer answers GET …/exec the way the API frames a terminal: it
// refuses a request without the bearer token (or with an Origin) before
// the upgrade with an error envelope; it echoes what is typed in upper
// case, answers a resize with the size it got, and ends with the exit
// message and a normal close when "exit" is typed (or breaks the
// connection on "break").
func execServer(t *testing.T, seen chan<- *http.Request) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Origin") != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"code":"POLICY_EXEC_DISABLED","message":"exec is turned off","remedy":"ask an administrator","details":{},"request_id":"req_1"}`)
			return
		}
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := r.Context()
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageText {
				var m execMessage
				_ = json.Unmarshal(data, &m)
				_ = conn.Write(ctx, websocket.MessageBinary, []byte(m.Type+" "+itoa(m.Rows)+"x"+itoa(m.Cols)+"\n"))
				continue
			}
			switch s := string(data); s {
			case "exit":
				_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"exit","code":7}`))
				_ = conn.Close(websocket.StatusNormalClosure, "")
				return
			case "break":
				return // CloseNow: no exit message
			default:
				_ = conn.Write(ctx, websocket.MessageBinary, []byte(strings.ToUpper(s)))
			}
		}
	}))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Exec carries the bearer token and no Origin, the workload, command and
// size in the query; Read is the terminal's output, Write types, Resize
// sends the control message, Wait is the exit message's code; a refusal
// before the upgrade is an *Error with the API's code; a connection that
// ends without the exit message is an error from Wait.
func TestExec(t *testing.T) {
	seen := make(chan *http.Request, 10)
	srv := execServer(t, seen)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // against hanging only
	defer cancel()
	c, _ := New(srv.URL, WithToken("tok"))

	s, err := c.Exec(ctx, "app_1", ExecOptions{Workload: "web", Command: []string{"sh", "-c", "echo a b"}, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	r := <-seen
	if q := r.URL.Query(); r.URL.Path != "/api/v1/apps/app_1/exec" || q.Get("workload") != "web" || !slices.Equal(q["command"], []string{"sh", "-c", "echo a b"}) ||
		q.Get("rows") != "30" || q.Get("cols") != "100" {
		t.Errorf("request %s", r.URL)
	}
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := s.Resize(ctx, 40, 120); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("exit")); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(s)
	if err != nil || string(out) != "HELLOresize 40x120\n" {
		t.Errorf("output %q, %v", out, err)
	}
	if code, err := s.Wait(); code != 7 || err != nil {
		t.Errorf("Wait = %d, %v; want 7", code, err)
	}
	_ = s.Close()

	s, err = c.Exec(ctx, "app_1", ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := <-seen; r.URL.RawQuery != "" {
		t.Errorf("no options: query %q; want none (the server's defaults)", r.URL.RawQuery)
	}
	_, _ = s.Write([]byte("break"))
	if _, err := s.Wait(); err == nil {
		t.Errorf("a connection ended without the exit message: Wait gave no error")
	}
	_ = s.Close()

	anon, _ := New(srv.URL)
	_, err = anon.Exec(ctx, "app_1", ExecOptions{})
	<-seen
	if e, ok := err.(*Error); !ok || e.Code != "POLICY_EXEC_DISABLED" || e.Status != http.StatusForbidden || e.Remedy == "" {
		t.Errorf("a refusal before the upgrade: %#v; want *Error POLICY_EXEC_DISABLED", err)
	}
}
