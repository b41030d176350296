package jobtemplates

import "testing"

// BenchmarkRenderService is the job render time the Nomad runtime pays per
// deploy: ServiceData and the service template for the rich spec (two
// workloads, secrets, a volume, a health check).
func BenchmarkRenderService(b *testing.B) {
	var in ServiceInput
	for _, fx := range fixtures(b) {
		if fx.name == "rich" {
			in = serviceInput(fx)
		}
	}
	set := Default()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := set.RenderService(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderBuild is the same for one build job.
func BenchmarkRenderBuild(b *testing.B) {
	in := SampleBuildInput()
	set := Default()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := set.RenderBuild(in); err != nil {
			b.Fatal(err)
		}
	}
}
