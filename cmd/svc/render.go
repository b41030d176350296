package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Rendering an answer for people when no command written by hand knows
// its shape: a list (an object with items) is a table of the items' plain
// fields; an object is its fields, nested objects flattened into dotted
// names, each list of objects a table of its own after them. The fields
// keep the API's order. --output json is there for everything else.

// jsonNode is a decoded JSON value that keeps its objects' key order.
type jsonNode struct {
	kind  byte // 'o' object, 'a' array, 's' scalar
	keys  []string
	vals  []*jsonNode
	items []*jsonNode
	value any // a scalar: string, json.Number, bool or nil
}

// decodeOrdered decodes b into a jsonNode.
func decodeOrdered(b []byte) (*jsonNode, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	n, err := decodeNode(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return n, nil
}

func decodeNode(d *json.Decoder) (*jsonNode, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		n := &jsonNode{kind: 'o'}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeNode(d)
			if err != nil {
				return nil, err
			}
			n.keys, n.vals = append(n.keys, k.(string)), append(n.vals, v)
		}
		_, err := d.Token()
		return n, err
	case json.Delim('['):
		n := &jsonNode{kind: 'a'}
		for d.More() {
			v, err := decodeNode(d)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, v)
		}
		_, err := d.Token()
		return n, err
	}
	return &jsonNode{kind: 's', value: tok}, nil
}

func (n *jsonNode) get(key string) *jsonNode {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// plain reports whether n shows in one cell: a scalar, or a list of
// scalars.
func (n *jsonNode) plain() bool {
	if n.kind == 's' {
		return true
	}
	if n.kind != 'a' {
		return false
	}
	for _, it := range n.items {
		if it.kind != 's' {
			return false
		}
	}
	return true
}

// cell is n as a table cell or a field's value.
func (p printer) cell(key string, n *jsonNode) string {
	switch n.kind {
	case 'a':
		parts := make([]string, len(n.items))
		for i, it := range n.items {
			parts[i] = p.cell(key, it)
		}
		return strings.Join(parts, ", ")
	case 's':
		switch v := n.value.(type) {
		case nil:
			return ""
		case string:
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil && (strings.HasSuffix(key, "_at") || key == "time") {
				return t.Local().Format(time.DateTime)
			}
			if key == "state" || key == "health" {
				return p.state(v)
			}
			return v
		default:
			return fmt.Sprint(v)
		}
	}
	return ""
}

// label is a field's name for people: created_at is "Created at",
// user.role_id "User role ID".
func label(key string) string {
	words := strings.FieldsFunc(key, func(r rune) bool { return r == '_' || r == ' ' || r == '.' })
	for i, w := range words {
		for _, abbr := range []string{"id", "url", "ids", "cpu", "ttl", "tls", "ip"} {
			if w == abbr {
				words[i] = strings.ToUpper(w)
			}
		}
	}
	s := strings.Join(words, " ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// maxColumns caps a table's columns; --output json shows the rest.
const maxColumns = 8

// render prints an API answer for people; hints (the next page) go to
// hint.
func render(p printer, hint io.Writer, b []byte) error {
	n, err := decodeOrdered(b)
	if err != nil {
		return p.raw(b) // not JSON: as it came
	}
	// {"deployment": {...}} and the like: the object itself.
	for n.kind == 'o' && len(n.keys) == 1 && n.vals[0].kind == 'o' {
		n = n.vals[0]
	}
	if n.kind == 'o' {
		if items := n.get("items"); items != nil && items.kind == 'a' {
			if err := p.itemsTable(items.items); err != nil {
				return err
			}
			for _, k := range []string{"next_cursor", "next_before"} {
				if c := n.get(k); c != nil && c.kind == 's' && c.value != nil && c.value != "" {
					flag := "--" + strings.TrimPrefix(k, "next_")
					fmt.Fprintf(hint, "more: the same command with %s %v\n", flag, c.value)
				}
			}
			// What the answer has beside its items (the launcher's
			// sections, the pinned revision): after the table.
			rest := &jsonNode{kind: 'o'}
			for i, k := range n.keys {
				if k != "items" && k != "next_cursor" && k != "next_before" {
					rest.keys, rest.vals = append(rest.keys, k), append(rest.vals, n.vals[i])
				}
			}
			if len(rest.keys) == 0 {
				return nil
			}
			if slices.ContainsFunc(rest.vals, func(v *jsonNode) bool { return v.kind != 'a' || v.plain() }) {
				if err := p.line(""); err != nil { // lists of objects start with one
					return err
				}
			}
			return p.object(rest)
		}
		return p.object(n)
	}
	if n.kind == 'a' {
		return p.itemsTable(n.items)
	}
	return p.line("%s", p.cell("", n))
}

// itemsTable prints a list: a table of the items' plain fields, in the
// first item's order; scalars one a line.
func (p printer) itemsTable(items []*jsonNode) error {
	if len(items) == 0 {
		return p.line("(none)")
	}
	if items[0].kind != 'o' {
		for _, it := range items {
			if err := p.line("%s", p.cell("", it)); err != nil {
				return err
			}
		}
		return nil
	}
	// The items' plain fields, and those of an object in them one level
	// down (a launcher entry's app.name).
	var cols []string
	for _, it := range items {
		for i, k := range it.keys {
			v := it.vals[i]
			if v.plain() && !slices.Contains(cols, k) && len(cols) < maxColumns {
				cols = append(cols, k)
			}
			if v.kind != 'o' {
				continue
			}
			for j, sk := range v.keys {
				if name := k + "." + sk; v.vals[j].plain() && !slices.Contains(cols, name) && len(cols) < maxColumns {
					cols = append(cols, name)
				}
			}
		}
	}
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = strings.ToUpper(strings.NewReplacer("_", " ", ".", " ").Replace(c))
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		row := make([]string, len(cols))
		for i, c := range cols {
			v := it.get(c)
			if k, sk, nested := strings.Cut(c, "."); v == nil && nested {
				if o := it.get(k); o != nil && o.kind == 'o' {
					v, c = o.get(sk), sk
				}
			}
			if v != nil && v.plain() {
				row[i] = clip(p.cell(c, v))
			}
		}
		rows = append(rows, row)
	}
	return p.table(header, rows)
}

// maxCell caps a table cell's width; --output json has the whole value.
const maxCell = 72

// clip shortens a cell longer than maxCell runes, ending it with "…".
func clip(s string) string {
	if r := []rune(s); len(r) > maxCell {
		return string(r[:maxCell-1]) + "…"
	}
	return s
}

// object prints an object's fields, then each list of objects in it as a
// table of its own.
func (p printer) object(n *jsonNode) error {
	var pairs []string
	type sub struct {
		name  string
		items []*jsonNode
	}
	var subs []sub
	var walk func(prefix string, n *jsonNode)
	walk = func(prefix string, n *jsonNode) {
		for i, k := range n.keys {
			v, name := n.vals[i], prefix+k
			switch {
			case v.plain():
				pairs = append(pairs, label(name), p.cell(k, v))
			case v.kind == 'o':
				if len(v.keys) == 0 {
					pairs = append(pairs, label(name), "")
				}
				walk(name+".", v)
			default:
				subs = append(subs, sub{name, v.items})
			}
		}
	}
	walk("", n)
	if err := p.fields(pairs...); err != nil {
		return err
	}
	for _, s := range subs {
		if err := p.line("\n%s:", label(s.name)); err != nil {
			return err
		}
		if err := p.itemsTable(s.items); err != nil {
			return err
		}
	}
	return nil
}
