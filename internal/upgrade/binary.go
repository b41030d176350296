package upgrade

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// CheckTimeout bounds a candidate binary's "version" run.
const CheckTimeout = 10 * time.Second

// Receive writes body to a new executable file next to exe (the same
// directory, so the swap is a rename on one filesystem) and returns its
// path and the SHA-256 digest of what was written. The caller removes the
// file when it is not swapped in.
func Receive(exe string, body io.Reader) (path string, digest [32]byte, size int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(exe), "."+filepath.Base(exe)+".upgrade-*")
	if err != nil {
		return "", digest, 0, fmt.Errorf("write the new binary next to %s: %w", exe, err)
	}
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(f, h), body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o755)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", digest, 0, err
	}
	copy(digest[:], h.Sum(nil))
	return f.Name(), digest, size, nil
}

// Check runs the binary at path with "version" (bounded by CheckTimeout,
// with an empty environment) and returns the version it printed.
func Check(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version")
	cmd.Env = []string{}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{w: &out, n: 4096}, &limited{w: &stderr, n: 4096}
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("\"version\" did not finish within %s", CheckTimeout)
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("\"version\" failed (%s)%s", ee.ProcessState, lastLineSuffix(stderr.Bytes()))
		}
		return "", fmt.Errorf("it does not run: %v", err)
	}
	v := ParseVersionOutput(out.Bytes())
	if v == "" {
		return "", errors.New("\"version\" printed no version")
	}
	return v, nil
}

// limited writes at most n bytes to w and drops the rest.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	k := min(len(p), l.n)
	if k > 0 {
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// PrevPath is where the previous binary is kept during an upgrade.
func PrevPath(exe string) string { return exe + ".prev" }

// Swap puts the binary at next in exe's place, keeping the current one as
// exe.prev: exe is linked (or copied) to exe.prev, then next renamed over
// exe, so that exe names a whole binary at every moment.
func Swap(exe, next string) error {
	prev := PrevPath(exe)
	_ = os.Remove(prev)
	if err := os.Link(exe, prev); err != nil {
		if err := copyFile(exe, prev); err != nil {
			return fmt.Errorf("keep the current binary as %s: %w", prev, err)
		}
	}
	if err := os.Rename(next, exe); err != nil {
		return fmt.Errorf("swap in the new binary: %w", err)
	}
	return nil
}

// SwapBack renames exe.prev back over exe.
func SwapBack(exe string) error {
	if err := os.Rename(PrevPath(exe), exe); err != nil {
		return fmt.Errorf("restore the previous binary: %w", err)
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// lastLine is the last non-empty line of b, at most 200 bytes.
func lastLine(b []byte) string {
	b = bytes.TrimRight(b, "\r\n\t ")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	s := string(bytes.TrimSpace(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func lastLineSuffix(b []byte) string {
	if l := lastLine(b); l != "" {
		return ": " + l
	}
	return ""
}
