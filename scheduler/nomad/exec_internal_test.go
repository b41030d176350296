package nomad

import (
	"bytes"
	"testing"
)

// scanAll feeds stream to a scanner in the chunks cuts makes (each byte
// of cuts a chunk length, 0 meaning 1) and returns the output and how
// many chunks reported the end.
func scanAll(marker, stream, cuts []byte) ([]byte, int) {
	e := &endScanner{marker: marker}
	var out []byte
	ends := 0
	for i := 0; len(stream) > 0; i++ {
		n := 1
		if len(cuts) > 0 {
			n = max(int(cuts[i%len(cuts)]), 1)
		}
		n = min(n, len(stream))
		b, ended := e.scan(stream[:n])
		out = append(out, b...)
		if ended {
			ends++
		}
		stream = stream[n:]
	}
	return append(out, e.flush()...), ends
}

// TestEndScanner: the marker is taken out of the output wherever the
// frames split it, the end is reported once, and output that only looks
// like the marker's beginning is passed on whole.
func TestEndScanner(t *testing.T) {
	marker := []byte("\x00svc-end-0123abcd\x00")
	for _, tc := range []struct {
		name         string
		stream, want string
		ends         int
	}{
		{"marker alone", string(marker), "", 1},
		{"output then marker", "hello\n" + string(marker), "hello\n", 1},
		{"a false start", "\x00svc-en\x00x" + string(marker), "\x00svc-en\x00x", 1},
		{"no marker: the stream was cut", "partial \x00svc-end-01", "partial \x00svc-end-01", 0},
		{"after the marker", string(marker) + "late", "late", 1},
	} {
		for _, cuts := range [][]byte{nil, {1}, {3}, {5, 1, 7}, {64}} {
			got, ends := scanAll(marker, []byte(tc.stream), cuts)
			if string(got) != tc.want || ends != tc.ends {
				t.Errorf("%s (chunks %v): output %q with %d ends, want %q with %d", tc.name, cuts, got, ends, tc.want, tc.ends)
			}
		}
	}
	var nilScanner *endScanner
	if b, ended := nilScanner.scan([]byte("tty")); string(b) != "tty" || ended || nilScanner.flush() != nil {
		t.Errorf("a nil scanner changed the output")
	}
}

// FuzzEndScanner: whatever the output and however it is cut into frames,
// the scanner gives back exactly the output around the first marker and
// reports the end once when there is one.
func FuzzEndScanner(f *testing.F) {
	f.Add([]byte("hello"), []byte("world"), []byte{3, 1})
	f.Add([]byte("\x00svc"), []byte(""), []byte{1})
	f.Fuzz(func(t *testing.T, before, after, cuts []byte) {
		marker := []byte("\x00svc-end-0123abcd\x00")
		stream := append(append(append([]byte(nil), before...), marker...), after...)
		if bytes.Index(stream, marker) != len(before) {
			return // the output itself holds (or completes) the marker
		}
		got, ends := scanAll(marker, stream, cuts)
		want := append(append([]byte(nil), before...), after...)
		if !bytes.Equal(got, want) || ends != 1 {
			t.Fatalf("output %q with %d ends, want %q once", got, ends, want)
		}
	})
}
