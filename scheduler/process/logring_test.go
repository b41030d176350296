package process

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestLogRingCap(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		write []string
		want  []string
	}{
		{"keeps all under the cap", 100, []string{"a\nb\n"}, []string{"a", "b"}},
		{"drops the oldest lines", 8, []string{"111\n222\n333\n"}, []string{"222", "333"}},
		{"joins partial writes", 100, []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"cuts a line longer than the cap", 5, []string{"abcdefgh\n"}, []string{"efgh"}},
		{"cuts a partial line at the cap", 4, []string{"abcdef"}, []string{"def"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newLogRing(tt.max, nil)
			for _, w := range tt.write {
				if _, err := r.Write([]byte(w)); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.Lines(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
			if r.Size() > tt.max {
				t.Errorf("size = %d, over the cap %d", r.Size(), tt.max)
			}
		})
	}
}

func TestLogRingStaysUnderCap(t *testing.T) {
	r := newLogRing(1000, nil)
	for i := range 10000 {
		r.Add(fmt.Sprintf("line %05d %s", i, strings.Repeat("x", i%50)))
	}
	if r.Size() > 1000 {
		t.Fatalf("size = %d, want at most 1000", r.Size())
	}
	lines := r.Lines()
	if got, want := lines[len(lines)-1], "line 09999"; !strings.HasPrefix(got, want) {
		t.Errorf("last line = %q, want it to start %q", got, want)
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{emit: func(l string) { got = append(got, l) }}
	for _, s := range []string{"a\nb", "c\n", "tail"} {
		_, _ = w.Write([]byte(s))
	}
	w.Flush()
	if want := []string{"a", "bc", "tail"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
}
