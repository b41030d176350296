package icon

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// gradient is a w×h image with some colour in it.
func gradient(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, color.NRGBA{uint8(x), uint8(y), uint8(x ^ y), 0xFF})
		}
	}
	return m
}

func encodePNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeJPEG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// encodeGIF encodes frames of a w×h paletted image.
func encodeGIF(t testing.TB, w, h, frames int) []byte {
	t.Helper()
	g := &gif.GIF{}
	for i := range frames {
		p := image.NewPaletted(image.Rect(0, 0, w, h), palette.Plan9)
		for j := range p.Pix {
			p.Pix[j] = uint8(i + j)
		}
		g.Image = append(g.Image, p)
		g.Delay = append(g.Delay, 10)
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pngChunk is one PNG chunk with its CRC.
func pngChunk(typ string, data []byte) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
	b.WriteString(typ)
	b.Write(data)
	_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	return b.Bytes()
}

// pngHeader is a PNG that is only a signature and a header claiming w×h
// pixels of the given bit depth and colour type (and an empty IDAT): what a
// pixel bomb looks like before its data.
func pngHeader(w, h uint32, depth, colorType byte) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = depth, colorType
	b := []byte("\x89PNG\r\n\x1a\n")
	b = append(b, pngChunk("IHDR", ihdr)...)
	b = append(b, pngChunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})...)
	return append(b, pngChunk("IEND", nil)...)
}

// padPNG inserts a private ancillary chunk before IEND so that the file is
// exactly n bytes.
func padPNG(t testing.TB, b []byte, n int) []byte {
	t.Helper()
	iend := len(b) - 12
	pad := n - len(b) - 12
	if pad < 0 {
		t.Fatalf("the PNG is already %d bytes", len(b))
	}
	out := append([]byte{}, b[:iend]...)
	out = append(out, pngChunk("prVt", make([]byte, pad))...)
	return append(out, b[iend:]...)
}

// manyFrameGIF is a 1×1 GIF of n one-pixel frames, written block by block.
func manyFrameGIF(n int) []byte {
	b := []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00" + "\x00\x00\x00\xff\xff\xff")
	frame := []byte{0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0x02, 0x02, 0x44, 0x01, 0x00}
	for range n {
		b = append(b, frame...)
	}
	return append(b, 0x3B)
}

// bigFramesGIF has a w×h screen and n frames each claiming all of it, with
// no pixel data behind them.
func bigFramesGIF(w, h uint16, n int) []byte {
	b := []byte("GIF89a")
	b = binary.LittleEndian.AppendUint16(b, w)
	b = binary.LittleEndian.AppendUint16(b, h)
	b = append(b, 0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff)
	for range n {
		b = append(b, 0x2C, 0, 0, 0, 0)
		b = binary.LittleEndian.AppendUint16(b, w)
		b = binary.LittleEndian.AppendUint16(b, h)
		b = append(b, 0, 0x02, 0x02, 0x44, 0x01, 0x00)
	}
	return append(b, 0x3B)
}

// webpVP8X is an extended WebP header claiming w×h pixels, with flags.
func webpVP8X(w, h uint32, flags byte) []byte {
	chunk := []byte{flags, 0, 0, 0}
	chunk = append(chunk, byte(w-1), byte((w-1)>>8), byte((w-1)>>16), byte(h-1), byte((h-1)>>8), byte((h-1)>>16))
	body := append([]byte("WEBPVP8X\x0a\x00\x00\x00"), chunk...)
	b := []byte("RIFF")
	b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// corruptScan replaces a JPEG's entropy-coded data with all-ones bits (a
// stuffed 0xFF 0x00 run), which no Huffman table may contain.
func corruptScan(t testing.TB, b []byte) []byte {
	t.Helper()
	sos := bytes.Index(b, []byte{0xFF, 0xDA})
	if sos < 0 {
		t.Fatal("no SOS")
	}
	start := sos + 2 + int(binary.BigEndian.Uint16(b[sos+2:]))
	out := append([]byte{}, b[:start]...)
	for range (len(b) - start - 2) / 2 {
		out = append(out, 0xFF, 0x00)
	}
	return append(out, 0xFF, 0xD9)
}

func TestCheckAccepts(t *testing.T) {
	animated := encodeGIF(t, 24, 16, 3)
	exact := padPNG(t, encodePNG(t, gradient(32, 32)), MaxBytes)
	cases := []struct {
		name   string
		b      []byte
		format Format
		w, h   int
	}{
		{"png", encodePNG(t, gradient(64, 48)), PNG, 64, 48},
		{"paletted png", encodePNG(t, image.NewPaletted(image.Rect(0, 0, 20, 10), palette.WebSafe)), PNG, 20, 10},
		{"16-bit png", encodePNG(t, image.NewNRGBA64(image.Rect(0, 0, 30, 30))), PNG, 30, 30},
		{"jpeg", encodeJPEG(t, gradient(64, 64)), JPEG, 64, 64},
		{"grey jpeg", encodeJPEG(t, image.NewGray(image.Rect(0, 0, 17, 9))), JPEG, 17, 9},
		{"gif", encodeGIF(t, 32, 32, 1), GIF, 32, 32},
		{"animated gif", animated, GIF, 24, 16},
		{"lossless webp", readFixture(t, "lossless.webp"), WebP, 16, 16},
		{"lossy webp with alpha", readFixture(t, "lossy-alpha.webp"), WebP, 16, 16},
		{"png of exactly 256 KiB", exact, PNG, 32, 32},
		{"a side of 4096", encodePNG(t, image.NewGray(image.Rect(0, 0, 4096, 2))), PNG, 4096, 2},
		{"200 frames", manyFrameGIF(MaxFrames), GIF, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, cfg, err := Check(c.b)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if f != c.format || cfg.Width != c.w || cfg.Height != c.h {
				t.Errorf("got %s %d×%d, want %s %d×%d", f, cfg.Width, cfg.Height, c.format, c.w, c.h)
			}
		})
	}
	if len(exact) != MaxBytes {
		t.Errorf("the padded PNG is %d bytes", len(exact))
	}
}

func TestCheckRefuses(t *testing.T) {
	pngOK := encodePNG(t, gradient(40, 40))
	jpegOK := encodeJPEG(t, gradient(40, 40))
	gifOK := encodeGIF(t, 8, 8, 1)
	badDHT := append([]byte{}, jpegOK...)
	if i := bytes.Index(badDHT, []byte{0xFF, 0xC4}); i > 0 {
		for j := i + 5; j < i+5+16; j++ { // the code counts: far more codes than exist
			badDHT[j] = 0xFF
		}
	}
	utf16 := func(s string) []byte {
		b := []byte{0xFF, 0xFE}
		for _, r := range s {
			b = append(b, byte(r), 0)
		}
		return b
	}
	cases := []struct {
		name string
		b    []byte
		want string // in the message
	}{
		{"empty", nil, "empty"},
		{"one byte over 256 KiB", append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, MaxBytes+1-8)...), "over 256 KB"},
		{"svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>`), "SVG"},
		{"svg with an xml prolog", []byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<!DOCTYPE svg><svg xmlns="http://www.w3.org/2000/svg"/>`), "SVG"},
		{"svg after a BOM and whitespace", []byte("\xEF\xBB\xBF \r\n\t <svg onload=alert(1)>"), "SVG"},
		{"svg in UTF-16", utf16(`<svg xmlns="http://www.w3.org/2000/svg"/>`), "SVG"},
		{"svg with a comment first", []byte("<!-- made by hand --><SVG></SVG>"), "SVG"},
		{"html", []byte("<!doctype html><html><body><script>alert(1)</script>"), "markup"},
		{"xml", []byte("<?xml version='1.0'?><x/>"), "markup"},
		{"text", []byte("hello, world"), "not a PNG, JPEG, WebP or GIF"},
		{"bmp", append([]byte("BM"), make([]byte, 64)...), "not a PNG"},
		{"png signature only", []byte("\x89PNG\r\n\x1a\n"), "header cannot be read"},
		{"png of 100000×100000", pngHeader(100000, 100000, 8, 6), "at most 4096 on a side"},
		{"png of 0×10", pngHeader(0, 10, 8, 6), "header cannot be read"},
		{"png over 16 megapixels", pngHeader(4096, 4096, 8, 0), "16 megapixels"},
		{"16-bit png too large to decode", pngHeader(4000, 4000, 16, 6), "too large to decode"},
		{"truncated png", pngOK[:len(pngOK)/2], "cannot be decoded"},
		{"png with a bad checksum", append(append([]byte{}, pngOK[:len(pngOK)-20]...), bytes.Repeat([]byte{0x55}, 20)...), "cannot be decoded"},
		{"jpeg with bad huffman data", corruptScan(t, jpegOK), "cannot be decoded"},
		{"jpeg with a bad huffman table", badDHT, "cannot be decoded"},
		{"truncated jpeg", jpegOK[:len(jpegOK)/3], "JPEG image"},
		{"jpeg magic only", []byte{0xFF, 0xD8, 0xFF}, "header cannot be read"},
		{"gif of 10000 frames", manyFrameGIF(10_000), "more than 200 frames"},
		{"gif frames over 32 megapixels together", bigFramesGIF(4000, 4000, 3), "megapixels together"},
		{"gif polyglot: header and script", []byte("GIF89a/*\x00\x00\x00\x00*/=alert(document.domain);//"), "no pixels"},
		{"gif followed by a script", append(append([]byte{}, gifOK...), []byte("<script>alert(1)</script>")...), "data follows the end"},
		{"truncated gif", gifOK[:len(gifOK)-6], "GIF"},
		{"animated webp", readFixture(t, "animated.webp"), "animated WebP"},
		{"webp of 16384×16384", webpVP8X(16384, 16384, 0), "at most 4096 on a side"},
		{"webp header without a frame", webpVP8X(64, 64, 0), "cannot be decoded"},
		{"truncated webp", readFixture(t, "lossless.webp")[:30], "WebP"},
		{"riff that is not webp", []byte("RIFF\x10\x00\x00\x00WAVEfmt \x00\x00\x00\x00"), "not a PNG"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, _, err := Check(c.b)
			if err == nil {
				t.Fatalf("accepted as %s", f)
			}
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.ValidInvalid || e.Status() != 400 {
				t.Fatalf("err = %v, want a 400 VALID_INVALID", err)
			}
			if !strings.Contains(e.Message, c.want) {
				t.Errorf("message %q does not say %q", e.Message, c.want)
			}
			if e.Message != strings.ToLower(e.Message[:1])+e.Message[1:] && !strings.HasPrefix(e.Message, "SVG") {
				t.Errorf("message %q is not lower case", e.Message)
			}
		})
	}
}

// A pixel bomb is refused on its header: quickly, and without allocating
// its pixels.
func TestPixelBombsAreRefusedBeforeDecoding(t *testing.T) {
	for _, b := range [][]byte{
		pngHeader(100000, 100000, 8, 6),
		pngHeader(4096, 4096, 16, 6),
		pngHeader(4000, 4000, 16, 6),
		bigFramesGIF(4000, 4000, 3),
		manyFrameGIF(10_000),
		webpVP8X(16384, 16384, 0),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, _, err := Check(b)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("accepted a bomb of %d bytes", len(b))
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
			t.Errorf("%s: allocated %d bytes", errcode.MessageOf(err), alloc)
		}
		if took > time.Second {
			t.Errorf("%s: took %v", errcode.MessageOf(err), took)
		}
	}
}

func TestGuardTurnsAPanicIntoAnError(t *testing.T) {
	err := guard(func() error { panic("decoder bug") })
	if err == nil || !strings.Contains(err.Error(), "decoder bug") {
		t.Fatalf("guard = %v", err)
	}
}

func TestFormatContentType(t *testing.T) {
	for f, want := range map[Format]string{PNG: "image/png", JPEG: "image/jpeg", GIF: "image/gif", WebP: "image/webp", "": ""} {
		if got := f.ContentType(); got != want {
			t.Errorf("%q.ContentType() = %q, want %q", f, got, want)
		}
	}
}

// noisePNG is a PNG of random pixels, about n bytes (noise does not
// compress).
func noisePNG(t testing.TB, n int) []byte {
	t.Helper()
	side := 1
	for (side+1)*(side+1)*4 < n {
		side++
	}
	m := image.NewNRGBA(image.Rect(0, 0, side, side))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range m.Pix {
		m.Pix[i] = uint8(r.Uint32())
	}
	return encodePNG(t, m)
}

func BenchmarkCheck(b *testing.B) {
	img := noisePNG(b, 200_000)
	if len(img) > MaxBytes || len(img) < 190_000 {
		b.Fatalf("the benchmark PNG is %d bytes", len(img))
	}
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Check(img); err != nil {
			b.Fatal(err)
		}
	}
}
