// Package objects holds what the backup storage adapters (backupstores/local
// and backupstores/s3) share about the objects they keep: which keys and
// prefixes are valid (the rule backuprepo.Storage states), and a reader
// that yields exactly the size a Put announced, so that no adapter ever
// stores a truncated or overlong object as if it were whole.
//
// It must not import the store, the server or an adapter package.
package objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/svchost/svc/internal/errcode"
)

// Limits of keys: a segment must be a file name on every filesystem (with
// room for the local adapter's temporary suffix), and a key an S3 object
// name (at most 1024 bytes, with room for the adapter's prefix).
const (
	MaxSegment = 200
	MaxKey     = 768
)

// ValidKey checks a key: slash-separated segments of [a-z0-9._-], none
// empty, "." or "..", each at most MaxSegment bytes, at most MaxKey bytes
// in all.
func ValidKey(key string) error {
	if key == "" || len(key) > MaxKey {
		return badKey(key, "a key is 1 to %d bytes", MaxKey)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := validSegment(key, seg); err != nil {
			return err
		}
	}
	return nil
}

// ValidPrefix checks a List prefix: empty, or complete segments as in a key
// followed by the start of one (which may be empty: "chunks/" lists
// everything under chunks).
func ValidPrefix(prefix string) error {
	if len(prefix) > MaxKey {
		return badKey(prefix, "a prefix is at most %d bytes", MaxKey)
	}
	segs := strings.Split(prefix, "/")
	for _, seg := range segs[:len(segs)-1] {
		if err := validSegment(prefix, seg); err != nil {
			return err
		}
	}
	if last := segs[len(segs)-1]; strings.IndexFunc(last, notKeyByte) >= 0 {
		return badKey(prefix, "keys are made of a-z, 0-9, '.', '_', '-' and '/'")
	}
	return nil
}

func validSegment(key, seg string) error {
	switch {
	case seg == "":
		return badKey(key, "a key has no empty segment (no leading, trailing or double '/')")
	case seg == "." || seg == "..":
		return badKey(key, "a key has no '.' or '..' segment")
	case len(seg) > MaxSegment:
		return badKey(key, "a key's segments are at most %d bytes", MaxSegment)
	case strings.IndexFunc(seg, notKeyByte) >= 0:
		return badKey(key, "keys are made of a-z, 0-9, '.', '_', '-' and '/'")
	}
	return nil
}

func notKeyByte(r rune) bool {
	return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '_' && r != '-'
}

func badKey(key, format string, args ...any) error {
	const shown = 80
	if len(key) > shown {
		key = key[:shown] + "…"
	}
	return errcode.Invalid("key", "backup storage key %q is not valid: "+format, append([]any{key}, args...)...)
}

// Exact returns a reader of r that yields exactly size bytes, then EOF, and
// fails instead when r ends early (ErrShort) or holds more (ErrLong), or
// when ctx ends. The failure comes before the last byte is handed on, so a
// consumer that stores what it reads never sees a whole object that is not
// one. Errors of r are returned as they are.
func Exact(ctx context.Context, r io.Reader, size int64) io.Reader {
	return &exact{ctx: ctx, r: r, left: size, size: size}
}

// ErrShort and ErrLong say a Put's reader did not hold the size it
// announced.
var (
	ErrShort = errors.New("the object's reader ended before the size given")
	ErrLong  = errors.New("the object's reader holds more than the size given")
)

type exact struct {
	ctx  context.Context
	r    io.Reader
	left int64
	size int64
	err  error
}

func (e *exact) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if err := e.ctx.Err(); err != nil {
		e.err = err
		return 0, err
	}
	if e.left == 0 {
		if err := e.atEnd(); err != nil {
			e.err = err
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	switch {
	case err == io.EOF && e.left > 0:
		e.err = fmt.Errorf("%w: %d of %d bytes", ErrShort, e.size-e.left, e.size)
		return 0, e.err
	case err != nil && err != io.EOF:
		e.err = err
		return 0, err
	case e.left == 0:
		// The last bytes are handed on only once r is known to end here.
		if err := e.atEnd(); err != nil {
			e.err = err
			return 0, err
		}
	}
	return n, nil
}

// atEnd checks that r has nothing after the size given.
func (e *exact) atEnd() error {
	var b [1]byte
	for {
		n, err := e.r.Read(b[:])
		switch {
		case n > 0:
			return fmt.Errorf("%w (%d bytes)", ErrLong, e.size)
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}
