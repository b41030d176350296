package webhook

// Interim versions so the dispatcher builds before the package's own land.
// DELETE when merging the webhook branch.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svchost/svc/internal/events"
)

type Sender struct {
	o Options
	c *http.Client
}

func NewSender(o Options) *Sender {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Sender{o: o, c: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (s *Sender) Send(ctx context.Context, req Request) Result {
	start := time.Now()
	body, err := Body(req)
	if err != nil {
		return Result{Error: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	m := req.Method
	if m == "" {
		m = "POST"
	}
	hr, err := http.NewRequestWithContext(ctx, m, req.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Error: err.Error()}
	}
	ts := s.o.Now().Unix()
	for k, v := range req.Headers {
		hr.Header.Set(k, v)
	}
	ct := req.ContentType
	if ct == "" {
		ct = "application/json"
	}
	hr.Header.Set("Content-Type", ct)
	hr.Header.Set("Svc-Event", req.Event.Type)
	hr.Header.Set("Svc-Event-Id", req.Event.ID)
	hr.Header.Set("Svc-Delivery-Id", req.DeliveryID)
	hr.Header.Set("Svc-Timestamp", strconv.FormatInt(ts, 10))
	hr.Header.Set("Svc-Signature", Sign(req.Keys, ts, body))
	resp, err := s.c.Do(hr)
	if err != nil {
		return Result{Error: "no answer: " + err.Error(), Duration: time.Since(start)}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	r := Result{StatusCode: resp.StatusCode, Duration: time.Since(start)}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.Error = fmt.Sprintf("the receiver answered %d", resp.StatusCode)
	}
	return r
}

func Envelope(ev *events.Event) ([]byte, error) { return json.Marshal(ev) }

func Body(req Request) ([]byte, error) { return Envelope(req.Event) }

func CheckTemplate(tmpl, contentType string) error { return nil }
func CheckURL(raw string, allowPrivate bool) error {
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return fmt.Errorf("not http")
	}
	return nil
}
func CheckHeaders(h map[string]string) error { return nil }
func CheckMethod(m string) error             { return nil }
func CheckContentType(ct string) error       { return nil }
func Sign(keys []string, ts int64, body []byte) string {
	var out []string
	for _, k := range keys {
		m := hmac.New(sha256.New, []byte(k))
		fmt.Fprintf(m, "%d.", ts)
		m.Write(body)
		out = append(out, "v1="+hex.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(out, " ")
}
func NewKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b), nil
}
