package toolserver

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/svchost/svc/api"
)

// originKey holds a verified request's origin in its token info.
const originKey = "svc.origin"

// origin is what the API's answer may depend on of the request to /mcp:
// the token it carried, the peer's address and what a proxy in front said
// (the API trusts X-Forwarded-For only from its trusted proxies), the host
// it was sent to (apps' URLs are made from it) and its TLS state.
type origin struct {
	token      string
	remoteAddr string
	host       string
	tls        *tls.ConnectionState
	forwarded  http.Header
}

// forwardingHeaders are the request's headers a tool call carries on.
var forwardingHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded", "X-Real-Ip"}

func originOf(r *http.Request, token string) origin {
	o := origin{token: token, remoteAddr: r.RemoteAddr, host: r.Host, tls: r.TLS, forwarded: http.Header{}}
	for _, h := range forwardingHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			o.forwarded[h] = v
		}
	}
	return o
}

// client is an API client that sends its requests to h in process, as
// if they came from the origin.
func (o origin) client(h http.Handler) (*api.Client, error) {
	return api.New("http://in-process.invalid", api.WithToken(o.token), api.WithHTTPClient(&http.Client{Transport: &inProcess{h: h, o: o}, Timeout: 2 * time.Minute}))
}

// inProcess is an http.RoundTripper that hands each request to a handler
// in this process and streams its answer back (an event stream is read
// while the handler still writes it).
type inProcess struct {
	h http.Handler
	o origin
}

func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.RemoteAddr, r.Host, r.TLS = t.o.remoteAddr, t.o.host, t.o.tls
	r.RequestURI = r.URL.RequestURI()
	for _, h := range forwardingHeaders {
		r.Header.Del(h)
	}
	for h, v := range t.o.forwarded {
		r.Header[h] = v
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				w.WriteHeader(http.StatusInternalServerError)
				_ = pw.CloseWithError(fmt.Errorf("toolserver: handler panicked: %v", p))
				return
			}
			w.WriteHeader(http.StatusOK) // no answer written: an empty 200
			_ = pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the handler's side of an in-process answer: the header
// is sent (ready) at the first WriteHeader, Write or Flush, and the body
// goes through a pipe the client reads.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush sends the header; written bytes reach the reader as they are
// written.
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }
