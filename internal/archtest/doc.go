// Package archtest holds no code, only tests that enforce the architecture of
// the module: which packages may import which libraries and which of our own
// packages, that production code never links fakes, that every package says
// what it owns in a doc comment and that no package has a grab-bag name, and
// that NOTICE lists every module the svc binary links.
//
// The tests run the go command ("go list") from the module root, so they
// need the go tool on PATH, as "go test" itself does.
package archtest
