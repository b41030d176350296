package password

import (
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	const samples = 2000
	seen := make(map[string]bool, samples)
	lengths := make(map[int]int)
	freq := make(map[rune]int)
	total := 0
	for range samples {
		pw, err := Generate()
		if err != nil {
			t.Fatalf("Generate: %v", err)
		}
		if n := len(pw); n < 18 || n > 22 {
			t.Errorf("Generate() = %q, length %d, want 18 to 22", pw, n)
		}
		lengths[len(pw)]++
		for _, class := range []struct{ name, chars string }{
			{"upper-case letter", genUpper},
			{"lower-case letter", genLower},
			{"digit", genDigits},
			{"symbol", genSymbol},
		} {
			if !strings.ContainsAny(pw, class.chars) {
				t.Errorf("Generate() = %q, no %s", pw, class.name)
			}
		}
		if strings.ContainsAny(pw, "0O1lI") {
			t.Errorf("Generate() = %q, contains an ambiguous character", pw)
		}
		for _, r := range pw {
			if !strings.ContainsRune(genAll, r) {
				t.Errorf("Generate() = %q, contains %q outside the alphabet", pw, r)
			}
			freq[r]++
			total++
		}
		if err := Check(pw, ""); err != nil {
			t.Errorf("Check(Generate() = %q) = %v", pw, err)
		}
		if seen[pw] {
			t.Errorf("Generate() = %q twice", pw)
		}
		seen[pw] = true
	}
	// Loose uniformity: every length and character occurs about as often
	// as expected. The bounds are many standard deviations wide, so a
	// correct generator practically never fails them, while a broken one
	// (a fixed length, a character never drawn, a gross bias) does.
	for n := 18; n <= 22; n++ {
		if got, want := lengths[n], samples/5; got < want*6/10 || got > want*14/10 {
			t.Errorf("length %d occurred %d times in %d, want about %d", n, got, samples, want)
		}
	}
	for _, r := range genAll {
		want := total / len(genAll)
		if got := freq[r]; got < want*6/10 || got > want*14/10 {
			t.Errorf("character %q occurred %d times in %d, want about %d", r, got, total, want)
		}
	}
}

func TestGeneratorAlphabet(t *testing.T) {
	seen := map[rune]bool{}
	for _, r := range genAll {
		if seen[r] {
			t.Errorf("alphabet has %q twice", r)
		}
		seen[r] = true
	}
	if got, want := len(genAll), 24+25+8+12; got != want {
		t.Errorf("alphabet has %d characters, want %d", got, want)
	}
}
