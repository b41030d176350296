package fakenomad

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"github.com/hashicorp/nomad/api"
)

// secretResult is what consul-template's secret function gives a
// template: the Vault response's data (for KV version 2, {"data": {...},
// "metadata": {...}}).
type secretResult struct {
	Data map[string]any
}

// render renders a template block as Nomad's template hook does with
// consul-template: Go text/template with the block's delimiters and the
// functions the fake knows (secret, toJSON, env), written to its
// destination in the task directory; an env template's variables are
// returned (go-envparse's format).
func (s *Server) render(ctx context.Context, t *api.Template, taskDir string, env map[string]string) (map[string]string, error) {
	if t.EmbeddedTmpl == nil {
		return nil, errors.New("template: the fake renders embedded templates (data) only")
	}
	if t.DestPath == nil || *t.DestPath == "" {
		return nil, errors.New("template: missing destination")
	}
	dest := filepath.Join(taskDir, filepath.FromSlash(interpolate(*t.DestPath, env)))
	if !within(dest, taskDir) {
		return nil, fmt.Errorf("template: destination %q escapes the task directory", *t.DestPath)
	}
	left, right := "{{", "}}"
	if t.LeftDelim != nil && *t.LeftDelim != "" {
		left = *t.LeftDelim
	}
	if t.RightDelim != nil && *t.RightDelim != "" {
		right = *t.RightDelim
	}
	funcs := template.FuncMap{
		"secret": func(path string, _ ...string) (*secretResult, error) { return s.secret(ctx, path) },
		"toJSON": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"env": func(name string) string { return env[name] },
	}
	missing := "missingkey=zero"
	if t.ErrMissingKey != nil && *t.ErrMissingKey {
		missing = "missingkey=error"
	}
	tmpl, err := template.New("template").Delims(left, right).Funcs(funcs).Option(missing).Parse(*t.EmbeddedTmpl)
	if err != nil {
		return nil, fmt.Errorf("template: parse: %w", err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, nil); err != nil {
		return nil, fmt.Errorf("template: render: %w", err)
	}
	perm := os.FileMode(0o644)
	if t.Perms != nil && *t.Perms != "" {
		p, err := strconv.ParseUint(*t.Perms, 8, 32)
		if err != nil {
			return nil, fmt.Errorf("template: perms %q: %w", *t.Perms, err)
		}
		perm = os.FileMode(p)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(dest, out.Bytes(), perm); err != nil {
		return nil, err
	}
	if t.Envvars == nil || !*t.Envvars {
		return nil, nil
	}
	vars, err := parseEnvFile(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("template: env: %w", err)
	}
	return vars, nil
}

// secret reads a secret: from the test's map, else from Vault.
func (s *Server) secret(ctx context.Context, path string) (*secretResult, error) {
	if data, ok := s.cfg.Secrets[path]; ok {
		return &secretResult{Data: map[string]any{"data": data, "metadata": map[string]any{"version": 1}}}, nil
	}
	if s.cfg.Vault == nil {
		return nil, &missingError{what: "vault.read(" + path + ")"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.Vault.Address, "/")+"/v1/"+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Vault-Token", s.cfg.Vault.Token)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("vault.read(%s): %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden {
		// consul-template reports a path it cannot read (none there, or
		// the policy denies it) as missing data, and waits for it.
		return nil, &missingError{what: "vault.read(" + path + ")"}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("vault.read(%s): vault answered %d", path, resp.StatusCode)
	}
	var body struct {
		Data map[string]any `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("vault.read(%s): %v", path, err)
	}
	return &secretResult{Data: body.Data}, nil
}

// missingError is data a template waits for: Nomad's template hook says
// "Missing: <dependency>" in a Template event and keeps the task pending.
type missingError struct {
	task, what string
}

func (e *missingError) Error() string { return "Missing: " + e.what }

// parseEnvFile parses KEY=VALUE lines as go-envparse does for what the
// templates write: comments and blank lines skipped, a double-quoted
// value with JSON escapes, a single-quoted one literal, an unquoted one
// trimmed and ending at '#'.
func parseEnvFile(b []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, val, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, fmt.Errorf("line %d: no key=value", n)
		}
		val = strings.TrimSpace(val)
		switch {
		case strings.HasPrefix(val, `"`):
			end := closingQuote(val)
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated double quote", n)
			}
			var s string
			if err := json.Unmarshal([]byte(val[:end+1]), &s); err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			val = s
		case strings.HasPrefix(val, `'`):
			end := strings.IndexByte(val[1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated single quote", n)
			}
			val = val[1 : end+1]
		default:
			if i := strings.IndexByte(val, '#'); i >= 0 {
				val = strings.TrimSpace(val[:i])
			}
		}
		out[key] = val
	}
	return out, sc.Err()
}

// closingQuote finds the unescaped '"' closing a double-quoted value.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}
