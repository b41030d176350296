package icon

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"

	"golang.org/x/image/webp"

	"github.com/svchost/svc/internal/errcode"
)

// Format is an image format a tile may be uploaded in.
type Format string

// The accepted formats.
const (
	PNG  Format = "png"
	JPEG Format = "jpeg"
	WebP Format = "webp"
	GIF  Format = "gif"
)

// ContentType is the media type an image of the format is served with.
func (f Format) ContentType() string {
	if f == "" {
		return ""
	}
	return "image/" + string(f)
}

// String is the format's name, for messages.
func (f Format) String() string {
	switch f {
	case PNG, JPEG, GIF:
		return strings.ToUpper(string(f))
	case WebP:
		return "WebP"
	}
	return string(f)
}

// Accepted lists the media types of the accepted formats, for messages.
func Accepted() []string {
	return []string{PNG.ContentType(), JPEG.ContentType(), WebP.ContentType(), GIF.ContentType()}
}

// Limits of an uploaded image. The byte limit is the contract's (256 KB);
// the others keep a small file from decoding into a large one (a pixel
// bomb): they are checked on the header alone, before anything is decoded.
const (
	// MaxBytes is the most an image file may hold.
	MaxBytes = 256 << 10
	// MaxSide is the most pixels on either side.
	MaxSide = 4096
	// MaxPixels is the most pixels of the image (16 megapixels).
	MaxPixels = 16_000_000
	// MaxFrames is the most frames of an animated GIF.
	MaxFrames = 200
	// MaxFramePixels is the most pixels of all of a GIF's frames together.
	MaxFramePixels = 2 * MaxPixels
	// MaxDecodeBytes bounds the memory one full decode is estimated to
	// take (pixels times the decoder's bytes per pixel for the format).
	MaxDecodeBytes = 64 << 20
	// decodeSlots is how many full decodes may run at once.
	decodeSlots = 2
)

// decoding holds a slot for each full decode in progress, so that
// concurrent uploads cannot multiply the decode memory bound.
var decoding = make(chan struct{}, decodeSlots)

// TooLarge is the refusal of an image file over MaxBytes.
func TooLarge() *errcode.Error {
	return errcode.New(errcode.ValidInvalid, "the image is over 256 KB (%d bytes)", MaxBytes).
		WithDetail("limit_bytes", MaxBytes).
		WithRemedy("upload a smaller PNG, JPEG, WebP or GIF image")
}

func invalid(format string, args ...any) *errcode.Error {
	return errcode.New(errcode.ValidInvalid, format, args...).WithDetail("accepted", Accepted())
}

// Check decides whether b is a tile image this accepts, by its content
// alone (never a declared type or a file name): at most MaxBytes; a PNG,
// JPEG, WebP or GIF by its magic bytes (SVG, and anything else, refused);
// dimensions within the limits, read from the header before any pixel is
// decoded; and the whole image decoding without error. It returns the
// format and the header's configuration. Every refusal is VALID_INVALID.
func Check(b []byte) (Format, image.Config, error) {
	if len(b) > MaxBytes {
		return "", image.Config{}, TooLarge()
	}
	if len(b) == 0 {
		return "", image.Config{}, invalid("the body is empty: send the image file itself")
	}
	f := sniff(b)
	if f == "" {
		return "", image.Config{}, refuseUnknown(b)
	}
	var cfg image.Config
	err := guard(func() (err error) {
		cfg, err = decodeConfig(f, b)
		return err
	})
	if err != nil {
		return "", image.Config{}, errcode.Wrap(err, errcode.ValidInvalid, "the %s image's header cannot be read: the file is damaged or not a %s image", f, f).
			WithDetail("accepted", Accepted())
	}
	if err := checkBounds(f, b, cfg); err != nil {
		return "", image.Config{}, err
	}
	decoding <- struct{}{}
	err = guard(func() error { return decode(f, b) })
	<-decoding
	if err != nil {
		return "", image.Config{}, errcode.Wrap(err, errcode.ValidInvalid, "the %s image cannot be decoded: the file is damaged or truncated", f).
			WithDetail("accepted", Accepted())
	}
	return f, cfg, nil
}

// sniff names the format by the file's magic bytes, or "".
func sniff(b []byte) Format {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		return JPEG
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return GIF
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return WebP
	}
	return ""
}

// refuseUnknown refuses a file of no accepted format, naming SVG and other
// markup when that is what it looks like.
func refuseUnknown(b []byte) error {
	head := b[:min(len(b), 1024)]
	for _, bom := range [][]byte{{0xEF, 0xBB, 0xBF}, {0xFE, 0xFF}, {0xFF, 0xFE}} {
		head = bytes.TrimPrefix(head, bom)
	}
	head = bytes.ReplaceAll(head, []byte{0}, nil) // UTF-16 text reads as ASCII
	head = bytes.ToLower(bytes.TrimLeft(head, " \t\r\n\f\v"))
	switch {
	case bytes.Contains(head, []byte("<svg")):
		return invalid("SVG images are refused: upload a PNG, JPEG, WebP or GIF image")
	case bytes.HasPrefix(head, []byte("<")):
		return invalid("markup (HTML, XML, SVG) is not an image: upload a PNG, JPEG, WebP or GIF image")
	}
	return invalid("not a PNG, JPEG, WebP or GIF image (the format is read from the file's content)")
}

// guard runs a decoder, turning a panic into an error: a decoder's bug on a
// hostile file must refuse the file, not fail the request.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panicked: %v", r)
		}
	}()
	return fn()
}

func decodeConfig(f Format, b []byte) (image.Config, error) {
	r := bytes.NewReader(b)
	switch f {
	case PNG:
		return png.DecodeConfig(r)
	case JPEG:
		return jpeg.DecodeConfig(r)
	case GIF:
		return gif.DecodeConfig(r)
	case WebP:
		return webp.DecodeConfig(r)
	}
	return image.Config{}, errors.New("unknown format")
}

// decode decodes the whole image (every frame of a GIF) and drops it.
func decode(f Format, b []byte) error {
	r := bytes.NewReader(b)
	var err error
	switch f {
	case PNG:
		_, err = png.Decode(r)
	case JPEG:
		_, err = jpeg.Decode(r)
	case GIF:
		_, err = gif.DecodeAll(r)
	case WebP:
		_, err = webp.Decode(r)
	}
	return err
}

// checkBounds refuses, on the header alone, an image whose decode would
// be too large: sides, pixels, the estimated decode memory, and for a GIF
// its frames; and an animated WebP, which the decoder cannot read.
func checkBounds(f Format, b []byte, cfg image.Config) error {
	w, h := cfg.Width, cfg.Height
	switch {
	case w <= 0 || h <= 0:
		return invalid("the image has no pixels (%d×%d)", w, h)
	case w > MaxSide || h > MaxSide:
		return invalid("the image is %d×%d pixels; at most %d on a side", w, h, MaxSide).WithDetail("max_side", MaxSide)
	case int64(w)*int64(h) > MaxPixels:
		return invalid("the image is %d×%d pixels; at most %d megapixels", w, h, MaxPixels/1_000_000).WithDetail("max_pixels", MaxPixels)
	}
	pixels := int64(w) * int64(h)
	switch f {
	case GIF:
		_, framePixels, err := scanGIF(b)
		if err != nil {
			return err
		}
		pixels += framePixels
	case WebP:
		if animatedWebP(b) {
			return invalid("animated WebP images are not supported: upload a still WebP, or an animated GIF")
		}
	}
	if est := pixels * int64(bytesPerPixel(f, b, cfg)); est > MaxDecodeBytes {
		return invalid("the image is %d×%d pixels, too large to decode for a tile: use a smaller image", w, h).WithDetail("max_decode_bytes", MaxDecodeBytes)
	}
	return nil
}

// bytesPerPixel estimates the memory the format's decoder takes per pixel,
// on the safe side.
func bytesPerPixel(f Format, b []byte, cfg image.Config) int {
	switch f {
	case PNG:
		n := 8
		switch cfg.ColorModel {
		case color.GrayModel:
			n = 1
		case color.Gray16Model:
			n = 2
		case color.RGBAModel, color.NRGBAModel:
			n = 4
		default:
			if _, ok := cfg.ColorModel.(color.Palette); ok {
				n = 1
			}
		}
		if len(b) > 28 && b[28] != 0 { // interlaced: each pass is decoded apart first
			n *= 2
		}
		return n
	case JPEG:
		comps := 3
		switch cfg.ColorModel {
		case color.GrayModel:
			comps = 1
		case color.CMYKModel:
			comps = 4
		}
		n := 3 * comps // the planes, and their conversion (RGB or CMYK)
		if progressiveJPEG(b) {
			n += 4 * comps // a coefficient (int32) per pixel and component
		}
		return n
	case GIF:
		return 1 // paletted; every frame is counted in the pixels
	case WebP:
		return 8 // lossless: a uint32 per pixel, then the NRGBA image
	}
	return 8
}

// progressiveJPEG reports whether the JPEG's frame is progressive (or
// cannot be told, to be safe).
func progressiveJPEG(b []byte) bool {
	for i := 2; i+4 <= len(b); {
		if b[i] != 0xFF {
			return true
		}
		m := b[i+1]
		switch {
		case m == 0xFF: // fill byte
			i++
			continue
		case m == 0x01 || m >= 0xD0 && m <= 0xD8: // markers without a length
			i += 2
			continue
		case m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE:
			return true
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC, m == 0xDA:
			return false
		}
		i += 2 + (int(b[i+2])<<8 | int(b[i+3]))
	}
	return true
}

// animatedWebP reports whether an extended WebP file says it is animated.
func animatedWebP(b []byte) bool {
	const animationBit = 1 << 1
	return len(b) >= 21 && string(b[12:16]) == "VP8X" && b[20]&animationBit != 0
}

// scanGIF walks a GIF's blocks without decoding any pixel data, and counts
// its frames and their pixels, so that a file of many or large frames is
// refused before the decoder allocates them. It also refuses a file that
// goes on after its trailer (an image that is also a script).
func scanGIF(b []byte) (frames int, pixels int64, err error) {
	malformed := func(what string) error { return invalid("the GIF image is malformed: %s", what) }
	const screen = 13 // header and logical screen descriptor
	if len(b) < screen {
		return 0, 0, malformed("too short")
	}
	i := screen
	if b[10]&0x80 != 0 {
		i += 3 << (b[10]&7 + 1)
	}
	subBlocks := func() error {
		for {
			if i >= len(b) {
				return malformed("truncated")
			}
			n := int(b[i])
			i += 1 + n
			if n == 0 {
				return nil
			}
		}
	}
	for {
		if i >= len(b) {
			return 0, 0, malformed("truncated: no trailer")
		}
		switch b[i] {
		case 0x21: // extension: label, then data sub-blocks
			i += 2
			if err := subBlocks(); err != nil {
				return 0, 0, err
			}
		case 0x2C: // image descriptor
			if i+10 > len(b) {
				return 0, 0, malformed("truncated frame")
			}
			frames++
			if frames > MaxFrames {
				return 0, 0, invalid("the GIF image has more than %d frames", MaxFrames).WithDetail("max_frames", MaxFrames)
			}
			fw, fh := int64(b[i+5])|int64(b[i+6])<<8, int64(b[i+7])|int64(b[i+8])<<8
			pixels += fw * fh
			if pixels > MaxFramePixels {
				return 0, 0, invalid("the GIF image's frames hold more than %d megapixels together", MaxFramePixels/1_000_000).
					WithDetail("max_frame_pixels", MaxFramePixels)
			}
			flags := b[i+9]
			i += 10
			if flags&0x80 != 0 {
				i += 3 << (flags&7 + 1)
			}
			i++ // LZW minimum code size
			if err := subBlocks(); err != nil {
				return 0, 0, err
			}
		case 0x3B: // trailer
			if frames == 0 {
				return 0, 0, malformed("no frame")
			}
			if len(bytes.Trim(b[i+1:], "\x00")) > 0 {
				return 0, 0, malformed("data follows the end of the image")
			}
			return frames, pixels, nil
		default:
			return 0, 0, malformed(fmt.Sprintf("unknown block 0x%02x", b[i]))
		}
	}
}
