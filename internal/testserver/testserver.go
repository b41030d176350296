// Package testserver holds what the harnesses of real external servers in
// tests (a PostgreSQL cluster, a Vault dev server) share: free loopback
// ports, random credentials, a clean environment for the child process, and
// the tail of its log for a failure message.
//
// It is for tests only and must not be imported by production code.
package testserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// FreePorts returns the first of n adjacent loopback ports that were free a
// moment ago (a server may still take one before the caller binds it:
// callers retry on another).
func FreePorts(n int) (int, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("pick a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		var held []net.Listener
		ok := true
		for i := 1; i < n; i++ {
			next, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+i))
			if err != nil {
				ok = false
				break
			}
			held = append(held, next)
		}
		_ = ln.Close()
		for _, l := range held {
			_ = l.Close()
		}
		if ok {
			return port, nil
		}
	}
	return 0, errors.New("pick a free port: no adjacent free loopback ports")
}

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// EnvironWithout returns this process's environment minus the variables
// whose names start with any of the prefixes.
func EnvironWithout(prefixes ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			out = append(out, kv)
		}
	}
	return out
}

// Tail returns at most the last n bytes of a file, from a line start.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
		return "…\n" + string(b)
	}
	return string(b)
}
