package nomad

import "github.com/svchost/svc/scheduler"

// PublishForTest publishes an artifact and returns its SHA-256.
func (a *Artifacts) PublishForTest(art scheduler.Artifact) (string, error) {
	p, err := a.Publish(art)
	return p.SHA256, err
}

// LookupForTest says whether an artifact is stored, with its SHA-256.
func (a *Artifacts) LookupForTest(id string) (string, bool) {
	p, ok := a.Lookup(id)
	return p.SHA256, ok
}

// CheckTarGzForTest is the upload checker.
var CheckTarGzForTest = checkTarGz

// UnpackTreeForTest is what a volume copied out is unpacked with.
var UnpackTreeForTest = unpackTree
