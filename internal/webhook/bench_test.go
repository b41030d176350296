package webhook

import (
	"strings"
	"testing"
)

// slackTemplate is the docs' Slack-style template, a realistic one.
const slackTemplate = `{"text": {{json .Subject}}, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": {{json (printf "*%s*\n%s" .Subject .Body)}}}}, {"type": "context", "elements": [{{range $i, $f := .Fields}}{{if $i}},{{end}}{"type": "mrkdwn", "text": {{json (printf "%s: %s" $f.Name $f.Value)}}}{{end}}]}]}`

func BenchmarkSign(b *testing.B) {
	body := []byte(strings.Repeat("x", 1024))
	for _, keys := range [][]string{{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_old"}} {
		b.Run(map[int]string{1: "1KiB-1key", 2: "1KiB-2keys"}[len(keys)], func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				_ = Sign(keys, 1700000000, body)
			}
		})
	}
}

func BenchmarkBody(b *testing.B) {
	ev := testEvent("evt_bench")
	for name, tmpl := range map[string]string{"envelope": "", "template": slackTemplate} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Body(Request{Event: ev, Template: tmpl, ConsoleURL: "https://svc.example.com"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSend: one attempt to a receiver on loopback (keep-alive), the
// envelope signed with one key, serially and from many goroutines.
func BenchmarkSend(b *testing.B) {
	rc := newReceiver(b, nil)
	s := open(b, Options{})
	req := Request{URL: rc.URL, Keys: []string{"whsec_k"}, DeliveryID: "dlv_1", Event: testEvent("evt_bench")}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := s.Send(bg, req); !r.Delivered() {
				b.Fatal(r)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if r := s.Send(bg, req); !r.Delivered() {
					b.Error(r)
					return
				}
			}
		})
	})
	rc.mu.Lock()
	rc.got = nil // the receiver keeps every request; drop them
	rc.mu.Unlock()
}
