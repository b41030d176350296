package scan

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path"
	"regexp"
	"strings"
)

// secretRule is one kind of committed secret. Its regular expression's
// first capturing group is the secret (what the entropy check measures);
// keywords (lower case) must appear in a file before the expression is run.
//
// The expressions are adapted from gitleaks' default rules
// (https://github.com/gitleaks/gitleaks, config/gitleaks.toml, MIT License,
// Copyright (c) 2019 Zachary Rice; each rule names the gitleaks rule it
// follows), and so are its entropy floors and its path allowlist. gitleaks
// itself is not a dependency: its config package loads the rules through
// viper and brings some fifty modules with it (the package's DESIGN.md).
type secretRule struct {
	id       string
	title    string
	severity string
	keywords []string
	re       *regexp.Regexp
	// minEntropy is the least Shannon entropy (bits per byte) of the
	// secret for a match to count; 0 means no check.
	minEntropy float64
	// generic rules yield to a specific rule matching the same line.
	generic bool
	// multiline rules run over the whole file; the others only over the
	// lines holding one of their keywords.
	multiline bool
}

var secretRules = []secretRule{
	{
		// gitleaks "private-key".
		id: "private-key", title: "private key", severity: Critical, multiline: true,
		keywords: []string{"-----begin"},
		re:       regexp.MustCompile(`(?i)(-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S-]{64,}?KEY(?: BLOCK)?-----)`),
	},
	{
		// gitleaks "aws-access-token".
		id: "aws-access-key", title: "AWS access key", severity: High,
		keywords: []string{"a3t", "akia", "asia", "abia", "acca"},
		re:       regexp.MustCompile(`\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b`), minEntropy: 3,
	},
	{
		// gitleaks "generic-api-key" narrowed to AWS's secret key names
		// (aws_secret_access_key and the like, 40 base64 characters).
		id: "aws-secret-key", title: "AWS secret access key", severity: Critical,
		keywords: []string{"aws"},
		re:       regexp.MustCompile(`(?i)aws[\w.-]{0,20}?secret[\w.-]{0,20}?["']?\s*(?:=|:|:=|=>)\s*["']?([A-Za-z0-9/+=]{40})\b`), minEntropy: 4,
	},
	{
		// gitleaks "gcp-api-key".
		id: "gcp-api-key", title: "Google Cloud API key", severity: High,
		keywords: []string{"aiza"},
		re:       regexp.MustCompile("\\b(AIza[\\w-]{35})(?:[`'\"\\s;]|\\\\[nr]|$)"), minEntropy: 3,
	},
	{
		// gitleaks "azure-ad-client-secret".
		id: "azure-client-secret", title: "Azure AD client secret", severity: High,
		keywords: []string{"q~"},
		re:       regexp.MustCompile("(?:^|[\\\\'\"`\\s>=:(,)])([a-zA-Z0-9_~.]{3}\\dQ~[a-zA-Z0-9_~.-]{31,34})(?:$|[\\\\'\"`\\s<),])"), minEntropy: 3,
	},
	{
		// Azure storage connection strings: AccountKey= is 64 bytes in
		// base64 (Microsoft's documented format; not in gitleaks).
		id: "azure-storage-key", title: "Azure storage account key", severity: Critical,
		keywords: []string{"accountkey="},
		re:       regexp.MustCompile(`(?i)AccountKey=([A-Za-z0-9+/]{86}==)`), minEntropy: 4,
	},
	{
		// gitleaks "github-pat", "github-oauth", "github-app-token",
		// "github-refresh-token" in one.
		id: "github-token", title: "GitHub token", severity: High,
		keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"},
		re:       regexp.MustCompile(`\b((?:ghp|gho|ghu|ghs|ghr)_[0-9a-zA-Z]{36})\b`), minEntropy: 3,
	},
	{
		// gitleaks "github-fine-grained-pat".
		id: "github-fine-grained-token", title: "GitHub fine-grained token", severity: High,
		keywords: []string{"github_pat_"},
		re:       regexp.MustCompile(`\b(github_pat_\w{82})\b`), minEntropy: 3,
	},
	{
		// gitleaks "gitlab-pat", "gitlab-ptt", "gitlab-rrt" in one.
		id: "gitlab-token", title: "GitLab token", severity: High,
		keywords: []string{"glpat-", "glptt-", "gr1348941"},
		re:       regexp.MustCompile(`\b(glpat-[\w-]{20}|glptt-[0-9a-f]{40}|GR1348941[\w-]{20})\b`), minEntropy: 3,
	},
	{
		// gitleaks "slack-bot-token", "slack-user-token" and
		// "slack-legacy-token", joined.
		id: "slack-token", title: "Slack token", severity: High,
		keywords: []string{"xoxb", "xoxp", "xoxe", "xoxa", "xoxs"},
		re:       regexp.MustCompile(`\b(xox[bpeas]-[0-9]{10,13}-[0-9A-Za-z-]{10,})\b`), minEntropy: 3,
	},
	{
		// gitleaks "slack-webhook-url".
		id: "slack-webhook", title: "Slack webhook URL", severity: Medium,
		keywords: []string{"hooks.slack.com"},
		re:       regexp.MustCompile(`((?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56})`),
	},
	{
		// gitleaks "stripe-access-token", live keys.
		id: "stripe-live-key", title: "Stripe live secret key", severity: Critical,
		keywords: []string{"sk_live", "rk_live", "sk_prod", "rk_prod"},
		re:       regexp.MustCompile(`\b((?:sk|rk)_(?:live|prod)_[a-zA-Z0-9]{10,99})\b`), minEntropy: 2,
	},
	{
		// gitleaks "stripe-access-token", test keys: no money behind them.
		id: "stripe-test-key", title: "Stripe test secret key", severity: Low,
		keywords: []string{"sk_test", "rk_test"},
		re:       regexp.MustCompile(`\b((?:sk|rk)_test_[a-zA-Z0-9]{10,99})\b`), minEntropy: 2,
	},
	{
		// gitleaks "generic-api-key", reduced: a name with a secret's word
		// in it, an assignment (not gitleaks' comma: a list of names is not
		// an assignment), and a quoted value of 10 to 150 characters with
		// gitleaks' entropy floor of 3.5 bits.
		id: "generic-secret", title: "secret assigned in source", severity: Medium, generic: true,
		keywords:   genericKeywords,
		re:         regexp.MustCompile(`(?i)` + genericName + `["']?\s*(?:=|:|:=|=>)\s*["'](` + genericValue + `)["']`),
		minEntropy: 3.5,
	},
	{
		// The same, unquoted, as a whole line: .env files, YAML, properties
		// (NAME=value, export NAME=value, name: value).
		id: "generic-secret-line", title: "secret assigned in source", severity: Medium, generic: true,
		keywords:   genericKeywords,
		re:         regexp.MustCompile(`(?im)^[ \t]*(?:export[ \t]+)?` + genericName + `[ \t]*[=:][ \t]*(` + genericValue + `)[ \t]*\r?$`),
		minEntropy: 3.5,
	},
}

// genericName is the name part of the generic rules: up to 50 name
// characters, a secret's word, up to 20 more.
const genericName = `[\w.-]{0,50}?(?:secret|token|passw(?:or)?d|pwd|api[_-]?key|access[_-]?key|private[_-]?key|auth)[\w.-]{0,20}`

// genericValue is the value part: 10 to 150 characters with no space,
// quote, or the brackets and commas of code (a call, an index, a list).
const genericValue = `[^\s"'` + "`" + `;,()\[\]{}<>]{10,150}`

var genericKeywords = []string{"secret", "token", "passw", "pwd", "api_key", "apikey", "api-key", "access_key", "accesskey", "access-key", "private_key", "privatekey", "private-key", "auth"}

// codeReference is a value that names something in code rather than
// holding a secret: a dotted identifier (cfg.Cluster.Secret,
// authz.KindAnonymous).
var codeReference = regexp.MustCompile(`^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$`)

// placeholders are values a match is not a secret for: references to the
// environment and obvious stand-ins (gitleaks' allowlists skip AWS's
// documented …EXAMPLE keys the same way). Private keys are never taken for
// placeholders.
var placeholders = []string{"${", "$(", "{{", "process.env", "os.environ", "getenv", "<", "xxxx", "changeme", "example", "placeholder", "your_", "your-", "dummy", "redacted", "****"}

// secretsSkipped are files never searched for secrets: lock and checksum
// files full of hashes (gitleaks' default allowlist does the same).
var secretsSkipped = map[string]bool{
	"go.sum": true, "package-lock.json": true, "yarn.lock": true, "pnpm-lock.yaml": true,
	"poetry.lock": true, "Pipfile.lock": true, "Cargo.lock": true, "composer.lock": true, "Gemfile.lock": true,
}

// scanSecrets searches every text file of the tree up to MaxFileBytes.
func scanSecrets(ctx context.Context, t *tree) ([]Finding, error) {
	var out []Finding
	for i, f := range t.files {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if f.size > MaxFileBytes || f.size == 0 || secretsSkipped[path.Base(f.path)] {
			continue
		}
		b, err := t.read(f, MaxFileBytes)
		if err != nil || isBinary(b) {
			continue
		}
		out = append(out, findSecrets(f.path, b)...)
	}
	return out, nil
}

// findSecrets is the pure part of the secret check: the findings in one
// file's contents. A finding's title names the rule, the file and the
// line, and never the secret.
func findSecrets(p string, b []byte) []Finding {
	lower := bytes.ToLower(b)
	var out []Finding
	seen := map[string]bool{}
	lines := map[int]bool{}        // lines a specific rule matched
	genericLines := map[int]bool{} // lines a generic rule matched
	for _, r := range secretRules {
		for _, m := range r.matches(b, lower) {
			secret := b[m[0]:m[1]]
			if r.minEntropy > 0 && entropy(secret) < r.minEntropy {
				continue
			}
			if r.id != "private-key" && isPlaceholder(secret) {
				continue
			}
			if r.generic && codeReference.Match(secret) {
				continue
			}
			line := 1 + bytes.Count(b[:m[0]], []byte{'\n'})
			if r.generic {
				if lines[line] || genericLines[line] {
					continue
				}
				genericLines[line] = true
			} else {
				lines[line] = true
			}
			id := fmt.Sprintf("secret:%s:%s:%d", r.id, p, line)
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, Finding{
				ID: id, Severity: r.severity, Fixable: true, Path: ptr(p),
				Title: fmt.Sprintf("Committed %s in %s line %d: remove it from the source, rotate it and give it to the app as a secret", r.title, p, line),
			})
		}
	}
	return out
}

// maxMatches bounds the matches of one rule in one file.
const maxMatches = 64

// matches returns the offsets in b of the rule's secrets (its first
// group). A multiline rule runs over the whole file when a keyword is in
// it; the others run over each line holding a keyword, once per line, so
// that a long file with one keyword costs one line's match.
func (r secretRule) matches(b, lower []byte) [][2]int {
	var out [][2]int
	if r.multiline {
		if !containsAny(lower, r.keywords) {
			return nil
		}
		for _, m := range r.re.FindAllSubmatchIndex(b, maxMatches) {
			out = append(out, [2]int{m[2], m[3]})
		}
		return out
	}
	done := map[int]bool{} // line starts already matched
	for _, k := range r.keywords {
		kw := []byte(k)
		for from := 0; len(out) < maxMatches; {
			i := bytes.Index(lower[from:], kw)
			if i < 0 {
				break
			}
			i += from
			start := bytes.LastIndexByte(b[:i], '\n') + 1
			end := bytes.IndexByte(b[i:], '\n')
			if end < 0 {
				end = len(b)
			} else {
				end += i
			}
			from = end
			if done[start] {
				continue
			}
			done[start] = true
			for _, m := range r.re.FindAllSubmatchIndex(b[start:end], maxMatches) {
				out = append(out, [2]int{start + m[2], start + m[3]})
			}
		}
	}
	return out
}

func containsAny(b []byte, words []string) bool {
	for _, w := range words {
		if bytes.Contains(b, []byte(w)) {
			return true
		}
	}
	return false
}

func isPlaceholder(secret []byte) bool {
	s := strings.ToLower(string(secret))
	for _, p := range placeholders {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// entropy is the Shannon entropy of b in bits per byte.
func entropy(b []byte) float64 {
	if len(b) == 0 {
		return 0
	}
	var counts [256]int
	for _, c := range b {
		counts[c]++
	}
	var h float64
	n := float64(len(b))
	for _, c := range counts {
		if c == 0 {
			continue
		}
		p := float64(c) / n
		h -= p * math.Log2(p)
	}
	return h
}
