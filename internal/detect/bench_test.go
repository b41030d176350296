package detect

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// typicalRepo is a Node.js service of about 500 files: sources, tests,
// assets, docs, a compose file and a Dockerfile, plus a node_modules and a
// .git that detection skips.
func typicalRepo() fstest.MapFS {
	fsys := fstest.MapFS{}
	add := func(p, s string) { fsys[p] = &fstest.MapFile{Data: []byte(s), Mode: 0o644} }
	add("package.json", `{"name": "shop", "scripts": {"start": "node src/server.js", "build": "tsc"}, "dependencies": {"express": "4", "pg": "8"}}`)
	add("package-lock.json", `{"lockfileVersion": 3}`)
	add("Dockerfile", "FROM node:20\nWORKDIR /app\nCOPY . .\nRUN npm ci\nEXPOSE 3000\nCMD [\"npm\", \"start\"]\n")
	add("compose.yaml", "services:\n  web:\n    build: .\n    ports: [\"3000:3000\"]\n    environment:\n      DATABASE_URL: postgres://shop:shop@db:5432/shop\n  db:\n    image: postgres:16\n")
	add(".env.example", "DATABASE_URL=postgres://localhost/shop\nSESSION_SECRET=\n")
	add("README.md", "# shop\n")
	add("src/server.js", "const app = require('express')();\napp.listen(process.env.PORT || 3000);\n")
	for i := range 200 {
		add(fmt.Sprintf("src/modules/m%03d/index.js", i), fmt.Sprintf("module.exports = function m%d(req, res) { res.json({ n: %d, env: process.env.NODE_ENV }) }\n", i, i))
	}
	for i := range 120 {
		add(fmt.Sprintf("test/m%03d.test.js", i), "test('works', () => {})\n")
	}
	for i := range 100 {
		add(fmt.Sprintf("public/img/i%03d.svg", i), "<svg/>")
	}
	for i := range 70 {
		add(fmt.Sprintf("docs/page%02d.md", i), "# page\n")
	}
	for i := range 300 {
		add(fmt.Sprintf("node_modules/dep%03d/index.js", i), "module.exports = {}\n")
	}
	for i := range 50 {
		add(fmt.Sprintf(".git/objects/%02d/obj", i), "blob")
	}
	return fsys
}

func BenchmarkDetectTypicalRepo(b *testing.B) {
	repo := typicalRepo()
	n := 0
	for p := range repo {
		if !skipped(p) {
			n++
		}
	}
	b.Run(fmt.Sprintf("MapFS/%d-files", n), func(b *testing.B) {
		for b.Loop() {
			if r := Detect(repo, nil, Runtime{}); r.Winner == nil || r.Winner.Detector != "compose" {
				b.Fatalf("winner = %+v", r.Winner)
			}
		}
	})
	dir := b.TempDir()
	for p, f := range repo {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, f.Data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	dirFS := os.DirFS(dir)
	b.Run(fmt.Sprintf("DirFS/%d-files", n), func(b *testing.B) {
		for b.Loop() {
			if r := Detect(dirFS, nil, Runtime{}); r.Winner == nil || r.Winner.Detector != "compose" {
				b.Fatalf("winner = %+v", r.Winner)
			}
		}
	})
}

// skipped reports whether the walk leaves p out.
func skipped(p string) bool {
	for dir := filepath.Dir(p); dir != "."; dir = filepath.Dir(dir) {
		if skipDirs[filepath.Base(dir)] {
			return true
		}
	}
	return false
}

// goRepo is a Go service of about 200 files that ships a Dockerfile and
// takes its port from a flag declared in cmd/<name>, where most Go
// services declare their flags; a few other files mention ports.
func goRepo() fstest.MapFS {
	fsys := fstest.MapFS{}
	add := func(p, s string) { fsys[p] = &fstest.MapFile{Data: []byte(s), Mode: 0o644} }
	add("go.mod", "module github.com/acme/api\n\ngo 1.24\n\nrequire github.com/lib/pq v1.10.9\n")
	add("Dockerfile", "FROM golang:1 AS build\nCOPY . .\nRUN go build -o /api ./cmd/api\nFROM scratch\nCOPY --from=build /api /api\nEXPOSE 80\nENTRYPOINT [\"/api\"]\n")
	add("cmd/api/main.go", "package main\n\nimport \"flag\"\n\nvar (\n\tport = flag.Int(\"http-port\", 8000, \"HTTP port\")\n\tmetrics = flag.String(\"metrics-addr\", \":9100\", \"metrics address\")\n)\n\nfunc main() { flag.Parse(); run(*port) }\n")
	for i := range 200 {
		body := fmt.Sprintf("package api\n\n// Handler%d serves part %d.\nfunc Handler%d(w http.ResponseWriter, r *http.Request) {\n\tw.Write([]byte(%q))\n}\n", i, i, i, "ok")
		if i%50 == 0 {
			body += "\n// A client of another service's port.\nvar peer = config.String(\"peer\", \"db:5432\", \"the peer's address\")\n"
		}
		add(fmt.Sprintf("internal/api/h%03d.go", i), body)
	}
	return fsys
}

func BenchmarkDetectGoRepo(b *testing.B) {
	repo := goRepo()
	for _, rt := range []Runtime{{}, processRuntime} {
		want := map[bool]string{true: "dockerfile", false: "go"}[rt.Kind == ""]
		b.Run(fmt.Sprintf("runtime=%q", rt.Kind), func(b *testing.B) {
			for b.Loop() {
				if r := Detect(repo, nil, rt); r.Winner == nil || r.Winner.Detector != want {
					b.Fatalf("winner = %+v; want %s", r.Winner, want)
				}
			}
		})
	}
}
