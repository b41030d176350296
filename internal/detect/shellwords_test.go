package detect

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  error
	}{
		{"gunicorn app:app --bind 0.0.0.0:8000", []string{"gunicorn", "app:app", "--bind", "0.0.0.0:8000"}, nil},
		{"  node   server.js\t", []string{"node", "server.js"}, nil},
		{`echo 'a b' "c d" e\ f`, []string{"echo", "a b", "c d", "e f"}, nil},
		{`echo "say \"hi\" \$HOME \\ \x"`, []string{"echo", `say "hi" $HOME \ \x`}, nil},
		{`echo 'it'\''s'`, []string{"echo", "it's"}, nil},
		{`a""b ''`, []string{"ab", ""}, nil},
		{"bin/web --port $PORT", []string{"bin/web", "--port", "$PORT"}, nil},
		{"run # a comment", []string{"run"}, nil},
		{"a#b", []string{"a#b"}, nil},
		{"", nil, nil},
		{"a && b", nil, errShellSyntax},
		{"a | b", nil, errShellSyntax},
		{"a > log", nil, errShellSyntax},
		{"a; b", nil, errShellSyntax},
		{"echo $(date)", nil, errShellSyntax},
		{"echo `date`", nil, errShellSyntax},
		{`echo "$(date)"`, nil, errShellSyntax},
		{`echo 'open`, nil, errShellSyntax},
		{`echo "open`, nil, errShellSyntax},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if !errors.Is(err, tt.err) {
			t.Errorf("splitWords(%q) error = %v; want %v", tt.in, err, tt.err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("splitWords(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestJoinWordsRoundTrip(t *testing.T) {
	for _, words := range [][]string{
		{"npm", "start"},
		{"sh", "-c", "echo $PORT && run"},
		{"a b", "", "it's", `back\slash`, "$x", "#c"},
	} {
		got, err := splitWords(joinWords(words))
		if err != nil {
			t.Errorf("splitWords(joinWords(%q)): %v", words, err)
			continue
		}
		if diff := cmp.Diff(words, got); diff != "" {
			t.Errorf("round trip of %q (-want +got):\n%s", words, diff)
		}
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"a b", `"a \" b"`, "'x'y", "a\\ b", "a && b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err != nil {
			return
		}
		again, err := splitWords(joinWords(words))
		if err != nil {
			t.Fatalf("joinWords(%q) does not split: %v", words, err)
		}
		if !slices.Equal(words, again) {
			t.Fatalf("round trip of %q gave %q", words, again)
		}
	})
}
