package detect

import "strings"

// tomlTables is the little of TOML detection needs from pyproject.toml and
// Pipfile: for each table ("project", "tool.poetry.dependencies"), its
// keys with their raw values (a multi-line array is joined onto one line).
// Anything it does not understand is skipped, never an error.
func tomlTables(src string) map[string]map[string]string {
	tables := map[string]map[string]string{"": {}}
	cur := ""
	var pendingKey string
	var pending strings.Builder
	depth := 0
	for line := range strings.Lines(src) {
		line = strings.TrimSpace(stripTOMLComment(line))
		if pendingKey != "" {
			pending.WriteByte(' ')
			pending.WriteString(line)
			depth += bracketDepth(line)
			if depth <= 0 {
				tables[cur][pendingKey] = pending.String()
				pendingKey = ""
				pending.Reset()
			}
			continue
		}
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			name := strings.Trim(line, "[] ")
			cur = strings.ReplaceAll(name, `"`, "")
			if tables[cur] == nil {
				tables[cur] = map[string]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k = strings.Trim(strings.TrimSpace(k), `"'`)
		v = strings.TrimSpace(v)
		if d := bracketDepth(v); d > 0 {
			pendingKey, depth = k, d
			pending.WriteString(v)
			continue
		}
		tables[cur][k] = v
	}
	if pendingKey != "" {
		tables[cur][pendingKey] = pending.String()
	}
	return tables
}

// outsideStrings calls fn with each byte of s that is outside a TOML string
// (basic "…" with escapes, or literal '…'), until fn returns false.
func outsideStrings(s string, fn func(i int, c byte) bool) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\' && quote == '"':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0:
			if !fn(i, c) {
				return
			}
		}
	}
}

// stripTOMLComment removes a # comment that is outside strings.
func stripTOMLComment(line string) string {
	out := line
	outsideStrings(line, func(i int, c byte) bool {
		if c == '#' {
			out = line[:i]
			return false
		}
		return true
	})
	return out
}

// bracketDepth counts [ and { minus ] and } outside strings.
func bracketDepth(s string) int {
	depth := 0
	outsideStrings(s, func(_ int, c byte) bool {
		switch c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		}
		return true
	})
	return depth
}

// tomlStrings returns the strings of a raw TOML array value.
func tomlStrings(v string) []string {
	var out []string
	for i := 0; i < len(v); i++ {
		q := v[i]
		if q != '"' && q != '\'' {
			continue
		}
		var s strings.Builder
		j := i + 1
		for ; j < len(v) && v[j] != q; j++ {
			if q == '"' && v[j] == '\\' && j+1 < len(v) {
				j++
			}
			s.WriteByte(v[j])
		}
		out = append(out, s.String())
		i = j
	}
	return out
}
