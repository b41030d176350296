package spec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Effects of a change on a deploy, from least to most.
const (
	EffectNone    = "none"
	EffectRestart = "restart"
	EffectRebuild = "rebuild"
)

var effectRank = map[string]int{EffectNone: 0, EffectRestart: 1, EffectRebuild: 2}

// Change is one difference between two documents: the path of the value
// that differs, its value before and after (null where absent), and what a
// deploy must do about it.
type Change struct {
	Path   string `json:"path"`
	From   any    `json:"from"`
	To     any    `json:"to"`
	Effect string `json:"effect"`
}

// DiffResult is the classified difference between two documents: the
// changes, ordered by path, and the largest of their effects.
type DiffResult struct {
	Effect  string   `json:"effect"`
	Changes []Change `json:"changes"`
}

// Diff classifies what changes from a to b:
//
//   - a workload's build: rebuild of that workload;
//   - a workload added or removed: rebuild;
//   - a workload's run, env, mounts, depends_on, resources or primary flag,
//     and the app's env: restart. The primary flag is compared as what it
//     means: the only workload with the field absent and one saying
//     primary: true are both primary (no change), and primary: false is
//     the field absent;
//   - a volume's or slot's declaration: restart when a workload of either
//     document uses it (mounts it, or refers to the slot from env), else
//     none;
//   - the runtime: its adapter, rebuild (the build's output may differ);
//     its isolation, restart;
//   - lifecycle (what happens to the app when idle): none.
//
// Maps are compared key by key and lists as a whole, so a change's path is
// the deepest that differs: workloads.web.run.port, env.LOG_LEVEL,
// workloads.web.mounts. Changes are ordered by path.
func Diff(a, b Document) DiffResult {
	d := &differ{}
	d.walk("env", plain(a.Env), plain(b.Env), func(string) string { return EffectRestart })
	d.walk("runtime", plain(a.Runtime), plain(b.Runtime), func(p string) string {
		if p == "runtime.adapter" {
			return EffectRebuild
		}
		return EffectRestart
	})
	d.walk("lifecycle", plain(a.Lifecycle), plain(b.Lifecycle), func(string) string { return EffectNone })
	for _, name := range union(a.Volumes, b.Volumes) {
		effect := EffectNone
		if mounts(a, name) || mounts(b, name) {
			effect = EffectRestart
		}
		d.walkValue("volumes."+name, plain(lookup(a.Volumes, name)), plain(lookup(b.Volumes, name)), effect)
	}
	for _, name := range union(a.Slots, b.Slots) {
		effect := EffectNone
		if refers(a, name) || refers(b, name) {
			effect = EffectRestart
		}
		d.walkValue("slots."+name, plain(lookup(a.Slots, name)), plain(lookup(b.Slots, name)), effect)
	}
	for _, name := range union(a.Workloads, b.Workloads) {
		at := "workloads." + name
		wa, inA := a.Workloads[name]
		wb, inB := b.Workloads[name]
		if inA && inB {
			wa, wb = a.primaryAsMeant(name, wa), b.primaryAsMeant(name, wb)
		}
		if inA != inB {
			d.add(at, plainIf(wa, inA), plainIf(wb, inB), EffectRebuild)
			continue
		}
		d.walk(at, plain(wa), plain(wb), func(p string) string {
			if p == at+".build" || strings.HasPrefix(p, at+".build.") {
				return EffectRebuild
			}
			return EffectRestart
		})
	}
	slices.SortStableFunc(d.res.Changes, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	if d.res.Changes == nil {
		d.res.Changes = []Change{}
	}
	if d.res.Effect == "" {
		d.res.Effect = EffectNone
	}
	return d.res
}

// primaryAsMeant returns w with its primary flag as the document means it:
// true on the document's primary workload, absent on the others. A
// document that names no primary (not valid) keeps its flags as written.
func (d Document) primaryAsMeant(name string, w Workload) Workload {
	p := d.Primary()
	switch {
	case p == "":
	case p == name:
		w.Primary = Bool(true)
	default:
		w.Primary = nil
	}
	return w
}

type differ struct{ res DiffResult }

func (d *differ) add(path string, from, to any, effect string) {
	d.res.Changes = append(d.res.Changes, Change{Path: path, From: from, To: to, Effect: effect})
	if effectRank[effect] > effectRank[d.res.Effect] {
		d.res.Effect = effect
	}
}

// walk compares two plain values, descending into maps (an absent map is
// an empty one) and comparing anything else whole; effect classifies each
// change by its path.
func (d *differ) walk(path string, x, y any, effect func(path string) string) {
	mx, xIsMap := x.(map[string]any)
	my, yIsMap := y.(map[string]any)
	if (xIsMap || x == nil) && (yIsMap || y == nil) && (xIsMap || yIsMap) {
		for _, k := range union(mx, my) {
			d.walk(path+"."+k, mx[k], my[k], effect)
		}
		return
	}
	if !reflect.DeepEqual(x, y) {
		d.add(path, x, y, effect(path))
	}
}

func (d *differ) walkValue(path string, x, y any, effect string) {
	d.walk(path, x, y, func(string) string { return effect })
}

// plain turns a part of a document into JSON values (maps, lists, strings,
// json.Number, bools), as the API shows it; nil stays nil.
func plain(v any) any {
	if rv := reflect.ValueOf(v); !rv.IsValid() || (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Map) && rv.IsNil() {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil // document types always encode
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	_ = dec.Decode(&out)
	return out
}

func plainIf(v any, ok bool) any {
	if !ok {
		return nil
	}
	return plain(v)
}

func lookup[V any](m map[string]V, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return nil
}

func union[V any](a, b map[string]V) []string {
	keys := sortedKeys(a)
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// mounts reports whether a workload of d mounts the volume.
func mounts(d Document, volume string) bool {
	for _, w := range d.Workloads {
		for _, m := range w.Mounts {
			if m.Volume == volume {
				return true
			}
		}
	}
	return false
}

// refers reports whether d's env (the app's or a workload's) refers to the
// slot.
func refers(d Document, slot string) bool {
	uses := func(env map[string]EnvValue) bool {
		for _, v := range env {
			if v.Kind() == "slot" && v.Slot == slot {
				return true
			}
		}
		return false
	}
	if uses(d.Env) {
		return true
	}
	for _, w := range d.Workloads {
		if uses(w.Env) {
			return true
		}
	}
	return false
}
