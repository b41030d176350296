package icon

import (
	"image"
	"image/color/palette"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// FuzzCheck: Check never panics, refuses with VALID_INVALID only, and
// never accepts a file over the limits or of another format than its magic
// bytes say.
func FuzzCheck(f *testing.F) {
	seeds := [][]byte{
		encodePNG(f, gradient(9, 7)),
		encodePNG(f, image.NewPaletted(image.Rect(0, 0, 5, 5), palette.Plan9)),
		encodeJPEG(f, gradient(16, 8)),
		encodeGIF(f, 6, 4, 2),
		readFixture(f, "lossless.webp"),
		readFixture(f, "lossy-alpha.webp"),
		readFixture(f, "animated.webp"),
		pngHeader(100000, 100000, 8, 6),
		manyFrameGIF(3),
		bigFramesGIF(300, 200, 2),
		webpVP8X(64, 64, 0x10),
		[]byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`),
		[]byte("GIF89a/*\x00\x00\x00\x00*/=alert(1)"),
		{},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		format, cfg, err := Check(b)
		if err != nil {
			if errcode.CodeOf(err) != errcode.ValidInvalid {
				t.Fatalf("refused with %v", err)
			}
			return
		}
		switch {
		case len(b) == 0 || len(b) > MaxBytes:
			t.Fatalf("accepted %d bytes", len(b))
		case format == "" || format != sniff(b):
			t.Fatalf("accepted as %q, the magic bytes say %q", format, sniff(b))
		case cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > MaxSide || cfg.Height > MaxSide || cfg.Width*cfg.Height > MaxPixels:
			t.Fatalf("accepted %d×%d", cfg.Width, cfg.Height)
		}
		if format == GIF {
			if frames, _, err := scanGIF(b); err != nil || frames > MaxFrames {
				t.Fatalf("accepted a GIF of %d frames (%v)", frames, err)
			}
		}
	})
}
