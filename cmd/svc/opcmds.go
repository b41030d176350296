package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/svchost/svc/api"
)

// The API's operations as commands: `svc <resource> <verb>` for every
// operation of the route table (cmd/svc/operations.go) that no command
// written by hand covers. A command written by hand says which operations
// it calls with calls(cmd, "apps_list"); the reference lists each command
// with the endpoints it calls, and a test fails when an operation has no
// command.

// opsAnnotation is the annotation naming the operations a command calls.
const opsAnnotation = "ops"

// calls records that cmd calls the named operations and returns cmd.
func calls(cmd *cobra.Command, ops ...string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[opsAnnotation] = strings.Join(ops, ",")
	return cmd
}

// opsOf lists the operations cmd calls.
func opsOf(cmd *cobra.Command) []string {
	if s := cmd.Annotations[opsAnnotation]; s != "" {
		return strings.Split(s, ",")
	}
	return nil
}

// resourceShort describes the command groups the generator makes.
var resourceShort = map[string]string{
	"setup":         "The installation's first administrator (/api/v1/setup)",
	"sessions":      "Password sign-in (/api/v1/sessions); svc login keeps a token instead",
	"me":            "Your account (/api/v1/me)",
	"tokens":        "API tokens: yours (delegated), service tokens, agent tokens for assistants (/api/v1/tokens)",
	"users":         "Accounts of the installation (/api/v1/users)",
	"passwords":     "Generated passwords (/api/v1/passwords)",
	"groups":        "Groups of users, their roles and app grants (/api/v1/groups)",
	"roles":         "Built-in and custom roles (/api/v1/roles)",
	"verbs":         "Every verb by scope (/api/v1/verbs)",
	"policy":        "Host policy: the floor under every grant (/api/v1/policy)",
	"config":        "The server's effective configuration (/api/v1/config)",
	"server":        "The server process (/api/v1/restart)",
	"keyring":       "The keys that encrypt secrets at rest (/api/v1/keyring)",
	"edge-keys":     "The keys that sign identity assertions (/api/v1/edge/keys)",
	"audit":         "The append-only audit log (/api/v1/audit)",
	"reference":     "The generated reference of this server (/api/v1/reference)",
	"openapi":       "The OpenAPI document of this server (/api/v1/openapi.json)",
	"launcher":      "Your launcher: the apps you can open, favourites (/api/v1/me/apps)",
	"sections":      "Your launcher's sections (/api/v1/me/sections)",
	"grants":        "Who can reach and who can administer an app (/api/v1/apps/{appID}/grants)",
	"passcode":      "An app shared with everyone behind a passcode (/api/v1/apps/{appID}/passcode)",
	"source":        "An app's source: upload a directory or an archive (/api/v1/apps/{appID}/source)",
	"detection":     "How svc detected an app runs: the proposal, its questions, accepting it (/api/v1/apps/{appID}/detection)",
	"secrets":       "An app's secrets (/api/v1/apps/{appID}/secrets)",
	"specs":         "An app's spec revisions: list, write, pin, diff, export (/api/v1/apps/{appID}/specs)",
	"slots":         "An app's slots: the dependencies it needs filled (/api/v1/apps/{appID}/slots)",
	"security":      "An app's security scans: the last result (score, findings), scan now (/api/v1/apps/{appID}/security)",
	"volumes":       "Volumes: an app's, every one, kept ones of deleted apps (/api/v1/apps/{appID}/volumes, /api/v1/volumes)",
	"backups":       "Backups of apps' volumes and installation bundles: take, list, verify, restore (/api/v1/backups)",
	"deployments":   "An app's deployments: deploy, roll back, approve, reject, logs (/api/v1/apps/{appID}/deployments)",
	"capacity":      "What the host has and what apps commit of it (/api/v1/capacity)",
	"events":        "The event catalogue: every event name, its scope and data (/api/v1/events)",
	"subscriptions": "Event subscriptions: webhooks and notifications, signing keys, test deliveries (/api/v1/subscriptions)",
	"deliveries":    "A subscription's delivery log: attempts, resend (/api/v1/subscriptions/{subscriptionID}/deliveries)",
	"raft":          "The replicated store as this node sees it (/api/v1/operator/raft)",
	"raft-probes":   "Probes of the replicated write path (/api/v1/operator/raft/probes)",
}

// argNames are the positional arguments' names of path parameters.
var argNames = map[string]string{
	"appID": "APP", "depID": "DEPLOYMENT", "key": "KEY", "rev": "REVISION", "a": "FROM", "b": "TO",
	"userID": "USER", "groupID": "GROUP", "roleID": "ROLE", "tokenID": "TOKEN", "grantID": "GRANT",
	"sectionID": "SECTION", "adapterID": "ADAPTER", "probeID": "PROBE", "subscriptionID": "SUBSCRIPTION", "deliveryID": "DELIVERY",
	"volumeID": "VOLUME", "backupID": "BACKUP",
}

// reservedFlags are flags every client command has; a body field of the
// same name is given with --body.
var reservedFlags = []string{"addr", "token", "output", "body", "help", "limit", "cursor", "before", "file", "idempotency-key"}

// addOperationCommands adds `svc <resource> <verb>` for every operation
// whose resource's command has no subcommand calling it. Shortcuts (svc
// deploy, svc logs) do not count: the resource's command lists them all.
func addOperationCommands(root *cobra.Command) {
	for _, op := range operations() {
		if op.NoCommand != "" || op.Produces == "websocket" {
			continue
		}
		group := groupCommand(root, cliName(op.Resource()))
		if slices.ContainsFunc(group.Commands(), func(c *cobra.Command) bool { return slices.Contains(opsOf(c), op.Name) }) {
			continue
		}
		if existing := subcommand(group, cliName(op.VerbName())); existing != nil {
			panic(fmt.Sprintf("svc: command %s exists but does not say it calls %s", existing.CommandPath(), op.Name))
		}
		group.AddCommand(operationCommand(op))
	}
}

// cliName is an operation name's part as a command's name: set_role is
// set-role.
func cliName(s string) string { return strings.ReplaceAll(s, "_", "-") }

func subcommand(parent *cobra.Command, name string) *cobra.Command {
	for _, c := range parent.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// groupCommand returns root's command for a resource, made (with the
// client flags) when there is none.
func groupCommand(root *cobra.Command, name string) *cobra.Command {
	if c := subcommand(root, name); c != nil {
		return c
	}
	short := resourceShort[name]
	if short == "" {
		panic("svc: no description of the command group " + name)
	}
	group := &cobra.Command{Use: name, Short: short, Args: cobra.NoArgs}
	(&clientFlags{}).add(group)
	root.AddCommand(group)
	return group
}

// flagsOf reads the client flags a command inherits from its group.
func flagsOf(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{output: "table"}
	if fl := cmd.Flags().Lookup("addr"); fl != nil {
		f.addr = fl.Value.String()
	}
	if fl := cmd.Flags().Lookup("token"); fl != nil {
		f.token = fl.Value.String()
	}
	if fl := cmd.Flags().Lookup("output"); fl != nil {
		f.output = fl.Value.String()
	}
	return f
}

// endpoint is "METHOD PATH" of an operation.
func endpoint(op api.Operation) string { return op.Method + " " + op.Path }

// shortOf is the first clause of a summary, for a command's one line.
func shortOf(op api.Operation) string {
	s := op.Summary
	if i := clauseEnd(s); i > 0 && i < 140 {
		s = s[:i]
	} else if len(s) > 140 {
		s = strings.ToValidUTF8(s[:137], "") + "…"
	}
	return s + " (" + endpoint(op) + ")"
}

// clauseEnd is the index of the first ';' or ':' outside parentheses and
// braces ("(default: the pinned one)" does not end a clause), or -1.
func clauseEnd(s string) int {
	depth := 0
	for i, r := range s {
		switch r {
		case '(', '{':
			depth++
		case ')', '}':
			depth = max(depth-1, 0)
		case ';', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// documentOps answer documents no table shows well: people get their
// JSON indented.
var documentOps = []string{"openapi_get"}

// secretFields are body fields that hold a secret: each has a --NAME-stdin
// flag too, as a value on the command line shows in the process list.
var secretFields = []string{"value", "password", "current_password", "new_password", "passcode"}

// bodyField is a top-level property of an operation's JSON body.
type bodyField struct {
	name, typ string // typ: string, integer, number, boolean, strings, json
	doc       string
}

// bodyFields lists the properties of op's body schema, in name order.
func bodyFields(op api.Operation) []bodyField {
	if op.Body == nil {
		return nil
	}
	var schema struct {
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
			Items       *struct {
				Type any `json:"type"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(op.Body, &schema); err != nil {
		panic(fmt.Sprintf("svc: body schema of %s: %v", op.Name, err))
	}
	var out []bodyField
	for name, p := range schema.Properties {
		typ := "json"
		switch t := schemaType(p.Type); t {
		case "string", "integer", "number", "boolean":
			typ = t
		case "array":
			if p.Items != nil && schemaType(p.Items.Type) == "string" {
				typ = "strings"
			}
		}
		doc := p.Description
		if doc == "" {
			doc = "body field " + name
		}
		out = append(out, bodyField{name: name, typ: typ, doc: doc})
	}
	slices.SortFunc(out, func(a, b bodyField) int { return strings.Compare(a.name, b.name) })
	return out
}

// schemaType is a schema's type: "string" for "string" and for
// ["string","null"].
func schemaType(t any) string {
	switch t := t.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
	}
	return ""
}

// operationCommand is the command of one operation.
func operationCommand(op api.Operation) *cobra.Command {
	params := op.PathParams()
	use := []string{cliName(op.VerbName())}
	for _, p := range params {
		use = append(use, cmpOr(argNames[p], strings.ToUpper(p)))
	}
	switch op.Upload {
	case "archive":
		use = append(use, "DIR|ARCHIVE")
	case "image":
		use = append(use, "IMAGE")
	}
	nargs := len(use) - 1
	long := op.Summary + ".\n\nCalls " + endpoint(op) + "."
	if op.Verb != "" {
		long += " Needs the verb " + op.Verb + "."
	}
	fields := bodyFields(op)
	if len(fields) > 0 {
		long += "\n\nThe request body's fields are flags; --body FILE (- for stdin) gives the whole JSON body, and flags set override its fields. A field that is an object or a list of objects takes JSON."
	}
	cmd := &cobra.Command{
		Use:   strings.Join(use, " "),
		Short: shortOf(op),
		Long:  long,
		Args:  cobra.ExactArgs(nargs),
	}
	calls(cmd, op.Name)
	fl := cmd.Flags()
	for _, q := range op.Query {
		name := cliName(q.Name)
		switch {
		case q.Repeat:
			fl.StringArray(name, nil, q.Doc+" (repeat it)")
		case q.Type == "boolean":
			fl.Bool(name, false, q.Doc)
		default:
			fl.String(name, "", q.Doc)
		}
	}
	switch op.Paging {
	case "cursor":
		fl.Int("limit", 0, "at most this many items (default: the server's page size)")
		fl.String("cursor", "", "the page after this one: a page's next_cursor")
	case "before":
		fl.Int("limit", 0, "at most this many entries (default: the server's page size)")
		fl.String("before", "", "entries older than this ID: a page's next_before")
	}
	var bodyFile string
	if len(fields) > 0 {
		fl.StringVar(&bodyFile, "body", "", "the JSON body from a file (- for stdin)")
		for _, b := range fields {
			name := cliName(b.name)
			if slices.Contains(reservedFlags, name) || fl.Lookup(name) != nil {
				continue // given with --body
			}
			switch b.typ {
			case "boolean":
				fl.Bool(name, false, b.doc)
			case "strings":
				fl.StringArray(name, nil, b.doc+" (repeat the flag for each)")
			case "json":
				fl.String(name, "", b.doc+"; JSON, or @FILE for a JSON or YAML file")
			default:
				if b.typ == "string" && slices.Contains(secretFields, b.name) {
					fl.String(name, "", b.doc+" (it shows in the process list: prefer --"+name+"-stdin)")
					fl.Bool(name+"-stdin", false, "read "+b.name+" from stdin (all of it, less one final newline)")
					continue
				}
				if b.typ != "string" {
					fl.String(name, "", b.doc+" ("+b.typ+")")
					continue
				}
				fl.String(name, "", b.doc)
			}
		}
	}
	if op.Idempotent {
		fl.String("idempotency-key", "", "a key that makes a retry of this request replay the first answer")
	}
	var outFile string
	if op.Produces == "image" {
		fl.StringVar(&outFile, "file", "", "write the image to this file (default: stdout when it is not a terminal)")
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		f := flagsOf(cmd)
		c, err := f.client()
		if err != nil {
			return err
		}
		call := api.Call{Path: map[string]string{}, Query: url.Values{}}
		for i, p := range params {
			call.Path[p] = args[i]
			if p == "appID" {
				id, err := appID(cmd.Context(), c, args[i])
				if err != nil {
					return refusal(cmd.ErrOrStderr(), err)
				}
				call.Path[p] = id
			}
		}
		queryOf(cmd, op, call.Query)
		if len(fields) > 0 {
			if call.Body, err = bodyOf(cmd, fields, bodyFile); err != nil {
				return err
			}
		}
		if op.Idempotent {
			call.IdempotencyKey, _ = fl.GetString("idempotency-key")
		}
		if op.Upload != "" {
			closeUpload, err := uploadOf(cmd, op, args[len(args)-1], &call)
			if err != nil {
				return err
			}
			defer closeUpload()
		}
		if op.Produces == "text/event-stream" {
			return followOperation(cmd, f, c, call)
		}
		ans, err := c.Do(cmd.Context(), op, call)
		if err != nil {
			return refusal(cmd.ErrOrStderr(), err)
		}
		if op.Produces == "image" {
			return writeImage(cmd, outFile, ans.Body)
		}
		p := f.printer(cmd)
		if p.json {
			if len(ans.Body) == 0 {
				return nil // 204: the API answers nothing
			}
			return p.raw(ans.Body)
		}
		if len(ans.Body) == 0 {
			return p.line("Done: %s", strings.TrimSuffix(shortOf(op), " ("+endpoint(op)+")"))
		}
		if slices.Contains(documentOps, op.Name) {
			var b bytes.Buffer
			if json.Indent(&b, ans.Body, "", "  ") == nil {
				return p.raw(b.Bytes())
			}
		}
		return render(p, cmd.ErrOrStderr(), ans.Body)
	}
	return cmd
}

// queryOf puts the query flags that were set into q.
func queryOf(cmd *cobra.Command, op api.Operation, q url.Values) {
	names := []string{"limit", "cursor", "before"}
	for _, p := range op.Query {
		names = append(names, p.Name)
	}
	for _, name := range names {
		fl := cmd.Flags().Lookup(cliName(name))
		if fl == nil || !fl.Changed {
			continue
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			q[name] = sv.GetSlice()
			continue
		}
		q.Set(name, fl.Value.String())
	}
}

// bodyOf builds the JSON body: --body's object, then every body flag set.
func bodyOf(cmd *cobra.Command, fields []bodyField, bodyFile string) (json.RawMessage, error) {
	body := map[string]any{}
	if bodyFile != "" {
		var b []byte
		var err error
		if bodyFile == "-" {
			b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<20))
		} else {
			b, err = os.ReadFile(bodyFile)
		}
		if err != nil {
			return nil, usageError("--body: %v", err)
		}
		if err := json.Unmarshal(b, &body); err != nil {
			return nil, usageError("--body: not a JSON object: %v", err)
		}
	}
	stdinUsed := bodyFile == "-"
	for _, f := range fields {
		if in, _ := cmd.Flags().GetBool(cliName(f.name) + "-stdin"); in && slices.Contains(secretFields, f.name) {
			if stdinUsed {
				return nil, usageError("stdin can give one thing: --%s-stdin and another", cliName(f.name))
			}
			stdinUsed = true
			b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
			if err != nil {
				return nil, err
			}
			body[f.name] = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			continue
		}
		fl := cmd.Flags().Lookup(cliName(f.name))
		if fl == nil || !fl.Changed {
			continue
		}
		v, err := fieldValue(f, fl)
		if err != nil {
			return nil, usageError("--%s: %v", fl.Name, err)
		}
		body[f.name] = v
	}
	return json.Marshal(body)
}

// fieldValue is a body flag's value as its field's JSON type.
func fieldValue(f bodyField, fl *pflag.Flag) (any, error) {
	s := fl.Value.String()
	switch f.typ {
	case "boolean":
		return strconv.ParseBool(s)
	case "integer":
		return strconv.ParseInt(s, 10, 64)
	case "number":
		return strconv.ParseFloat(s, 64)
	case "strings":
		return fl.Value.(pflag.SliceValue).GetSlice(), nil
	case "json":
		return jsonValue(s)
	}
	return s, nil
}

// uploadOf opens the raw body of an upload: a directory (sent as a
// tar.gz of it) or an archive file for source, an image file for icons.
func uploadOf(cmd *cobra.Command, op api.Operation, path string, call *api.Call) (func(), error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, usageError("%v", err)
	}
	if op.Upload == "archive" && st.IsDir() {
		var buf bytes.Buffer
		left, err := tarDir(path, &buf)
		if err != nil {
			return nil, &exitError{code: 1, err: fmt.Errorf("archive %s: %w", path, err)}
		}
		for _, s := range left {
			fmt.Fprintf(cmd.ErrOrStderr(), "left out %s: %s\n", s.path, s.why)
		}
		call.Upload, call.ContentType = &buf, "application/gzip"
		return func() {}, nil
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, usageError("%v", err)
	}
	call.Upload = file
	if op.Upload == "image" {
		head := make([]byte, 512)
		n, _ := io.ReadFull(file, head)
		call.Upload = io.MultiReader(bytes.NewReader(head[:n]), file)
		call.ContentType = http.DetectContentType(head[:n])
		return func() { file.Close() }, nil
	}
	name := strings.ToLower(filepath.Base(path))
	switch {
	case strings.HasSuffix(name, ".zip"):
		call.ContentType = "application/zip"
	case strings.HasSuffix(name, ".tar"):
		call.ContentType = "application/x-tar"
	case strings.HasSuffix(name, ".tar.gz"), strings.HasSuffix(name, ".tgz"):
		call.ContentType = "application/gzip"
	default:
		file.Close()
		return nil, usageError("%s: give a directory, or an archive named .tar.gz, .tgz, .tar or .zip", path)
	}
	return func() { file.Close() }, nil
}

// writeImage writes an image answer to a file, or to stdout unless it is a
// terminal.
func writeImage(cmd *cobra.Command, file string, b []byte) error {
	if file != "" {
		return os.WriteFile(file, b, 0o644)
	}
	out := cmd.OutOrStdout()
	if f, ok := out.(*os.File); ok && isTerminal(f) {
		return usageError("an image is not for a terminal: give --file FILE or redirect stdout")
	}
	_, err := out.Write(b)
	return err
}

// followOperation streams a deployment's log (the one operation that
// answers an event stream) until its end.
func followOperation(cmd *cobra.Command, f *clientFlags, c *api.Client, call api.Call) error {
	p := f.printer(cmd)
	end, err := followDeploy(cmd, p, c, call.Path["appID"], call.Path["appID"], call.Path["depID"])
	if err != nil {
		return refusal(cmd.ErrOrStderr(), err)
	}
	return p.line("%s", strings.TrimSpace(fmt.Sprintf("Deployment %s %s %s", call.Path["depID"], p.state(end.State), deref(end.ErrorCode))))
}

// jsonValue is a JSON flag's value: JSON, or @FILE naming a JSON or YAML
// file (a spec document kept as svc.yaml).
func jsonValue(s string) (any, error) {
	b := []byte(s)
	if name, ok := strings.CutPrefix(s, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return nil, err
		}
		if ext := strings.ToLower(filepath.Ext(name)); ext == ".yaml" || ext == ".yml" {
			var v any
			if err := yaml.Unmarshal(b, &v); err != nil {
				return nil, fmt.Errorf("%s: not YAML: %w", name, err)
			}
			return v, nil
		}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return v, nil
}
