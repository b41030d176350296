// Package fakeai is a fake OpenAI-compatible chat completions server for
// tests of scanners/ai and of the security service over it: it parses
// each request as the real API would (POST /chat/completions, a JSON body
// with a model, messages and response_format json_object), keeps every
// request it got, and answers from the summary's content: a file section
// whose contents download and run a script ("curl … | sh") is reported
// as a high, fixable finding at that file. A test may answer otherwise
// (Respond) to play a hostile or broken endpoint.
//
// It is test support: nothing but tests imports it.
package fakeai

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
)

// Request is a request the fake got.
type Request struct {
	// Authorization is the request's Authorization header.
	Authorization string
	Model         string
	System, User  string
	// Body is the request's body as sent.
	Body []byte
	// Files are the summary's file sections: path to contents.
	Files map[string]string
	// Gone is closed when the client gave up on the request (a Respond
	// that plays a slow endpoint waits for it).
	Gone <-chan struct{}
}

// Server is the fake.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	respond  func(w http.ResponseWriter, r Request)
	requests []Request
	hits     int
}

// New starts a fake; Close stops it.
func New() *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Respond makes f answer the well-formed requests from now on instead of
// the default; nil brings the default back.
func (s *Server) Respond(f func(w http.ResponseWriter, r Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = f
}

// Requests are the well-formed requests the fake got, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Hits counts every HTTP request that reached the fake, well-formed or
// not.
func (s *Server) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits++
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/chat/completions" {
		apiError(w, http.StatusNotFound, "unknown route "+r.Method+" "+r.URL.Path)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		apiError(w, http.StatusBadRequest, "content type "+ct)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		apiError(w, http.StatusBadRequest, "body")
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" || len(req.Messages) != 2 ||
		req.Messages[0].Role != "system" || req.Messages[1].Role != "user" || req.ResponseFormat == nil || req.ResponseFormat.Type != "json_object" {
		apiError(w, http.StatusBadRequest, "want a model, a system and a user message, and response_format json_object")
		return
	}
	got := Request{Authorization: r.Header.Get("Authorization"), Model: req.Model, System: req.Messages[0].Content,
		User: req.Messages[1].Content, Body: body, Files: sections(req.Messages[1].Content), Gone: r.Context().Done()}
	s.mu.Lock()
	s.requests = append(s.requests, got)
	respond := s.respond
	s.mu.Unlock()
	if respond != nil {
		respond(w, got)
		return
	}
	type finding struct {
		Severity string  `json:"severity"`
		Title    string  `json:"title"`
		Path     *string `json:"path"`
		Fixable  bool    `json:"fixable"`
	}
	findings := []finding{}
	for p, content := range sections(got.User) {
		if pipeToShell.MatchString(content) {
			findings = append(findings, finding{Severity: "high", Title: "Downloads a script and runs it with a shell while building", Path: &p, Fixable: true})
		}
	}
	content, _ := json.Marshal(map[string]any{"findings": findings})
	Answer(w, string(content))
}

// pipeToShell is a download piped into a shell.
var pipeToShell = regexp.MustCompile(`(?m)(curl|wget)[^\n|]*\|\s*(ba)?sh\b`)

// section heads are "## File <path>" with, optionally, " (<n> bytes)".
var sectionHead = regexp.MustCompile(`(?m)^## File (\S+)(?: \(\d+ bytes\))?$`)

// sections are the summary's file sections.
func sections(user string) map[string]string {
	out := map[string]string{}
	heads := sectionHead.FindAllStringSubmatchIndex(user, -1)
	for i, h := range heads {
		end := len(user)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		out[user[h[2]:h[3]]] = user[h[1]:end]
	}
	return out
}

// Answer writes a chat completion whose message is content.
func Answer(w http.ResponseWriter, content string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}},
	})
}

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}
