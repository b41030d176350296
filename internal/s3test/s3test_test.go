package s3test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartAnswersAndStops: the server answers on its endpoint, a bucket
// is a directory of its root, and Stop makes it unreachable.
func TestStartAnswersAndStops(t *testing.T) {
	for _, opts := range []Options{{}, {TLS: true}} {
		s := Start(t, opts)
		s.Bucket(t, "some-bucket")
		if fi, err := os.Stat(filepath.Join(s.Root, "some-bucket")); err != nil || !fi.IsDir() {
			t.Errorf("bucket directory: %v", err)
		}
		if opts.TLS != strings.HasPrefix(s.Endpoint, "https://") || opts.TLS != (s.CAFile != "") {
			t.Errorf("TLS %t: endpoint %s, CA file %q", opts.TLS, s.Endpoint, s.CAFile)
		}
		// It answers, trusted through its CA file with TLS; an unsigned
		// request is refused: it is a real S3 API.
		client, err := s.client()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Get(s.Endpoint + "/some-bucket")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("an anonymous request answered %s; want 403", resp.Status)
		}
		s.Stop()
		s.Stop()
		if _, err := http.Get(s.Endpoint + "/health"); err == nil {
			t.Error("the server still answers after Stop")
		}
	}
}
