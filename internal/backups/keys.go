package backups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"

	"github.com/svchost/svc/internal/errcode"
)

// LoadIdentity reads the installation's backup key, an age X25519
// identity (AGE-SECRET-KEY-1…), from path, making it (0600, in a 0700
// directory) on first use. Every backup is encrypted to it (and to the
// operator's recipients), so a backup is useless without it or one of
// theirs: operators keep a copy off the machine (docs/storage.md).
func LoadIdentity(path string) (*age.X25519Identity, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return makeIdentity(path)
	case err != nil:
		return nil, fmt.Errorf("read the backup key %s: %w", path, err)
	}
	id, err := age.ParseX25519Identity(strings.TrimSpace(lastLine(string(b))))
	if err != nil {
		return nil, fmt.Errorf("the backup key %s is not an age identity (AGE-SECRET-KEY-1…): %w", path, err)
	}
	return id, nil
}

// lastLine is the last non-comment line of an age identity file.
func lastLine(s string) string {
	out := ""
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = l
		}
	}
	return out
}

func makeIdentity(path string) (*age.X25519Identity, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	text := fmt.Sprintf("# svc's backup key: every backup is encrypted to it. Keep a copy off this machine.\n# public key: %s\n%s\n", id.Recipient(), id)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) { // made meanwhile by another start
			return LoadIdentity(path)
		}
		return nil, err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return id, f.Close()
}

// ParseRecipients reads the operator's recipients: age public keys
// (age1…), each of which can decrypt every backup with its identity.
func ParseRecipients(keys []string) ([]age.Recipient, error) {
	out := make([]age.Recipient, 0, len(keys))
	for i, k := range keys {
		r, err := age.ParseX25519Recipient(strings.TrimSpace(k))
		if err != nil {
			return nil, errcode.Invalid("backups.recipients", "recipient %d is not an age public key (age1…): %v", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}
