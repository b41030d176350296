package detect

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
)

// composeDetector translates a compose file. Score 90: the file says how
// every part of the app runs. Services running a well-known image
// (PostgreSQL, MySQL/MariaDB, Redis, MongoDB, RabbitMQ, Memcached) become
// slots; the others become workloads. What a spec cannot carry is listed
// in the bid's Rejected (see ComposeRejection) and the bid is kept, so
// that whoever reads it sees why it cannot be deployed as it is.
type composeDetector struct{}

var _ Detector = composeDetector{}

// composeFiles are the names compose looks for, in its own order, each
// with the override file compose merges over it.
var composeFiles = []struct{ name, override string }{
	{"compose.yaml", "compose.override.yaml"},
	{"compose.yml", "compose.override.yml"},
	{"docker-compose.yml", "docker-compose.override.yml"},
	{"docker-compose.yaml", "docker-compose.override.yaml"},
}

// RejectedConstruct is one part of a compose file a spec cannot carry.
type RejectedConstruct struct {
	// Service is the service using it; empty for a top-level construct.
	Service   string `json:"service,omitempty"`
	Construct string `json:"construct"`
	Reason    string `json:"reason"`
}

// ComposeRejection returns the PLAN_COMPOSE_CONSTRUCT_REJECTED error of a
// bid that carries rejected constructs, naming each, or nil.
func ComposeRejection(b Bid) error {
	if len(b.Rejected) == 0 {
		return nil
	}
	names := make([]string, len(b.Rejected))
	list := make([]map[string]string, len(b.Rejected))
	for i, r := range b.Rejected {
		names[i] = r.Construct
		if r.Service != "" {
			names[i] = r.Service + ": " + r.Construct
		}
		list[i] = map[string]string{"service": r.Service, "construct": r.Construct, "reason": r.Reason}
	}
	return errcode.New(errcode.PlanComposeRejected, "the compose file uses constructs svc cannot translate: %s", strings.Join(names, "; ")).
		WithDetail("constructs", list).
		WithRemedy("remove them from the compose file (or edit the proposed spec) and run detection again")
}

// defaultVolumeBytes is the size given to a volume compose declares.
const defaultVolumeBytes = 1 << 30

func (composeDetector) Bid(t *Tree) (Bid, bool) {
	var files []string
	for _, f := range composeFiles {
		if t.Has(f.name) {
			files = append(files, f.name)
			if t.Has(f.override) {
				files = append(files, f.override)
			}
			break
		}
	}
	if len(files) == 0 {
		return Bid{}, false
	}
	b := Bid{Detector: "compose", Score: 90}
	c := composeTranslation{t: t, b: &b, file: files[0]}
	var configs []types.ConfigFile
	for i, f := range files {
		src, ok := t.Read(f)
		if !ok {
			return Bid{}, false
		}
		raw, err := preparseCompose(src)
		if err != nil {
			if i == 0 {
				return Bid{}, false
			}
			b.evidence(f, "ignored: %v", err)
			continue
		}
		c.prescan(raw)
		configs = append(configs, types.ConfigFile{Filename: f, Config: raw})
		b.evidence(f, "compose file")
	}
	project, vars, err := loadCompose(configs)
	if err != nil {
		return Bid{}, false
	}
	if len(vars) > 0 {
		b.evidence(files[0], "interpolates %s from the host environment; detection reads none, so defaults apply", strings.Join(vars, ", "))
	}
	if !c.translate(project) {
		return Bid{}, false
	}
	slices.SortFunc(c.rejected, func(x, y RejectedConstruct) int {
		if n := strings.Compare(x.Service, y.Service); n != 0 {
			return n
		}
		return strings.Compare(x.Construct, y.Construct)
	})
	b.Rejected = slices.CompactFunc(c.rejected, func(x, y RejectedConstruct) bool { return x == y })
	return b, true
}

// preparseCompose decodes a compose file's first document. The loader is
// given the decoded value rather than the text so that it never reads a
// file itself nor warns about the obsolete version attribute.
func preparseCompose(src []byte) (map[string]any, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(src, &raw); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("empty")
	}
	delete(raw, "version")
	return raw, nil
}

// loadCompose loads decoded compose files with compose-go: no host
// environment (interpolation sees no variable set and logs nothing), no
// includes, no path resolution, no env_file or label_file reads. It
// returns the variables interpolation asked for.
func loadCompose(configs []types.ConfigFile) (p *types.Project, vars []string, err error) {
	if len(configs) == 0 {
		return nil, nil, fmt.Errorf("no compose file")
	}
	asked := map[string]bool{}
	defer func() {
		// compose-go is not meant for hostile input; a panic in it must not
		// take the caller down.
		if r := recover(); r != nil {
			p, vars, err = nil, nil, fmt.Errorf("load compose file: %v", r)
		}
	}()
	details := types.ConfigDetails{WorkingDir: ".", ConfigFiles: configs, Environment: types.Mapping{}}
	p, err = loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("app", true)
		o.SkipInclude = true
		o.ResolvePaths = false
		o.SkipResolveEnvironment = true
		o.SkipResolveLabels = true
		o.Interpolate.LookupValue = func(k string) (string, bool) {
			asked[k] = true
			return "", false
		}
		o.Interpolate.Substitute = func(s string, m template.Mapping) (string, error) {
			return template.SubstituteWithOptions(s, m, template.WithoutLogging)
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load compose file: %w", err)
	}
	delete(asked, "COMPOSE_PROJECT_NAME")
	return p, sortedKeys(asked), nil
}

// composeTranslation holds the state of one compose file's translation.
type composeTranslation struct {
	t        *Tree
	b        *Bid
	file     string // the main compose file, for evidence
	rejected []RejectedConstruct
	// slotHosts maps the host names of slot services to their slot.
	slotHosts map[string]string
	// workloads maps app service names to workload names.
	workloads map[string]string
}

func (c *composeTranslation) reject(service, construct, reason string) {
	c.rejected = append(c.rejected, RejectedConstruct{Service: service, Construct: construct, Reason: reason})
}

// prescan handles, in the decoded file, what must not reach the loader:
// includes and extends of other files (the loader would read them) and
// the deprecated external.name form (it logs a warning).
func (c *composeTranslation) prescan(raw map[string]any) {
	if _, ok := raw["include"]; ok {
		c.reject("", "include", "includes other compose files, which are not translated")
		delete(raw, "include")
	}
	if services, ok := raw["services"].(map[string]any); ok {
		for _, name := range sortedKeys(services) {
			svc, ok := services[name].(map[string]any)
			if !ok {
				continue
			}
			if ext, ok := svc["extends"].(map[string]any); ok {
				if _, hasFile := ext["file"]; hasFile {
					c.reject(name, "extends", fmt.Sprintf("extends a service of another file (%v)", ext["file"]))
					delete(svc, "extends")
				}
			}
		}
	}
	for _, section := range []string{"volumes", "networks", "secrets", "configs"} {
		defs, ok := raw[section].(map[string]any)
		if !ok {
			continue
		}
		for _, name := range sortedKeys(defs) {
			def, ok := defs[name].(map[string]any)
			if !ok {
				continue
			}
			if ext, ok := def["external"].(map[string]any); ok {
				if n, ok := ext["name"].(string); ok {
					def["name"] = n
				}
				def["external"] = true
			}
		}
	}
}

// composeServiceSlot returns the slot type of a service's image.
func composeServiceSlot(s types.ServiceConfig) (string, bool) {
	if s.Build != nil || s.Image == "" {
		return "", false
	}
	img, _, _ := strings.Cut(s.Image, "@")
	if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
		img = img[:i]
	}
	img = strings.ToLower(path.Base(img))
	if strings.Contains(img, "+") || img == "amqp" || img == "amqps" || img == "rediss" {
		return "", false
	}
	typ, ok := slotTypes[img]
	return typ, ok
}

// translate turns the project into the bid's proposal; false when no
// service runs the app itself.
func (c *composeTranslation) translate(p *types.Project) bool {
	d := &c.b.Proposal
	d.Workloads = map[string]spec.Workload{}
	c.slotHosts = map[string]string{}
	c.workloads = map[string]string{}
	names := sortedKeys(p.Services)
	for _, name := range sortedKeys(p.DisabledServices) {
		c.b.evidence(c.file, "service %s is left out: it runs only under a profile", name)
	}
	// Slots first, so that workloads' variables can refer to them.
	slotServices := map[string]bool{}
	for _, name := range names {
		s := p.Services[name]
		typ, ok := composeServiceSlot(s)
		if !ok {
			continue
		}
		slotServices[name] = true
		if len(d.Slots) >= spec.MaxSlots {
			c.reject(name, "services", fmt.Sprintf("more than %d database and cache services", spec.MaxSlots))
			continue
		}
		slot := addSlot(d, typ, uniqueName(sanitizeName(name, "slot"), func(n string) bool { _, ok := d.Slots[n]; return ok }))
		for _, h := range serviceHosts(name, s) {
			c.slotHosts[h] = slot
		}
		c.b.evidence(c.file, "service %s runs %s: slot %s of type %s", name, s.Image, slot, typ)
		if len(s.Volumes) > 0 {
			c.b.evidence(c.file, "service %s: its volumes are left to whatever fills slot %s", name, slot)
		}
	}
	for _, name := range names {
		if slotServices[name] {
			continue
		}
		if len(c.workloads) >= spec.MaxWorkloads {
			c.reject(name, "services", fmt.Sprintf("more than %d services run the app", spec.MaxWorkloads))
			continue
		}
		c.workloads[name] = uniqueName(sanitizeName(name, "app"), func(n string) bool { _, ok := d.Workloads[n]; return ok })
		d.Workloads[c.workloads[name]] = spec.Workload{}
	}
	if len(c.workloads) == 0 {
		return false
	}
	published := map[string]bool{}
	for _, name := range names {
		wname, ok := c.workloads[name]
		if !ok {
			continue
		}
		s := p.Services[name]
		w, pub := c.workload(p, name, s)
		published[wname] = pub
		d.Workloads[wname] = w
	}
	c.networks(p)
	for _, name := range sortedKeys(p.Volumes) {
		v := p.Volumes[name]
		if bool(v.External) {
			c.reject("", "volumes."+name+".external", "an external volume lives outside the app")
		} else if (v.Driver != "" && v.Driver != "local") || len(v.DriverOpts) > 0 {
			c.reject("", "volumes."+name+".driver", "volume drivers and driver options (such as bind devices) are not translated")
		}
	}
	primary := choosePrimary(d.Workloads, published)
	w := d.Workloads[primary]
	w.Primary = spec.Bool(true)
	if w.Run.Port == 0 {
		w.Run.Port = c.b.askPort(c.t, "Port the "+primary+" service listens on (the compose file publishes none)", 8080)
	}
	d.Workloads[primary] = w
	for _, n := range sortedKeys(d.Workloads) {
		if w := d.Workloads[n]; w.Run.Health != nil && w.Run.Port == 0 {
			w.Run.Health = nil
			d.Workloads[n] = w
		}
	}
	c.b.evidence(c.file, "primary workload: %s", primary)
	for _, n := range sortedKeys(d.Workloads) {
		if n != primary && published[n] {
			c.b.evidence(c.file, "service %s publishes a port; only the primary workload is routed", n)
		}
	}
	return true
}

// serviceHosts are the names other services reach a service by.
func serviceHosts(name string, s types.ServiceConfig) []string {
	hosts := []string{name}
	if s.ContainerName != "" {
		hosts = append(hosts, s.ContainerName)
	}
	if s.Hostname != "" {
		hosts = append(hosts, s.Hostname)
	}
	for _, n := range sortedKeys(s.Networks) {
		if cfg := s.Networks[n]; cfg != nil {
			hosts = append(hosts, cfg.Aliases...)
		}
	}
	return hosts
}

// choosePrimary picks the workload the edge routes to: among those that
// publish a port (else those with a port, else all), one named web, app or
// frontend, else the first by name.
func choosePrimary(ws map[string]spec.Workload, published map[string]bool) string {
	names := sortedKeys(ws)
	for _, pick := range []func(string) bool{
		func(n string) bool { return published[n] && ws[n].Run.Port > 0 },
		func(n string) bool { return ws[n].Run.Port > 0 },
		func(string) bool { return true },
	} {
		var cands []string
		for _, n := range names {
			if pick(n) {
				cands = append(cands, n)
			}
		}
		if len(cands) == 0 {
			continue
		}
		for _, pref := range []string{"web", "app", "frontend"} {
			if slices.Contains(cands, pref) {
				return pref
			}
		}
		return cands[0]
	}
	return names[0]
}

// workload translates one app service; pub says whether it publishes a
// port.
func (c *composeTranslation) workload(p *types.Project, name string, s types.ServiceConfig) (spec.Workload, bool) {
	var w spec.Workload
	c.serviceRejections(p, name, s)
	if s.Build != nil {
		ctx := s.Build.Context
		if ctx == "" {
			ctx = "."
		}
		if strings.Contains(ctx, "://") || strings.HasPrefix(ctx, "git@") || path.IsAbs(ctx) || strings.HasPrefix(path.Clean(ctx), "..") || strings.ContainsFunc(ctx, isControl) {
			c.reject(name, "build.context", fmt.Sprintf("build context %q is outside the source", ctx))
			ctx = "."
		}
		w.Build = &spec.Build{Kind: spec.BuildDockerfile, Context: path.Clean(ctx)}
		if df := s.Build.Dockerfile; df != "" && df != "Dockerfile" {
			if clean := path.Clean(df); path.IsAbs(df) || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsFunc(df, isSpaceOrControl) {
				c.reject(name, "build.dockerfile", fmt.Sprintf("Dockerfile %q is outside the build context", df))
			} else {
				w.Build.Dockerfile = clean
			}
		}
		if s.Build.Target != "" {
			c.b.evidence(c.file, "service %s builds stage %s; the spec builds the Dockerfile's last stage", name, s.Build.Target)
		}
		if len(s.Build.Args) > 0 {
			c.b.evidence(c.file, "service %s passes build args %s; the spec has none", name, strings.Join(sortedKeys(s.Build.Args), ", "))
		}
	} else {
		img := s.Image
		if strings.ContainsFunc(img, isSpaceOrControl) {
			c.reject(name, "image", fmt.Sprintf("image reference %q has spaces", img))
			img = strings.Join(strings.FieldsFunc(img, isSpaceOrControl), "")
		}
		if img == "" {
			img = "invalid"
		}
		w.Build = &spec.Build{Kind: spec.BuildImage, Image: img}
	}
	if len(s.Entrypoint) > 0 || len(s.Command) > 0 {
		cmd := append(slices.Clone([]string(s.Entrypoint)), s.Command...)
		if strings.TrimSpace(cmd[0]) != "" && !slices.ContainsFunc(cmd, func(a string) bool { return strings.ContainsRune(a, 0) }) {
			w.Run.Command = cmd
		} else {
			c.b.evidence(c.file, "service %s: its command is left out (it starts with an empty word)", name)
		}
	}
	pub := false
	if len(s.Ports) > 0 {
		if port := int(s.Ports[0].Target); port >= 1 && port <= 65535 {
			w.Run.Port, pub = port, true
		}
		if len(s.Ports) > 1 {
			c.b.evidence(c.file, "service %s publishes %d ports; the spec routes the first (%d)", name, len(s.Ports), s.Ports[0].Target)
		}
	} else if len(s.Expose) > 0 {
		f, _, _ := strings.Cut(s.Expose[0], "/")
		f, _, _ = strings.Cut(f, "-")
		if n, err := strconv.Atoi(f); err == nil && n >= 1 && n <= 65535 {
			w.Run.Port = n
		}
	}
	w.Run.Health = composeHealth(s.HealthCheck)
	w.Env = c.env(name, s)
	for _, dep := range sortedKeys(s.DependsOn) {
		if wd, ok := c.workloads[dep]; ok && dep != name {
			w.DependsOn = append(w.DependsOn, wd)
		}
	}
	w.Mounts = c.mounts(p, name, s)
	w.Resources = composeResources(s)
	return w, pub
}

// serviceRejections lists what the service uses that a spec cannot carry.
func (c *composeTranslation) serviceRejections(p *types.Project, name string, s types.ServiceConfig) {
	if s.Privileged {
		c.reject(name, "privileged", "privileged containers are not run")
	}
	for _, m := range []struct{ field, value string }{
		{"network_mode", s.NetworkMode}, {"net", s.Net}, {"pid", s.Pid}, {"ipc", s.Ipc}, {"uts", s.Uts}, {"userns_mode", s.UserNSMode},
	} {
		switch {
		case m.value == "host":
			c.reject(name, m.field+": host", "shares a namespace of the host")
		case strings.HasPrefix(m.value, "service:") || strings.HasPrefix(m.value, "container:"):
			c.reject(name, m.field+": "+m.value, "shares a namespace of another container")
		}
	}
	if len(s.CapAdd) > 0 {
		c.reject(name, "cap_add", "adds kernel capabilities: "+strings.Join(s.CapAdd, ", "))
	}
	if len(s.Devices) > 0 {
		c.reject(name, "devices", "maps host devices")
	}
	if len(s.Gpus) > 0 || (s.Deploy != nil && s.Deploy.Resources.Reservations != nil && len(s.Deploy.Resources.Reservations.Devices) > 0) {
		c.reject(name, "gpus", "reserves host devices")
	}
	if len(s.SecurityOpt) > 0 {
		c.reject(name, "security_opt", "changes the container's security profile")
	}
	if len(s.VolumesFrom) > 0 {
		c.reject(name, "volumes_from", "mounts the volumes of another container")
	}
	if s.UseAPISocket {
		c.reject(name, "use_api_socket", "gives the container the Docker API")
	}
	if len(s.ExternalLinks) > 0 {
		c.reject(name, "external_links", "links to containers outside the file")
	}
	if s.Provider != nil {
		c.reject(name, "provider", "delegates the service to a provider plugin")
	}
	if s.Deploy != nil && s.Deploy.Replicas != nil && *s.Deploy.Replicas > 1 {
		c.reject(name, "deploy.replicas", fmt.Sprintf("runs %d replicas; a workload runs once", *s.Deploy.Replicas))
	}
	if s.Scale != nil && *s.Scale > 1 {
		c.reject(name, "scale", fmt.Sprintf("runs %d replicas; a workload runs once", *s.Scale))
	}
	for _, sec := range s.Secrets {
		c.reject(name, "secrets."+sec.Source, "file secrets are not translated: "+fileObjectSource(types.FileObjectConfig(p.Secrets[sec.Source])))
	}
	for _, cfg := range s.Configs {
		c.reject(name, "configs."+cfg.Source, "config files are not translated: "+fileObjectSource(types.FileObjectConfig(p.Configs[cfg.Source])))
	}
	if bc := s.Build; bc != nil {
		if bc.DockerfileInline != "" {
			c.reject(name, "build.dockerfile_inline", "an inline Dockerfile is not translated")
		}
		if bc.Network == "host" {
			c.reject(name, "build.network: host", "builds on the host's network")
		}
		if bc.Privileged || len(bc.Entitlements) > 0 {
			c.reject(name, "build.privileged", "privileged builds are not run")
		}
		if len(bc.SSH) > 0 {
			c.reject(name, "build.ssh", "forwards the host's SSH agent or keys to the build")
		}
		if len(bc.Secrets) > 0 {
			c.reject(name, "build.secrets", "build secrets come from host files")
		}
		if len(bc.AdditionalContexts) > 0 {
			c.reject(name, "build.additional_contexts", "builds from other directories or images")
		}
	}
}

func fileObjectSource(f types.FileObjectConfig) string {
	switch {
	case bool(f.External):
		return "external"
	case f.File != "":
		return "from file " + f.File
	case f.Environment != "":
		return "from the host variable " + f.Environment
	case f.Content != "":
		return "inline content"
	}
	return "undeclared"
}

// networks rejects network setups whose meaning a spec would lose:
// external networks, fixed addresses, and services kept apart on
// separate networks (a spec's workloads all reach each other).
func (c *composeTranslation) networks(p *types.Project) {
	for _, n := range sortedKeys(p.Networks) {
		if bool(p.Networks[n].External) {
			c.reject("", "networks."+n+".external", "joins a network outside the app")
		}
	}
	sets := map[string][]string{}
	names := sortedKeys(p.Services)
	for _, name := range names {
		s := p.Services[name]
		if s.NetworkMode != "" {
			continue
		}
		nets := sortedKeys(s.Networks)
		if len(nets) == 0 {
			nets = []string{"default"}
		}
		sets[name] = nets
		for _, n := range nets {
			if cfg := s.Networks[n]; cfg != nil && (cfg.Ipv4Address != "" || cfg.Ipv6Address != "" || cfg.MacAddress != "") {
				c.reject(name, "networks."+n+".ipv4_address", "fixed addresses are not translated")
			}
		}
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			sa, oka := sets[a]
			sb, okb := sets[b]
			if oka && okb && !slices.ContainsFunc(sa, func(n string) bool { return slices.Contains(sb, n) }) {
				c.reject("", "networks", fmt.Sprintf("services %s and %s share no network; a spec's workloads all reach each other", a, b))
				return
			}
		}
	}
}

// env translates a service's environment: references to slot services
// become slot references, secret-looking values secret references (and
// questions), variables without a value questions; env_file entries found
// in the source are read, the service's own environment winning.
func (c *composeTranslation) env(name string, s types.ServiceConfig) map[string]spec.EnvValue {
	vars := map[string]*string{}
	for _, ef := range s.EnvFiles {
		p := path.Clean(ef.Path)
		src, ok := c.t.Read(p)
		if !ok {
			c.b.evidence(p, "service %s reads env_file %s, which is not in the source: its variables are unknown", name, ef.Path)
			continue
		}
		kv, keys := parseDotenv(src)
		for _, k := range keys {
			v := kv[k]
			vars[k] = &v
		}
		c.b.evidence(p, "env_file of service %s", name)
	}
	for k, v := range s.Environment {
		vars[k] = v
	}
	if len(vars) == 0 {
		return nil
	}
	env := map[string]spec.EnvValue{}
	slotTypesDeclared := map[string]string{}
	for _, n := range sortedKeys(c.b.Proposal.Slots) {
		if typ := c.b.Proposal.Slots[n].Type; slotTypesDeclared[typ] == "" {
			slotTypesDeclared[typ] = n
		}
	}
	for _, k := range sortedKeys(vars) {
		if !validEnvName(k) {
			c.b.evidence(c.file, "service %s: variable %q is left out (not a variable name)", name, k)
			continue
		}
		if len(env) >= spec.MaxEnvVars {
			c.b.evidence(c.file, "service %s sets more than %d variables: the rest are left out", name, spec.MaxEnvVars)
			break
		}
		v := vars[k]
		if v == nil {
			if typ, ok := urlVarSlotType(k, ""); ok && slotTypesDeclared[typ] != "" {
				env[k] = spec.EnvValue{Slot: slotTypesDeclared[typ], Field: "url"}
				continue
			}
			if looksSecret(k) {
				env[k] = spec.EnvValue{Secret: k}
				c.b.askSecret(c.t, k, "service "+name+" takes it from the host")
				continue
			}
			env[k] = spec.Literal(c.b.askEnv(c.t, k, "service "+name+" takes it from the host", ""))
			continue
		}
		val := *v
		if strings.ContainsRune(val, 0) {
			c.b.evidence(c.file, "service %s: variable %s is left out (its value holds a NUL byte)", name, k)
			continue
		}
		if strings.Contains(val, "://") {
			if slot, ok := c.slotHosts[urlHost(val)]; ok {
				env[k] = spec.EnvValue{Slot: slot, Field: "url"}
				c.b.evidence(c.file, "service %s: %s points at slot %s", name, k, slot)
				continue
			}
		}
		if slot, ok := c.slotHosts[val]; ok {
			env[k] = spec.EnvValue{Slot: slot, Field: "host"}
			c.b.evidence(c.file, "service %s: %s names slot %s", name, k, slot)
			continue
		}
		if looksSecret(k) {
			env[k] = spec.EnvValue{Secret: k}
			c.b.askSecret(c.t, k, "service "+name+" sets it in the compose file")
			continue
		}
		env[k] = spec.Literal(val)
	}
	return env
}

// mounts translates a service's volumes: named volumes become spec
// volumes; host paths are rejected; source paths are dropped for a built
// service (the build holds the source) and rejected for an image.
func (c *composeTranslation) mounts(p *types.Project, name string, s types.ServiceConfig) []spec.Mount {
	d := &c.b.Proposal
	var mounts []spec.Mount
	for i, v := range s.Volumes {
		switch v.Type {
		case types.VolumeTypeVolume:
			vname := v.Source
			if vname == "" {
				vname = fmt.Sprintf("%s-%d", name, i+1)
			}
			vol := sanitizeName(vname, "data")
			if d.Volumes == nil {
				d.Volumes = map[string]spec.Volume{}
			}
			target := path.Clean(v.Target)
			switch {
			case !path.IsAbs(target) || target == "/" || strings.ContainsFunc(target, isControl):
				c.reject(name, "volumes", fmt.Sprintf("mount path %q is not an absolute path below /", v.Target))
				continue
			case slices.ContainsFunc(mounts, func(m spec.Mount) bool { return m.Path == target }):
				continue
			}
			if _, ok := d.Volumes[vol]; !ok && len(d.Volumes) >= spec.MaxVolumes {
				c.reject(name, "volumes", fmt.Sprintf("more than %d volumes", spec.MaxVolumes))
				continue
			}
			d.Volumes[vol] = spec.Volume{SizeBytes: defaultVolumeBytes}
			mounts = append(mounts, spec.Mount{Volume: vol, Path: target})
		case types.VolumeTypeBind:
			src := v.Source
			inside := src != "" && !path.IsAbs(src) && !strings.HasPrefix(src, "~") && !strings.HasPrefix(path.Clean(src), "..")
			switch {
			case !inside:
				c.reject(name, "volumes: "+src, "bind mount of a host path")
			case s.Build == nil:
				c.reject(name, "volumes: "+src, "bind mount of a source path into an image")
			default:
				c.b.evidence(c.file, "service %s: bind mount of %s left out (the build holds the source)", name, src)
			}
		case types.VolumeTypeTmpfs:
			c.b.evidence(c.file, "service %s: tmpfs %s left out", name, v.Target)
		default:
			c.reject(name, "volumes: "+v.Type, "mount type "+v.Type+" is not translated")
		}
	}
	return mounts
}

var healthURLRE = regexp.MustCompile(`https?://(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\])(?::\d+)?(/[^\s'"|;&]*)`)

// composeHealth turns a healthcheck that fetches a local URL into an HTTP
// check of its path.
func composeHealth(h *types.HealthCheckConfig) *spec.Health {
	if h == nil || h.Disable {
		return nil
	}
	m := healthURLRE.FindStringSubmatch(strings.Join(h.Test, " "))
	if m == nil {
		return nil
	}
	if strings.ContainsFunc(m[1], isSpaceOrControl) {
		return nil
	}
	hc := &spec.Health{Path: m[1]}
	if h.Interval != nil && *h.Interval > 0 {
		hc.Interval = spec.Duration(time.Duration(*h.Interval))
	}
	if h.Timeout != nil && *h.Timeout > 0 {
		hc.Timeout = spec.Duration(time.Duration(*h.Timeout))
	}
	// The timeout must be shorter than the interval; what breaks that is
	// left to the defaults.
	interval, timeout := time.Duration(hc.Interval), time.Duration(hc.Timeout)
	if interval == 0 {
		interval = spec.DefaultHealthInterval
	}
	if timeout == 0 {
		timeout = spec.DefaultHealthTimeout
	}
	if timeout >= interval {
		hc.Interval, hc.Timeout = 0, 0
	}
	return hc
}

// composeResources reads a service's CPU and memory limits.
func composeResources(s types.ServiceConfig) *spec.Resources {
	var r spec.Resources
	cpus, mem := float64(s.CPUS), int64(s.MemLimit)
	if s.Deploy != nil && s.Deploy.Resources.Limits != nil {
		if l := s.Deploy.Resources.Limits; l.NanoCPUs > 0 {
			cpus = float64(l.NanoCPUs)
		}
		if l := s.Deploy.Resources.Limits; l.MemoryBytes > 0 {
			mem = int64(l.MemoryBytes)
		}
	}
	if cpus > 0 && cpus < 1e6 {
		r.CPUMillis = int64(cpus * 1000)
	}
	if mem > 0 {
		r.MemoryBytes = mem
	}
	if r == (spec.Resources{}) {
		return nil
	}
	return &r
}

func isControl(r rune) bool        { return r < 0x20 || r == 0x7f }
func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }
