// Package jobtemplates holds the Nomad job templates (Nomad's JSON job
// format written as Go text templates: a service job for the workloads of a
// spec revision, a batch job for builds), embedded in the binary and
// overridable from an operator directory. Rendering them is pure: a spec
// revision and a deployment in, a job out.
//
// It must not import Nomad's client or talk to Nomad; scheduler/nomad
// renders and registers. The templates arrive with the cluster issue; until
// then this package only reserves its place in the layout.
package jobtemplates
