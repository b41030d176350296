package password

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"strings"
)

// The generator's character classes: no 0/O, 1/l/I, and only symbols that
// are harmless in shells and URLs.
const (
	genUpper  = "ABCDEFGHJKLMNPQRSTUVWXYZ"
	genLower  = "abcdefghijkmnopqrstuvwxyz"
	genDigits = "23456789"
	genSymbol = "-_.:!@#%+=?*"
	genAll    = genUpper + genLower + genDigits + genSymbol

	genMinLen = 18
	genMaxLen = 22
)

// Generate returns a random password of 18 to 22 characters (the length is
// random too) with at least one upper-case letter, one lower-case letter, one
// digit and one symbol, avoiding characters that are easily confused.
//
// Every character is drawn uniformly from the whole alphabet and a candidate
// missing a class is drawn again, so the result is uniform among the valid
// passwords of its length (about 110 bits for 18 characters).
func Generate() (string, error) {
	n, err := randIntn(genMaxLen - genMinLen + 1)
	if err != nil {
		return "", err
	}
	n += genMinLen
	buf := make([]byte, n)
	for {
		for i := range buf {
			j, err := randIntn(len(genAll))
			if err != nil {
				return "", err
			}
			buf[i] = genAll[j]
		}
		s := string(buf)
		if strings.ContainsAny(s, genUpper) && strings.ContainsAny(s, genLower) &&
			strings.ContainsAny(s, genDigits) && strings.ContainsAny(s, genSymbol) {
			return s, nil
		}
	}
}

// randIntn returns a uniform random int in [0, n) from crypto/rand.
func randIntn(n int) (int, error) {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0, fmt.Errorf("generating a password: %w", err)
	}
	return int(v.Int64()), nil
}
