package ai

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkSummarize: the summary of a 10,000-file repository (each
// hundredth directory with a go.mod, a package.json and a Dockerfile),
// with the default bounds: the walk, the reads of the chosen files and the
// redaction, all a screening does on this server before the request.
func BenchmarkSummarize(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{}
	for i := range 10_000 {
		d := fmt.Sprintf("pkg%03d", i/100)
		switch i % 100 {
		case 0:
			files[d+"/go.mod"] = "module example.com/" + d + "\n\ngo 1.26\n\nrequire golang.org/x/text v0.3.7\n"
		case 1:
			files[d+"/package.json"] = `{"name":"x","dependencies":{"left-pad":"1.3.0"}}` + "\n"
		case 2:
			files[d+"/Dockerfile"] = "FROM alpine\n" + strings.Repeat("RUN echo step\n", 200)
		default:
			files[fmt.Sprintf("%s/f%02d.go", d, i%100)] = "package x\n\nfunc F() int { return 1 }\n"
		}
	}
	write(b, dir, files)
	ctx := context.Background()
	for b.Loop() {
		sum, err := summarize(ctx, dir, doc, nil, DefaultMaxFiles, DefaultMaxBytes)
		if err != nil || len(sum.files) != 10_000 {
			b.Fatal(err, len(sum.files))
		}
	}
}
