package detect

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
)

// goPortFlag is a command-line flag a Go program takes its listening port
// from, instead of PORT: flag.Int("port", 8080, …), flag.StringVar(&addr,
// "addr", ":8080", …), and pflag's (cobra's) forms with a shorthand.
type goPortFlag struct {
	name    string // as declared, without dashes
	address bool   // takes an address ("host:port"), not a port number
	port    int    // the port of its default; 0 when that is not a constant
	where   string // the file that declares it
	rank    int    // words in the name: "port" (1) beats "http-port" (2)
}

// command is the run command that starts bin with the runtime's port in
// the flag: under sh -c, which expands $PORT.
func (f goPortFlag) command(bin string) []string {
	v := `"$PORT"`
	if f.address {
		v = `":$PORT"`
	}
	return []string{"sh", "-c", "exec " + bin + " --" + f.name + "=" + v}
}

// describe says what the flag's default is.
func (f goPortFlag) describe() string {
	switch {
	case f.port > 0 && f.address:
		return "an address, default port " + strconv.Itoa(f.port)
	case f.address:
		return "an address"
	case f.port > 0:
		return "default " + strconv.Itoa(f.port)
	}
	return "its default is not a constant"
}

// goFlagFunc is where a flag-defining function takes the flag's name and
// default, and how many arguments it has.
type goFlagFunc struct {
	name, value, args int
	number            bool
}

// goFlagFuncs are the standard library's and pflag's flag definitions of
// numbers and strings: X(name, value, usage), XVar(p, name, value, usage),
// XP(name, short, value, usage), XVarP(p, name, short, value, usage).
var goFlagFuncs = func() map[string]goFlagFunc {
	out := map[string]goFlagFunc{}
	for _, base := range []string{"Int", "Int64", "Int32", "Int16", "Uint", "Uint64", "Uint32", "Uint16", "String"} {
		number := base != "String"
		out[base] = goFlagFunc{name: 0, value: 1, args: 3, number: number}
		out[base+"Var"] = goFlagFunc{name: 1, value: 2, args: 4, number: number}
		out[base+"P"] = goFlagFunc{name: 0, value: 2, args: 4, number: number}
		out[base+"VarP"] = goFlagFunc{name: 1, value: 3, args: 5, number: number}
	}
	return out
}()

// goFlagHintRE finds files worth parsing: a string naming a port flag.
var goFlagHintRE = regexp.MustCompile(`(?i)"(?:[a-z]+[-_.]){0,2}(?:port|addr|address|listen|bind|http)"`)

// goFlagNameRE is the shape of a flag name put in a run command.
var goFlagNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// goPortFlagWords may come before the last word of a port flag's name:
// http-port, listen-addr, web.listen-address. Others (grpc, metrics,
// debug, admin, db) name another listener or a client's address.
var goPortFlagWords = map[string]bool{"http": true, "listen": true, "server": true, "web": true, "app": true, "bind": true, "public": true}

// portFlagName says whether a flag of that name sets the listening port:
// whether its value is an address, and how many words the name has.
func portFlagName(name string) (address bool, rank int, ok bool) {
	if !goFlagNameRE.MatchString(name) {
		return false, 0, false
	}
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	if len(words) == 0 || len(words) > 3 {
		return false, 0, false
	}
	switch words[len(words)-1] {
	case "port":
	case "addr", "address", "listen", "bind", "http":
		address = true
	default:
		return false, 0, false
	}
	for _, w := range words[:len(words)-1] {
		if !goPortFlagWords[w] {
			return false, 0, false
		}
	}
	return address, len(words), true
}

// scanGoPortFlag returns the port flag a Go file declares; the one with
// the shortest name, the first of those, when it declares several.
func scanGoPortFlag(name string, src []byte) (goPortFlag, bool) {
	if !goFlagHintRE.Match(src) {
		return goPortFlag{}, false
	}
	file, _ := parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution)
	if file == nil {
		return goPortFlag{}, false
	}
	var best goPortFlag
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		f, ok := goFlagCall(call)
		if ok && (best.rank == 0 || f.rank < best.rank) {
			f.where = name
			best = f
		}
		return true
	})
	return best, best.rank > 0
}

// goFlagCall reads a call that defines a port flag.
func goFlagCall(call *ast.CallExpr) (goPortFlag, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return goPortFlag{}, false
	}
	fn, ok := goFlagFuncs[sel.Sel.Name]
	if !ok || len(call.Args) != fn.args {
		return goPortFlag{}, false
	}
	name, ok := stringLit(call.Args[fn.name])
	if !ok {
		return goPortFlag{}, false
	}
	address, rank, ok := portFlagName(name)
	if !ok {
		return goPortFlag{}, false
	}
	f := goPortFlag{name: name, rank: rank, address: address && !fn.number}
	lit, ok := call.Args[fn.value].(*ast.BasicLit)
	if !ok {
		return f, true
	}
	v := lit.Value
	if lit.Kind == token.STRING {
		if v, ok = stringLit(lit); !ok {
			return f, true
		}
		if !fn.number && strings.Contains(v, ":") {
			// A string flag whose default is an address takes one.
			f.address = true
			v = v[strings.LastIndexByte(v, ':')+1:]
		}
	}
	if p, err := strconv.Atoi(v); err == nil && p >= 1 && p <= 65535 {
		f.port = p
	}
	return f, true
}

// stringLit returns the value of a string literal.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// goAskCommand asks how to start a program whose code shows no way it
// learns its port (no PORT, no port flag, no listen address). An answer
// that refers to a variable ("./app -listen :$PORT") runs under sh -c,
// which expands it.
func goAskCommand(t *Tree, b *Bid) []string {
	words := b.askCommand(t, "Command that starts the app listening on $PORT: the code reads no PORT variable and declares no port flag or listen address (for example ./app -listen :$PORT)", []string{"./app"})
	v, answered := t.Answer(KeyRunCommand)
	if answered && strings.Contains(strings.Join(words, " "), "$") {
		return []string{"sh", "-c", strings.TrimSpace(v)}
	}
	return words
}
