package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
	"slices"
	"strings"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// A release is what a deployment shipped: its spec revision, the source it
// was created with (Deployment.Source: a commit, or an archive's digest,
// and the checkout that holds it) and each workload's build
// (Deployment.Builds, Deployment.Artifacts). It never changes once the
// deployment has started.
//
// Builds are keyed (BuildKey) by what makes the built tree: the source's
// identity and the workload's build section, with the runtime that built
// it and the isolation and egress list the build ran under. A deploy whose
// key matches a kept build starts that artifact without building; a source
// change always changes the key, a change of env, run, resources, mounts,
// dependencies or volumes never does. Rollback ships its target again,
// exactly: the target's revision, source and artifacts.

// WorkloadBuild is how a deployment got a workload's artifact.
type WorkloadBuild struct {
	// Key is the build key (BuildKey); empty when the deployment's source
	// had no identity to key by (a record from before sources were
	// recorded, or an app without a commit).
	Key string `json:"key,omitempty"`
	// BuiltBy is the deployment whose build made the artifact: this one,
	// or the earlier one whose kept artifact it started again.
	BuiltBy string `json:"built_by"`
}

// buildKeyVersion is the first field of every build key's input; a change
// of what keys mean changes it, so that no old key matches a new one.
const buildKeyVersion = 1

// BuildKey is the identity of a workload's build: two builds with one key
// make the same tree, so the artifact of one serves the other. Its input:
//
//   - the source's identity: its kind, commit (a git commit, or
//     sha256:<hex> of an uploaded archive) and subdirectory; the
//     repository's address is left out (a commit names its tree wherever
//     it is fetched from), and so is the checkout ID (two uploads of the
//     same archive are one source);
//   - the workload's build section as the deploy runs it (absent: a
//     command build of the source's root), the context cleaned;
//   - the runtime adapter that builds (artifacts are each runtime's own);
//   - the isolation the build must run at and the egress list it may
//     reach (host policy's min_build_isolation and egress_allowlist): what
//     a build could read and fetch is part of what it made, so a tighter
//     policy never starts an artifact built under a looser one.
//
// The workload's run section, env (builds get a clean environment, never
// the app's), resources, mounts, dependencies and the app's volumes and
// slots are not in it: changing them restarts, never rebuilds. Neither is
// the build's time limit (a build that finished made its tree). BuildKey
// is "" when the source has no commit: such a build is never reused.
func BuildKey(runtimeID string, src *apps.Source, b *spec.Build, isolation string, egress []string) string {
	if src == nil || src.Commit == "" {
		return ""
	}
	eb := effectiveBuild(b)
	egress = slices.Clone(egress)
	slices.Sort(egress)
	in := struct {
		V         int        `json:"v"`
		Runtime   string     `json:"runtime"`
		Kind      string     `json:"source_kind"`
		Commit    string     `json:"commit"`
		Subdir    string     `json:"subdir"`
		Build     spec.Build `json:"build"`
		Isolation string     `json:"isolation"`
		Egress    []string   `json:"egress"`
	}{buildKeyVersion, runtimeID, src.Kind, src.Commit, cleanRel(src.Subdir), eb, isolation, egress}
	b2, err := json.Marshal(in)
	if err != nil {
		return "" // plain strings always encode
	}
	sum := sha256.Sum256(b2)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// effectiveBuild is the build a workload's section asks for: absent, a
// command build of the source's root; its context cleaned ("." for the
// root).
func effectiveBuild(b *spec.Build) spec.Build {
	out := spec.Build{Kind: spec.BuildCommand, Context: "."}
	if b != nil {
		out = *b
	}
	out.Context = cleanRel(out.Context)
	return out
}

// cleanRel cleans a slash-separated relative path; "" and "." are ".".
func cleanRel(p string) string {
	if p == "" {
		return "."
	}
	return path.Clean(strings.TrimPrefix(p, "./"))
}

// sameSource says whether two deployments' sources are one source (kind,
// commit and subdirectory); two without one are the same as each other.
func sameSource(a, b *apps.Source) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && a.Commit == b.Commit && cleanRel(a.Subdir) == cleanRel(b.Subdir)
}

// shipsSame says whether deployment d shipped what the release runs: the
// same spec and the same source (so the same builds, policy aside).
func shipsSame(d Deployment, rel Release) bool {
	return d.SpecID == rel.SpecID && sameSource(d.Source, rel.Source)
}

// rollbackTarget is the deployment a rollback ships again: among an app's
// deployments (newest first), the newest that succeeded and shipped
// something else than the release (another spec or another source). Those
// that shipped what the release runs (its own deployment, a redeploy, a
// secret rotation, the deployment an earlier rollback restored) are
// passed over, so that a second rollback goes one release further back.
func rollbackTarget(deps []Deployment, rel Release, hasRel bool) (Deployment, bool) {
	for _, d := range deps {
		if d.State != DepSucceeded {
			continue
		}
		if hasRel && (d.ID == rel.DeploymentID || shipsSame(d, rel)) {
			continue
		}
		return d, true
	}
	return Deployment{}, false
}

// artifactSet names the set of artifacts a deployment ran (their IDs,
// sorted): deployments that started the same builds count as one release
// when builds are kept.
func artifactSet(d Deployment) string {
	ids := make([]string, 0, len(d.Artifacts))
	for _, a := range d.Artifacts {
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return strings.Join(ids, "\x00")
}

// keptDeployments are the deployments of an app (newest first) whose
// builds stay on the runtimes' disks and whose sources stay in the work
// dir: the active ones, the release's, and the successful ones that ran
// the KeepBuilds most recent sets of builds (a redeploy, a secret rotation
// or an env-only change starts the same builds and counts once). A
// deleted app keeps only its active deployments'.
func keptDeployments(deps []Deployment, rel Release, hasRel, gone bool) []Deployment {
	var out []Deployment
	sets := map[string]bool{}
	for _, d := range deps {
		switch {
		case d.Active():
			out = append(out, d)
		case gone:
		case hasRel && d.ID == rel.DeploymentID:
			sets[artifactSet(d)] = true
			out = append(out, d)
		case d.State == DepSucceeded:
			set := artifactSet(d)
			if !sets[set] {
				if len(sets) >= KeepBuilds {
					continue
				}
				sets[set] = true
			}
			out = append(out, d)
		}
	}
	return out
}

// keptArtifacts are the IDs of the artifacts keptDeployments name, with
// the release's.
func keptArtifacts(deps []Deployment, rel Release, hasRel, gone bool) map[string]bool {
	keep := map[string]bool{}
	if hasRel && !gone {
		for _, a := range rel.Artifacts {
			keep[a.ID] = true
		}
	}
	for _, d := range keptDeployments(deps, rel, hasRel, gone) {
		for _, a := range d.Artifacts {
			keep[a.ID] = true
		}
	}
	return keep
}

// keptBuild is a kept artifact and the build that made it.
type keptBuild struct {
	Artifact Artifact
	Build    WorkloadBuild
}

// keptBuilds are the builds of an app's kept deployments by build key, on
// one runtime: those a deploy may start again without building. The
// newest deployment's wins a key.
func keptBuilds(deps []Deployment, rel Release, hasRel bool, runtimeID string) map[string]keptBuild {
	out := map[string]keptBuild{}
	for _, d := range keptDeployments(deps, rel, hasRel, false) {
		if d.Runtime != runtimeID {
			continue
		}
		for name, b := range d.Builds {
			a, ok := d.Artifacts[name]
			if _, seen := out[b.Key]; !ok || b.Key == "" || seen {
				continue
			}
			out[b.Key] = keptBuild{Artifact: a, Build: b}
		}
	}
	return out
}

// KeptCheckouts are the checkouts (source.Checkout IDs) of an app's
// releases whose builds are kept (keptDeployments), which the app's work
// dir keeps besides its current checkout: a rollback whose artifact is
// lost builds again from its own source, never from the current one. It
// reads the store only; the composition root gives it to the source
// service.
func KeptCheckouts(r *raftstore.Reader, appID string) []string {
	deps := appDeployments(r, appID, 0)
	rel, _, hasRel := Releases.Get(r, appID)
	var out []string
	add := func(src *apps.Source) {
		if src != nil && src.CheckoutID != "" && !slices.Contains(out, src.CheckoutID) {
			out = append(out, src.CheckoutID)
		}
	}
	if hasRel {
		add(rel.Source)
	}
	for _, d := range keptDeployments(deps, rel, hasRel, !apps.Exists(r, appID)) {
		add(d.Source)
	}
	return out
}

// appDeployments lists an app's deployments, newest first; at most limit
// of them (0: every one).
func appDeployments(r *raftstore.Reader, appID string, limit int) []Deployment {
	items, _ := Deployments.List(r, raftstore.Query{Index: "app", Key: raftstore.Key(appID, ""), Prefix: true, Reverse: true, Limit: limit})
	out := make([]Deployment, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}
