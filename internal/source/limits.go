package source

import "time"

// Default limits. An upload larger than DefaultMaxArchiveBytes is refused
// before it is read in full; the server caps the request body at the same
// size.
const (
	DefaultMaxArchiveBytes int64 = 100 << 20 // compressed upload
	DefaultMaxTotalBytes   int64 = 512 << 20 // uncompressed, all files together
	DefaultMaxFileBytes    int64 = 100 << 20 // uncompressed, one file
	DefaultMaxEntries            = 20_000
	DefaultMaxDepth              = 32
	DefaultMaxPathBytes          = 1024
	DefaultMaxRatio        int64 = 200     // uncompressed:compressed
	DefaultRatioGraceBytes int64 = 1 << 20 // the ratio applies past this many bytes
	DefaultCloneTimeout          = 5 * time.Minute
	maxNameComponentBytes        = 255 // NAME_MAX
	maxSymlinkHops               = 40  // as Linux's MAXSYMLINKS
)

// Limits bound what one archive or clone may put on disk. A zero field
// means its default.
type Limits struct {
	// MaxArchiveBytes caps the archive as uploaded (compressed).
	MaxArchiveBytes int64
	// MaxTotalBytes caps the bytes of all files together, uncompressed;
	// for a clone, the checkout without .git (and twice this the clone
	// while it runs, history included).
	MaxTotalBytes int64
	// MaxFileBytes caps one file.
	MaxFileBytes int64
	// MaxEntries caps files, directories and links.
	MaxEntries int
	// MaxDepth caps the directories in one path.
	MaxDepth int
	// MaxPathBytes caps one path; a single name is at most 255 bytes.
	MaxPathBytes int
	// MaxRatio caps uncompressed bytes per compressed byte, once more than
	// RatioGraceBytes have come out.
	MaxRatio        int64
	RatioGraceBytes int64
	// CloneTimeout bounds a git clone, checkout included.
	CloneTimeout time.Duration
}

// DefaultLimits returns the defaults.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

func (l Limits) withDefaults() Limits {
	set := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	setInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&l.MaxArchiveBytes, DefaultMaxArchiveBytes)
	set(&l.MaxTotalBytes, DefaultMaxTotalBytes)
	set(&l.MaxFileBytes, DefaultMaxFileBytes)
	setInt(&l.MaxEntries, DefaultMaxEntries)
	setInt(&l.MaxDepth, DefaultMaxDepth)
	setInt(&l.MaxPathBytes, DefaultMaxPathBytes)
	set(&l.MaxRatio, DefaultMaxRatio)
	set(&l.RatioGraceBytes, DefaultRatioGraceBytes)
	if l.CloneTimeout <= 0 {
		l.CloneTimeout = DefaultCloneTimeout
	}
	return l
}
