package browsertest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// outcome records how a test ended, without ending the real one.
type outcome struct {
	testing.TB
	skipped, failed string
}

func (o *outcome) Helper()                      {}
func (o *outcome) Skip(args ...any)             { o.skipped = fmt.Sprint(args...); runtime.Goexit() }
func (o *outcome) Fatal(args ...any)            { o.failed = fmt.Sprint(args...); runtime.Goexit() }
func (o *outcome) Fatalf(f string, args ...any) { o.failed = fmt.Sprintf(f, args...); runtime.Goexit() }

func ended(f func(tb testing.TB)) *outcome {
	o := &outcome{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(o)
	}()
	<-done
	return o
}

// TestWithoutABrowser: no browser skips a test, unless SVC_REQUIRE_BROWSER=1
// says one is required; then the test fails.
func TestWithoutABrowser(t *testing.T) {
	t.Setenv(EnvRequire, "")
	if o := ended(noBrowser); o.skipped == "" || o.failed != "" {
		t.Errorf("without the requirement: %+v, want a skip", o)
	}
	t.Setenv(EnvRequire, "1")
	if o := ended(noBrowser); o.failed == "" || !strings.Contains(o.failed, EnvRequire) || o.skipped != "" {
		t.Errorf("required: %+v, want a failure naming %s", o, EnvRequire)
	}
}

// TestABrowserRunsScripts starts the real browser and runs a script in a
// page of its own.
func TestABrowserRunsScripts(t *testing.T) {
	tab := Start(t, Options{}).Tab()
	tab.Go("data:text/html,<title>x</title>")
	var sum int
	tab.MustEval(`Promise.resolve(20 + 22)`, &sum)
	if sum != 42 {
		t.Errorf("20 + 22 = %d in the browser", sum)
	}
	if err := tab.Eval(`(() => { throw new Error("boom") })()`, nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a throwing script: %v", err)
	}
}

// TestSetFilesChoosesAFile: SetFiles gives a file input a file of this
// machine, whose change event the page hears and whose content it reads.
func TestSetFilesChoosesAFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "chosen.txt")
	if err := os.WriteFile(p, []byte("the file's own words"), 0o644); err != nil {
		t.Fatal(err)
	}
	tab := Start(t, Options{}).Tab()
	tab.Go("data:text/html,<input type=file id=f>")
	tab.MustEval(`(() => { window.__read = new Promise((r) => document.getElementById("f").addEventListener("change", (e) => {
  const f = e.target.files[0]; f.text().then((text) => r(f.name + ": " + text)); })); return true; })()`, nil)
	tab.SetFiles("#f", p)
	var got string
	tab.MustEval(`window.__read`, &got)
	if got != "chosen.txt: the file's own words" {
		t.Errorf("the page read %q from the chosen file", got)
	}
}
