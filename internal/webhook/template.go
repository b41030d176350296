package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/svchost/svc/internal/errcode"
)

// A payload template is Go text/template source that anyone who may create
// a subscription writes, and svc runs for every delivery, so it is bounded:
//
//   - its source is at most 64 KiB; it is one template: define, block and
//     template are refused (no recursion);
//   - range goes only over a field of the event (.Data.reasons, .Fields,
//     $e.items), never over a number, a function's result or a bare
//     variable or dot, and nests at most three deep; a literal that would
//     be an integer is at most 10000 (write 1e9 or 1000000000.0 to
//     compare with a larger number);
//   - a render runs at most 100000 loop iterations, for at most one
//     second, writes at most 256 KiB; each print, printf or println call
//     produces at most 16 KiB (printf's widths and precisions are at most
//     1000, never *), each json, html, js or urlquery call at most 64 KiB,
//     and all of them together at most 1 MiB;
//   - a panic is an error; a render that does not finish in time is
//     abandoned (the loop, writer and function checks end it soon after).
//
// A missing field renders as nothing (never "<no value>"), at any depth;
// numbers are float64 and print without an exponent; eq, ne, lt, le, gt and
// ge compare a number with an integer literal.
const (
	MaxTemplateBytes = 64 << 10
	MaxBodyBytes     = 256 << 10
	renderTimeout    = time.Second
	maxRangeDepth    = 3
	maxIntLiteral    = 10000
	maxIterations    = 100000
	maxPrintBytes    = 16 << 10
	maxFuncBytes     = 64 << 10
	maxFuncTotal     = 1 << 20
	maxVerbWidth     = 1000
)

var (
	errTooBig = fmt.Errorf("the rendered body is larger than %d KiB", MaxBodyBytes>>10)
	errSlow   = fmt.Errorf("rendering took longer than %s", renderTimeout)
	errLoops  = fmt.Errorf("the template ran more than %d loop iterations", maxIterations)
	errFuncs  = fmt.Errorf("the template's functions produced more than %d KiB in all", maxFuncTotal>>10)
)

// CheckTemplate checks a payload template when a subscription is saved:
// it parses under the rules above and renders a sample deploy.failed event
// (an app, every data field set) within the bounds; with a JSON content
// type (empty means application/json) the output must be JSON. An empty
// template sends the standard envelope and is always fine.
func CheckTemplate(tmpl, mediaType string) error {
	if tmpl == "" {
		return nil
	}
	if err := CheckContentType(mediaType); err != nil {
		return err
	}
	data, err := templateData(sampleEvent(), "https://svc.example.com")
	if err != nil {
		return err
	}
	out, err := render(tmpl, data, nil)
	if err != nil {
		return errcode.Invalid("payload_template", "%s", templateFailure(err, " on a sample deploy.failed event")).
			WithRemedy("see docs/webhooks.md for the template's variables, functions and limits")
	}
	if isJSON(mediaType) && !json.Valid(out) {
		return errcode.Invalid("payload_template", "the payload template's output for a sample deploy.failed event is not JSON, and the content type is %s", contentType(mediaType)).
			WithRemedy("write values with {{json …}}, or set another content_type")
	}
	return nil
}

// refusedTemplate is a template refused before it runs.
type refusedTemplate struct{ err error }

func (r refusedTemplate) Error() string { return r.err.Error() }

// templateFailure says why a template failed: it was refused, or it
// failed when rendered (context says on what).
func templateFailure(err error, context string) string {
	text := strings.TrimPrefix(err.Error(), "template: ")
	if _, ok := err.(refusedTemplate); ok {
		return "the payload template is refused: " + text
	}
	return "the payload template failed" + context + ": " + text
}

// run is the budget of one render; one goroutine uses it.
type run struct {
	deadline time.Time
	loops    int
	spent    int
}

// charge counts n bytes a function produced, and checks the clock.
func (r *run) charge(n int) error {
	if time.Now().After(r.deadline) {
		return errSlow
	}
	r.spent += n
	if r.spent > maxFuncTotal {
		return errFuncs
	}
	return nil
}

// render parses src under the rules and executes it on data within the
// bounds. extra adds functions (tests).
func render(src string, data any, extra template.FuncMap) ([]byte, error) {
	r := &run{deadline: time.Now().Add(renderTimeout)}
	funcs := r.funcs()
	for k, v := range extra {
		funcs[k] = v
	}
	t, err := parseTemplate(src, funcs)
	if err != nil {
		return nil, refusedTemplate{err}
	}
	type outcome struct {
		out []byte
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: fmt.Errorf("the template failed: %v", p)}
			}
		}()
		w := &capWriter{max: MaxBodyBytes, deadline: r.deadline}
		err := t.Execute(w, data)
		done <- outcome{w.buf, err}
	}()
	timer := time.NewTimer(time.Until(r.deadline) + 50*time.Millisecond)
	defer timer.Stop()
	select {
	case o := <-done:
		for _, e := range []error{errTooBig, errSlow, errLoops, errFuncs} {
			if errors.Is(o.err, e) {
				return nil, e
			}
		}
		if o.err != nil {
			return nil, o.err
		}
		return o.out, nil
	case <-timer.C:
		return nil, errSlow
	}
}

// capWriter keeps what a render writes, up to max bytes and the deadline.
type capWriter struct {
	buf      []byte
	max      int
	deadline time.Time
}

func (w *capWriter) Write(p []byte) (int, error) {
	if len(w.buf)+len(p) > w.max {
		return 0, errTooBig
	}
	if time.Now().After(w.deadline) {
		return 0, errSlow
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// Names of the functions the checker adds to a template's tree.
const (
	showFunc = "svcShow"
	tickFunc = "svcTick"
)

// parseTemplate parses src with funcs and checks and rewrites its tree:
// every printed value goes through showFunc, every range body starts with
// tickFunc.
func parseTemplate(src string, funcs template.FuncMap) (*template.Template, error) {
	if len(src) > MaxTemplateBytes {
		return nil, fmt.Errorf("the template is longer than %d KiB", MaxTemplateBytes>>10)
	}
	t, err := template.New("payload").Funcs(funcs).Parse(src)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, errors.New("a payload template is one template: define and block are not allowed")
	}
	if t.Tree == nil || t.Tree.Root == nil {
		return template.New("payload").Parse("")
	}
	c := checker{tree: t.Tree}
	if err := c.list(t.Tree.Root, 0); err != nil {
		return nil, err
	}
	return t, nil
}

// checker walks a template's tree.
type checker struct{ tree *parse.Tree }

func (c *checker) list(l *parse.ListNode, depth int) error {
	if l == nil {
		return nil
	}
	for _, n := range l.Nodes {
		if err := c.node(n, depth); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) node(n parse.Node, depth int) error {
	switch n := n.(type) {
	case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode:
		return nil
	case *parse.ActionNode:
		if err := c.pipe(n.Pipe); err != nil {
			return err
		}
		if len(n.Pipe.Decl) == 0 {
			n.Pipe.Cmds = append(n.Pipe.Cmds, c.call(showFunc, n.Pipe.Position()))
		}
		return nil
	case *parse.IfNode:
		return c.branch(&n.BranchNode, depth, depth)
	case *parse.WithNode:
		return c.branch(&n.BranchNode, depth, depth)
	case *parse.RangeNode:
		if depth+1 > maxRangeDepth {
			return fmt.Errorf("%s: ranges nest at most %d deep", c.where(n), maxRangeDepth)
		}
		if !rangeable(n.Pipe) {
			return fmt.Errorf("%s: range goes only over a field of the event (like .Data.reasons or .Fields), not over %s", c.where(n), n.Pipe)
		}
		if err := c.branch(&n.BranchNode, depth+1, depth); err != nil {
			return err
		}
		if n.List == nil {
			n.List = &parse.ListNode{NodeType: parse.NodeList, Pos: n.Position()}
		}
		tick := &parse.ActionNode{NodeType: parse.NodeAction, Pos: n.Position(), Line: n.Line,
			Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Pos: n.Position(), Line: n.Line,
				Cmds: []*parse.CommandNode{c.call(tickFunc, n.Position())}}}
		n.List.Nodes = append([]parse.Node{tick}, n.List.Nodes...)
		return nil
	case *parse.TemplateNode:
		return fmt.Errorf("%s: a payload template may not call a template", c.where(n))
	}
	return fmt.Errorf("%s: %s is not allowed in a payload template", c.where(n), n)
}

func (c *checker) branch(b *parse.BranchNode, depth, elseDepth int) error {
	if err := c.pipe(b.Pipe); err != nil {
		return err
	}
	if err := c.list(b.List, depth); err != nil {
		return err
	}
	return c.list(b.ElseList, elseDepth)
}

func (c *checker) pipe(p *parse.PipeNode) error {
	if p == nil {
		return nil
	}
	for _, cmd := range p.Cmds {
		for _, a := range cmd.Args {
			if err := c.arg(a); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *checker) arg(n parse.Node) error {
	switch n := n.(type) {
	case *parse.NumberNode:
		if integral(n) && (n.Int64 > maxIntLiteral || n.Int64 < -maxIntLiteral) || n.IsUint && !n.IsInt {
			return fmt.Errorf("%s: an integer in a payload template is at most %d (write a larger number with a decimal point or an exponent, like 1e6, to compare with it)", c.where(n), maxIntLiteral)
		}
	case *parse.PipeNode:
		return c.pipe(n)
	case *parse.ChainNode:
		return c.arg(n.Node)
	}
	return nil
}

// integral reports whether a number literal evaluates to an int, as
// text/template decides: an integer unless written as a float (a decimal
// point or an exponent; 0x1E and characters are integers).
func integral(n *parse.NumberNode) bool {
	if !n.IsInt {
		return false
	}
	t := n.Text
	hexInt := len(t) > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') && !strings.ContainsAny(t, "pP")
	asFloat := n.IsFloat && !hexInt && t[0] != '\'' && strings.ContainsAny(t, ".eEpP")
	return !asFloat
}

// rangeable reports whether a range's pipeline is one field chain: .A.B,
// $.A or $x.A.
func rangeable(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return true
	case *parse.VariableNode:
		return len(a.Ident) > 1
	}
	return false
}

// call is a command calling the function name without arguments.
func (c *checker) call(name string, pos parse.Pos) *parse.CommandNode {
	return &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos,
		Args: []parse.Node{parse.NewIdentifier(name).SetTree(c.tree).SetPos(pos)}}
}

// where is a node's line, for errors.
func (c *checker) where(n parse.Node) string {
	loc, _ := c.tree.ErrorContext(n)
	return loc
}

// funcs are a render's functions: json and default, the builtins that
// build strings replaced by capped ones, comparisons that treat numbers
// alike, and the checker's show and tick.
func (r *run) funcs() template.FuncMap {
	return template.FuncMap{
		"json": func(v any) (string, error) {
			b, err := marshal(v)
			if err != nil {
				return "", err
			}
			return r.capped(string(b), maxFuncBytes)
		},
		"default": func(fallback, v any) any {
			if empty(v) {
				return fallback
			}
			return v
		},
		"print": func(args ...any) (string, error) {
			return r.capped(fmt.Sprint(plain(args)...), maxPrintBytes)
		},
		"println": func(args ...any) (string, error) {
			return r.capped(fmt.Sprintln(plain(args)...), maxPrintBytes)
		},
		"printf": func(format string, args ...any) (string, error) {
			if err := checkFormat(format); err != nil {
				return "", err
			}
			return r.capped(fmt.Sprintf(format, plain(args)...), maxPrintBytes)
		},
		"html": func(args ...any) (string, error) {
			return r.capped(template.HTMLEscaper(plain(args)...), maxFuncBytes)
		},
		"js": func(args ...any) (string, error) {
			return r.capped(template.JSEscaper(plain(args)...), maxFuncBytes)
		},
		"urlquery": func(args ...any) (string, error) {
			return r.capped(template.URLQueryEscaper(plain(args)...), maxFuncBytes)
		},
		"eq": func(a any, bs ...any) (bool, error) {
			if len(bs) == 0 {
				return false, errors.New("eq needs two values")
			}
			for _, b := range bs {
				same, err := equal(a, b)
				if err != nil || same {
					return same, err
				}
			}
			return false, nil
		},
		"ne": func(a, b any) (bool, error) {
			same, err := equal(a, b)
			return !same, err
		},
		"lt": func(a, b any) (bool, error) { c, err := compare(a, b); return c < 0, err },
		"le": func(a, b any) (bool, error) { c, err := compare(a, b); return c <= 0, err },
		"gt": func(a, b any) (bool, error) { c, err := compare(a, b); return c > 0, err },
		"ge": func(a, b any) (bool, error) { c, err := compare(a, b); return c >= 0, err },
		showFunc: func(v any) (string, error) {
			s := show(v)
			return s, r.charge(0)
		},
		tickFunc: func() (string, error) {
			r.loops++
			if r.loops > maxIterations {
				return "", errLoops
			}
			return "", r.charge(0)
		},
	}
}

// capped checks a function's result against its cap and the budget.
func (r *run) capped(s string, max int) (string, error) {
	if len(s) > max {
		return "", fmt.Errorf("the result is larger than %d KiB", max>>10)
	}
	return s, r.charge(len(s))
}

// checkFormat refuses printf formats that could produce a lot from a
// little: a * width or precision, one over 1000, or more than 16 KiB of
// them in all.
func checkFormat(format string) error {
	if len(format) > maxPrintBytes {
		return fmt.Errorf("the format is larger than %d KiB", maxPrintBytes>>10)
	}
	total := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format) && strings.IndexByte("+-# 0123456789.[]*", format[i]) >= 0; i++ {
			c := format[i]
			if c == '*' {
				return errors.New("printf widths and precisions are written in the format, not taken from arguments (*)")
			}
			if c < '1' || c > '9' {
				continue
			}
			j := i
			for j < len(format) && format[j] >= '0' && format[j] <= '9' {
				j++
			}
			n, err := strconv.Atoi(format[i:j])
			if err != nil || n > maxVerbWidth {
				return fmt.Errorf("printf widths and precisions are at most %d", maxVerbWidth)
			}
			total += n
			i = j - 1
		}
	}
	if total > maxPrintBytes {
		return fmt.Errorf("printf's widths and precisions add up to more than %d KiB", maxPrintBytes>>10)
	}
	return nil
}

// empty reports whether default should give its fallback for v: nil, an
// empty string, list or object. Zero and false are values.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// show is how a printed value reads: nothing for a missing value or null,
// numbers without an exponent, the rest as text/template prints it.
func show(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// plain prepares print arguments: nil as nothing, whole float64s as
// integers (1e+06 reads 1000000).
func plain(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
			out[i] = ""
		case float64:
			if v == float64(int64(v)) && v < 1<<53 && v > -(1<<53) {
				out[i] = int64(v)
			} else {
				out[i] = v
			}
		default:
			out[i] = a
		}
	}
	return out
}

// number returns v as a float64 when it is a number (a float64 from the
// event, an int from a literal or len).
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case int32:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint64:
		return float64(v), true
	}
	return 0, false
}

// equal compares two values as eq does: numbers by value whatever their
// type, strings, bools, and nil (a missing value) equal only to nil.
func equal(a, b any) (bool, error) {
	if a == nil || b == nil {
		return a == nil && b == nil, nil
	}
	if x, ok := number(a); ok {
		y, ok := number(b)
		if !ok {
			return false, fmt.Errorf("cannot compare a number with %s", kind(b))
		}
		return x == y, nil
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x == y, nil
		}
	case bool:
		if y, ok := b.(bool); ok {
			return x == y, nil
		}
	default:
		return false, fmt.Errorf("cannot compare %s", kind(a))
	}
	return false, fmt.Errorf("cannot compare %s with %s", kind(a), kind(b))
}

// compare orders two numbers or two strings.
func compare(a, b any) (int, error) {
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	}
	return 0, fmt.Errorf("cannot order %s and %s", kind(a), kind(b))
}

// kind names a template value's type as JSON would.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	if _, ok := number(v); ok {
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}
