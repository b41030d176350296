package detect

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"

	"github.com/svchost/svc/internal/spec"
)

// secretNameRE matches variable names that hold secrets.
var secretNameRE = regexp.MustCompile(`(?i)(secret|passw(or)?d|token|api_?key|private_?key|access_?key|credential|salt|(^|_)dsn$|(^|_)key$|(^|_)pass$)`)

// publicNameRE matches names that look secret but are meant to be public.
var publicNameRE = regexp.MustCompile(`(?i)(public|publishable)`)

// looksSecret reports whether a variable of that name holds a secret.
func looksSecret(name string) bool {
	return secretNameRE.MatchString(name) && !publicNameRE.MatchString(name)
}

// slotTypes maps URL schemes and image names to slot types.
var slotTypes = map[string]string{
	"postgres": "postgres", "postgresql": "postgres", "postgis": "postgres", "timescaledb": "postgres",
	"mysql": "mysql", "mariadb": "mysql",
	"redis": "redis", "rediss": "redis", "redis-stack": "redis", "redis-stack-server": "redis", "valkey": "redis",
	"mongo": "mongodb", "mongodb": "mongodb", "mongodb+srv": "mongodb", "mongodb-community-server": "mongodb",
	"amqp": "rabbitmq", "amqps": "rabbitmq", "rabbitmq": "rabbitmq",
	"memcached": "memcached", "memcache": "memcached",
}

// slotName is the name a slot of a type gets when nothing names it.
func slotName(typ string) string {
	switch typ {
	case "postgres", "mysql", "mongodb":
		return "db"
	}
	return typ
}

// urlSlotType returns the slot type a connection URL points at.
func urlSlotType(v string) (string, bool) {
	scheme, _, ok := strings.Cut(v, "://")
	if !ok {
		return "", false
	}
	scheme = strings.ToLower(scheme)
	if base, _, ok := strings.Cut(scheme, "+"); ok && scheme != "mongodb+srv" {
		scheme = base // postgresql+psycopg, mysql+pymysql
	}
	t, ok := slotTypes[scheme]
	return t, ok
}

// urlHost returns the host name of a connection URL.
func urlHost(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// parseDotenv reads a .env file; it expands nothing from the host.
func parseDotenv(b []byte) (map[string]string, []string) {
	vars, err := dotenv.UnmarshalBytesWithLookup(b, func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, nil
	}
	return vars, sortedKeys(vars)
}

// envExampleFiles are the files that list the variables an app expects.
var envExampleFiles = []string{".env.example", ".env.sample", ".env.template", ".env.dist", "example.env", "env.example"}

// envSources is what an app's own files say about its environment.
type envSources struct {
	// example holds the variables of the first env example file.
	example     map[string]string
	exampleKeys []string
	examplePath string
	// read maps variables the code reads to the file that reads them.
	read map[string]string
	// dbType is the slot type the dependencies point at (a PostgreSQL
	// driver: postgres), for a DATABASE_URL the code reads.
	dbType string
}

// codeEnvRE finds variables read by code: Go, JavaScript, Python, Ruby.
var codeEnvRE = regexp.MustCompile(`(?:os\.(?:Getenv|LookupEnv|getenv)\(\s*|process\.env\[\s*|os\.environ(?:\.get)?[\[(]\s*|ENV(?:\.fetch\()?\[?\s*)["']([A-Za-z_][A-Za-z0-9_]*)["']|process\.env\.([A-Za-z_][A-Za-z0-9_]*)`)

// scanEnvReads records the variables src reads.
func (s *envSources) scanEnvReads(p string, src []byte) {
	if s.read == nil {
		s.read = map[string]string{}
	}
	for _, m := range codeEnvRE.FindAllSubmatch(src, 200) {
		name := string(m[1])
		if name == "" {
			name = string(m[2])
		}
		if _, ok := s.read[name]; !ok {
			s.read[name] = p
		}
	}
}

// loadEnvExample reads the first env example file of the root.
func (s *envSources) loadEnvExample(t *Tree) {
	p, ok := t.first(envExampleFiles...)
	if !ok {
		return
	}
	b, ok := t.Read(p)
	if !ok {
		return
	}
	s.example, s.exampleKeys = parseDotenv(b)
	s.examplePath = p
}

// applyEnv fills a workload's environment from the env example file and
// the variables the code reads: secrets become secret references and
// questions, connection URLs to databases and caches become slots, and
// other example values are kept as literals (an empty one is asked).
// The variable named skip (the port variable, set by the detector) is
// left alone.
func (s *envSources) applyEnv(t *Tree, b *Bid, workload string, skip string) {
	d := &b.Proposal
	w := d.Workloads[workload]
	if w.Env == nil {
		w.Env = map[string]spec.EnvValue{}
	}
	defer func() { d.Workloads[workload] = w }()
	for _, k := range s.exampleKeys {
		if k == skip || !validEnvName(k) {
			continue
		}
		if len(w.Env) >= spec.MaxEnvVars {
			b.evidence(s.examplePath, "more than %d variables: the rest are left out", spec.MaxEnvVars)
			break
		}
		v := s.example[k]
		if strings.ContainsRune(v, 0) {
			continue // not a value an environment can hold
		}
		if typ, ok := urlSlotType(v); ok {
			name := addSlot(d, typ, "")
			w.Env[k] = spec.EnvValue{Slot: name, Field: "url"}
			b.evidence(s.examplePath, "%s is a %s connection URL: slot %s", k, typ, name)
			continue
		}
		if looksSecret(k) {
			w.Env[k] = spec.EnvValue{Secret: k}
			b.askSecret(t, k, s.examplePath+" lists it")
			b.evidence(s.examplePath, "%s looks secret: a secret reference", k)
			continue
		}
		if v == "" {
			w.Env[k] = spec.Literal(b.askEnv(t, k, s.examplePath+" lists it without a value", ""))
			continue
		}
		w.Env[k] = spec.Literal(v)
	}
	for _, k := range sortedKeys(s.read) {
		if _, done := w.Env[k]; done || k == skip || !validEnvName(k) || len(w.Env) >= spec.MaxEnvVars {
			continue
		}
		if typ, ok := urlVarSlotType(k, s.dbType); ok {
			name := addSlot(d, typ, "")
			w.Env[k] = spec.EnvValue{Slot: name, Field: "url"}
			b.evidence(s.read[k], "reads %s, a %s connection URL: slot %s", k, typ, name)
			continue
		}
		if !looksSecret(k) {
			continue
		}
		w.Env[k] = spec.EnvValue{Secret: k}
		b.askSecret(t, k, s.read[k]+" reads it")
		b.evidence(s.read[k], "reads the secret %s: a secret reference", k)
	}
	if len(w.Env) == 0 {
		w.Env = nil
	}
}

// addSlot declares a slot of typ named name (or after its type) unless a
// slot of that type exists, and returns its name.
func addSlot(d *spec.Document, typ, name string) string {
	for _, n := range sortedKeys(d.Slots) {
		if d.Slots[n].Type == typ && (name == "" || n == name) {
			return n
		}
	}
	if name == "" {
		name = slotName(typ)
	}
	if d.Slots == nil {
		d.Slots = map[string]spec.Slot{}
	}
	name = uniqueName(name, func(n string) bool { _, ok := d.Slots[n]; return ok })
	d.Slots[name] = spec.Slot{Type: typ, Required: true}
	return name
}

// urlVarRE matches the names of variables holding connection URLs.
var urlVarRE = regexp.MustCompile(`^(?:[A-Z0-9]+_)*(?:URL|URI|DSN)$`)

// urlVarSlotType returns the slot type a connection URL variable points at
// by its name, with dbType (what the dependencies say) for a plain
// DATABASE_URL.
func urlVarSlotType(name, dbType string) (string, bool) {
	if !urlVarRE.MatchString(name) {
		return "", false
	}
	n := strings.ToUpper(name)
	for _, m := range []struct{ sub, typ string }{
		{"POSTGRES", "postgres"}, {"PG", "postgres"}, {"MYSQL", "mysql"}, {"MARIADB", "mysql"},
		{"REDIS", "redis"}, {"MONGO", "mongodb"}, {"AMQP", "rabbitmq"}, {"RABBIT", "rabbitmq"},
		{"MEMCACHE", "memcached"},
	} {
		if strings.Contains(n, m.sub) {
			return m.typ, true
		}
	}
	if dbType != "" && (strings.HasPrefix(n, "DATABASE_") || strings.HasPrefix(n, "DB_")) {
		return dbType, true
	}
	return "", false
}

// driverTypes maps database client packages (npm, PyPI, Go modules) to the
// slot type a DATABASE_URL they are used with points at.
var driverTypes = map[string]string{
	"pg": "postgres", "postgres": "postgres", "psycopg2": "postgres", "psycopg2-binary": "postgres",
	"psycopg": "postgres", "asyncpg": "postgres", "github.com/lib/pq": "postgres",
	"github.com/jackc/pgx/v4": "postgres", "github.com/jackc/pgx/v5": "postgres",
	"mysql": "mysql", "mysql2": "mysql", "mysqlclient": "mysql", "pymysql": "mysql",
	"github.com/go-sql-driver/mysql": "mysql",
	"mongodb":                        "mongodb", "mongoose": "mongodb", "pymongo": "mongodb", "motor": "mongodb",
	"go.mongodb.org/mongo-driver": "mongodb", "go.mongodb.org/mongo-driver/v2": "mongodb",
}

// driverSlotType returns the database type the dependencies point at, ""
// when none or more than one.
func driverSlotType(deps []string) string {
	found := ""
	for _, d := range deps {
		if t, ok := driverTypes[d]; ok {
			if found != "" && found != t {
				return ""
			}
			found = t
		}
	}
	return found
}
