package icon

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"strings"
	"unicode"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// TileSize is the side of a generated tile, in pixels.
const TileSize = 256

// Tile draws the generated tile of an app: its initials in white, centred
// on a colour chosen by a hash of its ID, as a TileSize square PNG. The same
// ID and name always give the same bytes.
func Tile(id, name string) []byte {
	bg := tileColor(id)
	img := image.NewPaletted(image.Rect(0, 0, TileSize, TileSize), color.Palette{bg, color.White})
	// The initials in the 7×13 bitmap font, on a mask the size of the text.
	text := Initials(name)
	face := basicfont.Face7x13
	mask := image.NewAlpha(image.Rect(0, 0, face.Advance*len(text), face.Height))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(text)
	ink := inkBounds(mask)
	if ink.Empty() {
		ink = mask.Bounds()
	}
	// Scale the ink up by a whole factor (crisp pixels) to fill about half
	// of the tile, and centre it.
	scale := max(1, min(TileSize*55/100/ink.Dx(), TileSize/2/ink.Dy()))
	ox := (TileSize - ink.Dx()*scale) / 2
	oy := (TileSize - ink.Dy()*scale) / 2
	for y := ink.Min.Y; y < ink.Max.Y; y++ {
		for x := ink.Min.X; x < ink.Max.X; x++ {
			if mask.AlphaAt(x, y).A < 0x80 {
				continue
			}
			px, py := ox+(x-ink.Min.X)*scale, oy+(y-ink.Min.Y)*scale
			for dy := range scale {
				row := img.Pix[(py+dy)*img.Stride:]
				for dx := range scale {
					row[px+dx] = 1
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, img); err != nil {
		panic("icon: encode a generated tile: " + err.Error()) // writing to memory cannot fail
	}
	return buf.Bytes()
}

// Initials are what a generated tile shows: the first letter or digit of
// the name's first two words, upper-cased; one that is not ASCII shows as
// '?', and so does a name without any.
func Initials(name string) string {
	var out []rune
	for _, w := range strings.FieldsFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		r := unicode.ToUpper([]rune(w)[0])
		if r > unicode.MaxASCII {
			r = '?'
		}
		out = append(out, r)
		if len(out) == 2 {
			break
		}
	}
	if len(out) == 0 {
		return "?"
	}
	return string(out)
}

// tileColor picks a background from the ID's hash: any hue, at a
// saturation and lightness where white text stays readable.
func tileColor(id string) color.RGBA {
	sum := sha256.Sum256([]byte(id))
	return hsl(float64(binary.BigEndian.Uint32(sum[:4])%360), 0.55, 0.40)
}

func hsl(h, s, l float64) color.RGBA {
	c := (1 - abs(2*l-1)) * s
	hp := h / 60
	x := c * (1 - abs(mod2(hp)-1))
	var r, g, b float64
	switch {
	case hp < 1:
		r, g = c, x
	case hp < 2:
		r, g = x, c
	case hp < 3:
		g, b = c, x
	case hp < 4:
		g, b = x, c
	case hp < 5:
		r, b = x, c
	default:
		r, b = c, x
	}
	m := l - c/2
	to8 := func(v float64) uint8 { return uint8((v+m)*255 + 0.5) }
	return color.RGBA{R: to8(r), G: to8(g), B: to8(b), A: 0xFF}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// mod2 is v modulo 2 for v >= 0.
func mod2(v float64) float64 { return v - 2*float64(int(v/2)) }

// inkBounds is the smallest rectangle holding every drawn pixel of m.
func inkBounds(m *image.Alpha) image.Rectangle {
	var r image.Rectangle
	b := m.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if m.AlphaAt(x, y).A >= 0x80 {
				r = r.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return r
}

// tileHash is the hex SHA-256 of a tile's bytes, its ETag.
func tileHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
