package detect

import (
	"path"
	"slices"
	"strings"

	"github.com/svchost/svc/internal/spec"
)

// weigh marks b unrunnable when its proposal has a build the runtime does
// not run, with one piece of evidence per such build kind saying so. A
// runtime whose builds are not known runs everything.
func (rt Runtime) weigh(b *Bid) {
	if len(rt.Builds) == 0 {
		return
	}
	names := make([]string, 0, len(b.Proposal.Workloads))
	for n := range b.Proposal.Workloads {
		names = append(names, n)
	}
	slices.Sort(names)
	seen := map[string]bool{}
	for _, n := range names {
		build := b.Proposal.Workloads[n].Build
		if build == nil || slices.Contains(rt.Builds, build.Kind) || seen[build.Kind] {
			continue
		}
		seen[build.Kind] = true
		b.unrunnable = true
		b.evidence(buildEvidencePath(*b, *build), "%s; it builds %s", rt.cannot(build.Kind), strings.Join(rt.Builds, ", "))
	}
}

// cannot says what the runtime cannot do with a build kind.
func (rt Runtime) cannot(kind string) string {
	who := "the runtime"
	if rt.Kind != "" {
		who = "the " + rt.Kind + " runtime"
	}
	switch kind {
	case spec.BuildDockerfile:
		return who + " cannot build Dockerfiles"
	case spec.BuildImage:
		return who + " cannot run container images"
	}
	return who + " cannot run " + kind + " builds"
}

// buildEvidencePath is the file a build comes from: its Dockerfile, else
// the file the bid was made from.
func buildEvidencePath(b Bid, build spec.Build) string {
	if build.Kind == spec.BuildDockerfile {
		file := build.Dockerfile
		if file == "" {
			file = "Dockerfile"
		}
		return path.Join(build.Context, file)
	}
	if len(b.Evidence) > 0 {
		return b.Evidence[0].Path
	}
	return "."
}
